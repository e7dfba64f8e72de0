WITH asked AS (
    SELECT t AS fire_time, t::text AS fire_text, ord
      FROM unnest(%(fire_times)b::timestamptz[]) WITH ORDINALITY AS u(t, ord)
), fired AS (
    SELECT DISTINCT j.metadata ->> 'cron_fire_time' AS fire_text
      FROM awa.jobs j
     WHERE j.metadata ->> 'cron_name' = %(name)s AND j.metadata ? 'cron_name'
       AND j.metadata ->> 'cron_fire_time' BETWEEN (SELECT min(fire_text) FROM asked)
                                                AND (SELECT max(fire_text) FROM asked)
), wanted AS (
    SELECT a.* FROM asked a
     WHERE NOT EXISTS (SELECT FROM awa_beat.backfills b
                        WHERE b.schedule = %(name)s AND b.fire_time = a.fire_time)
       AND NOT EXISTS (SELECT FROM fired f WHERE f.fire_text = a.fire_text)
       AND NOT EXISTS (SELECT FROM awa_beat.outcomes o
                        WHERE o.schedule = %(name)s AND o.fire_time = a.fire_text)
), sched AS (
    SELECT c.name, c.kind, c.queue, c.args, c.priority, c.max_attempts, c.tags, c.metadata,
           c.last_enqueued_at
      FROM awa.cron_jobs c WHERE c.name = %(name)s
), inserted AS (
    INSERT INTO awa.jobs (kind, queue, args, state, priority, max_attempts, metadata, tags)
    SELECT s.kind, s.queue, s.args, 'available', s.priority, s.max_attempts,
           s.metadata || jsonb_build_object('cron_name', s.name, 'cron_fire_time', w.fire_text,
                                            'backfilled', true),
           s.tags
      FROM sched s JOIN wanted w ON w.fire_time <= s.last_enqueued_at
     ORDER BY w.ord
    RETURNING id, (metadata ->> 'cron_fire_time')::timestamptz AS fire_time
), recorded AS (
    INSERT INTO awa_beat.backfills (schedule, fire_time, job_id, backfilled_by)
    SELECT %(name)s, i.fire_time, i.id, %(by)s FROM inserted i
    ON CONFLICT (schedule, fire_time) DO NOTHING
)
SELECT fire_time, id FROM inserted ORDER BY fire_time;
