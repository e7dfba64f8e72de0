WITH jobs AS (
    SELECT j.id, j.state::text AS job_state, j.created_at, j.finalized_at,
           j.metadata ->> 'cron_name' AS schedule,
           j.metadata ->> 'cron_fire_time' AS fire_time,
           coalesce((j.metadata ->> 'triggered_manually')::boolean, false) AS triggered,
           coalesce((j.metadata ->> 'backfilled')::boolean, false) AS backfilled,
           (j.metadata -> 'celery' ->> 'dispatch') = 'celery' AS celery,
           j.metadata ->> 'celery_task_id' AS task_id
      FROM awa.jobs j
     WHERE j.metadata ->> 'cron_name' = %(name)s
        OR (%(name)s::text IS NULL AND j.metadata ? 'cron_name')
     ORDER BY j.id DESC
     LIMIT %(limit)s
), bounds AS (
    SELECT c.name,
           coalesce((c.metadata -> 'awa_beat' ->> 'max_runtime')::float8,
                    CASE WHEN jsonb_typeof(c.metadata -> 'celery' -> 'options' -> 'expires')
                              = 'number'
                         THEN (c.metadata -> 'celery' -> 'options' ->> 'expires')::float8 END
                    ) * interval '1 s' AS bound
      FROM awa.cron_jobs c WHERE c.name IN (SELECT schedule FROM jobs)
), fired AS (
    SELECT j.schedule, CASE WHEN j.triggered THEN 'triggered'
                            WHEN j.backfilled THEN 'backfilled' ELSE 'fired' END AS kind,
           coalesce(j.fire_time::timestamptz, j.created_at) AS at, j.id AS job_id,
           coalesce(o.task_id, j.task_id) AS task_id, j.job_state,
           CASE WHEN NOT j.celery THEN
                    CASE j.job_state WHEN 'completed' THEN 'succeeded' WHEN 'failed' THEN 'failed'
                                     WHEN 'cancelled' THEN 'revoked' WHEN 'running' THEN 'started'
                                     WHEN 'retryable' THEN 'retried' END
                WHEN o.state = 'started' AND coalesce(o.started_at, j.created_at)
                     < now() - coalesce((SELECT b.bound FROM bounds b WHERE b.name = j.schedule),
                                        %(default_max_runtime)s::float8 * interval '1 s')
                     THEN 'lost'
                ELSE o.state END AS outcome,
           o.started_at, coalesce(o.finished_at, CASE WHEN NOT j.celery THEN j.finalized_at END)
               AS finished_at,
           o.runtime, o.worker, o.error, coalesce(o.duplicates, 0) AS duplicates,
           NULL::timestamptz AS last_fire_time, 1 AS count, NULL::text AS reason
      FROM jobs j
      LEFT JOIN LATERAL (
           SELECT o.task_id, o.state, o.started_at, o.finished_at, o.runtime, o.worker,
                  o.error, o.duplicates
             FROM awa_beat.outcomes o
            WHERE o.schedule = j.schedule
              AND (o.fire_time = j.fire_time OR (j.fire_time IS NULL AND o.job_id = j.id))
            LIMIT 1) o ON true
), passed_over AS (
    (SELECT schedule, kind, fire_time AS at, last_fire_time, count, reason
       FROM awa_beat.occurrences
      WHERE schedule = %(name)s
      ORDER BY fire_time DESC
      LIMIT %(limit)s)
    UNION ALL
    (SELECT schedule, kind, fire_time AS at, last_fire_time, count, reason
       FROM awa_beat.occurrences
      WHERE %(name)s::text IS NULL
      ORDER BY recorded_at DESC
      LIMIT %(limit)s)
), passed_over_rows AS (
    SELECT schedule, kind, at, NULL::bigint AS job_id, NULL::text AS task_id,
           NULL::text AS job_state, NULL::text AS outcome, NULL::timestamptz AS started_at,
           NULL::timestamptz AS finished_at, NULL::float8 AS runtime, NULL::text AS worker,
           NULL::text AS error, 0 AS duplicates, last_fire_time, count, reason
      FROM passed_over
)
SELECT * FROM (SELECT * FROM fired UNION ALL SELECT * FROM passed_over_rows) h
 ORDER BY at DESC, job_id DESC NULLS LAST
 LIMIT %(limit)s;
