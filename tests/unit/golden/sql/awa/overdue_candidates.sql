WITH sched AS (
    SELECT c.name, c.cron_expr, c.timezone, c.missed_fire_policy, c.last_enqueued_at,
           c.created_at, c.paused_at,
           (c.metadata -> 'awa_beat' ->> 'deadline')::float8 AS deadline,
           coalesce((c.metadata -> 'celery' ->> 'dispatch') = 'celery', false) AS celery,
           coalesce((c.metadata -> 'awa_beat' ->> 'max_runtime')::float8,
                    CASE WHEN jsonb_typeof(c.metadata -> 'celery' -> 'options' -> 'expires')
                              = 'number'
                         THEN (c.metadata -> 'celery' -> 'options' ->> 'expires')::float8 END,
                    %(default_max_runtime)s::float8) * interval '1 s' AS bound
      FROM awa.cron_jobs c
), awa_latest AS (
    SELECT DISTINCT ON (j.metadata ->> 'cron_name')
           j.metadata ->> 'cron_name' AS name, j.metadata ->> 'cron_fire_time' AS fire_time,
           j.state::text AS state, j.finalized_at
      FROM awa.jobs j
     WHERE j.metadata ? 'cron_fire_time'
       AND (j.metadata -> 'celery' ->> 'dispatch') IS DISTINCT FROM 'celery'
     ORDER BY j.metadata ->> 'cron_name', j.id DESC
)
SELECT s.name, s.cron_expr, s.timezone, s.missed_fire_policy, s.last_enqueued_at,
       s.created_at, s.paused_at, s.deadline,
       CASE WHEN s.celery THEN
                CASE WHEN o.state = 'started' AND o.started_at < now() - s.bound THEN 'lost'
                     ELSE o.state END
            ELSE CASE a.state WHEN 'completed' THEN 'succeeded' WHEN 'failed' THEN 'failed'
                              WHEN 'cancelled' THEN 'revoked' END
       END AS last_outcome,
       CASE WHEN s.celery THEN o.fire_time ELSE a.fire_time END AS last_run_fire_time,
       CASE WHEN s.celery THEN f.state
            ELSE CASE WHEN a.fire_time = s.last_enqueued_at::text AND a.state = 'completed'
                      THEN 'succeeded' END END AS cursor_outcome,
       CASE WHEN s.celery THEN f.finished_at
            WHEN a.fire_time = s.last_enqueued_at::text THEN a.finalized_at END
           AS cursor_finished_at
  FROM sched s
  LEFT JOIN LATERAL (
       SELECT o.fire_time, o.state, o.started_at FROM awa_beat.outcomes o
        WHERE s.celery AND o.schedule = s.name AND o.fire_time IS NOT NULL
        ORDER BY o.fire_time DESC LIMIT 1) o ON true
  LEFT JOIN awa_beat.outcomes f
         ON s.celery AND f.schedule = s.name AND f.fire_time = s.last_enqueued_at::text
  LEFT JOIN awa_latest a ON NOT s.celery AND a.name = s.name
 ORDER BY s.name;
