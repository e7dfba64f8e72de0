WITH gone AS (DELETE FROM awa.cron_jobs WHERE name = %(name)s RETURNING name),
     unowned AS (DELETE FROM awa_beat.schedules WHERE name IN (SELECT name FROM gone)),
     uncounted AS (DELETE FROM awa_beat.schedule_runs WHERE name IN (SELECT name FROM gone)),
     unbackfilled AS (DELETE FROM awa_beat.backfills
                       WHERE schedule IN (SELECT name FROM gone))
SELECT count(*) AS removed FROM gone;
