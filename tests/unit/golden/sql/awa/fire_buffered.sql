WITH ready AS (
    SELECT h.name, h.buffered_fire_time, c.kind, c.queue, c.args, c.priority,
           c.max_attempts, c.tags, c.metadata
      FROM awa_beat.last_runs h JOIN awa.cron_jobs c ON c.name = h.name
     WHERE h.buffered_fire_time IS NOT NULL
       -- A retired schedule's held fire was one of its runs: it still starts.
       AND (c.paused_at IS NULL OR c.paused_by = %(retired_by)s::text)
       AND NOT EXISTS (
           SELECT FROM awa_beat.last_runs r
             LEFT JOIN awa_beat.outcomes o
                    ON o.schedule = r.name AND o.fire_time = r.fire_time
             LEFT JOIN awa.jobs j
                    ON j.id = r.job_id
                   AND (c.metadata -> 'celery' ->> 'dispatch') IS DISTINCT FROM 'celery'
            WHERE r.name = c.name
              AND coalesce(o.started_at, r.fired_at) > now()
                  - (c.metadata -> 'awa_beat' ->> 'max_runtime')::float8 * interval '1 s'
              AND CASE WHEN (c.metadata -> 'celery' ->> 'dispatch') = 'celery'
                       THEN o.state IS NULL OR o.state IN ('started', 'retried')
                       ELSE j.state::text IN ('scheduled', 'available', 'running',
                                              'retryable', 'waiting_external') END
       )
     ORDER BY h.buffered_fire_time, h.name
       FOR UPDATE OF h
), inserted AS (
    SELECT j.id, r.name, j.metadata ->> 'cron_fire_time' AS fire_time
      FROM ready r CROSS JOIN LATERAL awa.insert_job_compat(
           r.kind, r.queue, r.args, 'available'::awa.job_state, r.priority, r.max_attempts,
           NULL, r.metadata || jsonb_build_object('cron_name', r.name,
                                                  'cron_fire_time', r.buffered_fire_time::text,
                                                  'buffered', true),
           r.tags, NULL, NULL) AS j
), started AS (
    UPDATE awa_beat.last_runs r
       SET fire_time = i.fire_time, job_id = i.id, fired_at = now(), buffered_fire_time = NULL
      FROM inserted i
     WHERE r.name = i.name
)
SELECT id, name, fire_time, now() AS updated_at, NULL::bigint AS still_held FROM inserted
UNION ALL
SELECT NULL, NULL, NULL, now(),
       (SELECT count(*) FROM awa_beat.last_runs WHERE buffered_fire_time IS NOT NULL)
       - (SELECT count(*) FROM inserted);
