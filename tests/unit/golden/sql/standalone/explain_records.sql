WITH jobs AS (
    SELECT j.id, j.state::text AS job_state, j.created_at, j.run_at, j.finalized_at,
           j.metadata ->> 'cron_fire_time' AS fire_time,
           CASE WHEN coalesce((j.metadata ->> 'triggered_manually')::boolean, false)
                     THEN 'triggered'
                WHEN coalesce((j.metadata ->> 'buffered')::boolean, false) THEN 'buffered'
                WHEN coalesce((j.metadata ->> 'backfilled')::boolean, false) THEN 'backfilled'
                ELSE 'fired' END AS kind,
           (j.metadata -> 'celery' ->> 'dispatch') = 'celery' AS celery,
           j.metadata ->> 'celery_task_id' AS task_id
      FROM awa.jobs j
     WHERE j.metadata ? 'cron_name' AND j.metadata ->> 'cron_name' = %(name)s
       AND CASE WHEN j.metadata ? 'cron_fire_time'
                THEN (j.metadata ->> 'cron_fire_time')::timestamptz
                     = %(fire_time)s::timestamptz
                ELSE coalesce((j.metadata ->> 'triggered_manually')::boolean, false)
                     AND j.created_at >= %(second)s::timestamptz
                     AND j.created_at < %(second)s::timestamptz + interval '1 second' END
), bound AS (
    SELECT coalesce((c.metadata -> 'awa_beat' ->> 'max_runtime')::float8,
                    CASE WHEN jsonb_typeof(c.metadata -> 'celery' -> 'options' -> 'expires')
                              = 'number'
                         THEN (c.metadata -> 'celery' -> 'options' ->> 'expires')::float8 END,
                    %(default_max_runtime)s::float8) * interval '1 s' AS bound
      FROM awa.cron_jobs c WHERE c.name = %(name)s
)
SELECT 'job' AS source, j.kind, j.id AS job_id, j.job_state,
       CASE WHEN NOT j.celery THEN
                CASE j.job_state WHEN 'completed' THEN 'succeeded' WHEN 'failed' THEN 'failed'
                                 WHEN 'cancelled' THEN 'revoked' WHEN 'running' THEN 'started'
                                 WHEN 'retryable' THEN 'retried' END
            WHEN o.state = 'started' AND coalesce(o.started_at, j.created_at)
                 < now() - coalesce((SELECT b.bound FROM bound b),
                                    %(default_max_runtime)s::float8 * interval '1 s')
                 THEN 'lost'
            ELSE o.state END AS outcome,
       j.fire_time::timestamptz AS fire_time, j.created_at, j.run_at, o.started_at,
       coalesce(o.finished_at, CASE WHEN NOT j.celery THEN j.finalized_at END) AS finished_at,
       o.error, coalesce(o.task_id, j.task_id) AS task_id,
       NULL::timestamptz AS last_fire_time, 1 AS count, NULL::text AS reason,
       NULL::timestamptz AS recorded_at
  FROM jobs j
  LEFT JOIN LATERAL (
       SELECT o.task_id, o.state, o.started_at, o.finished_at, o.error
         FROM awa_beat.outcomes o
        WHERE o.schedule = %(name)s
          AND (o.fire_time = j.fire_time OR (j.fire_time IS NULL AND o.job_id = j.id))
        LIMIT 1) o ON true
UNION ALL
SELECT 'backfill', 'backfilled', b.job_id, NULL, NULL, b.fire_time, b.backfilled_at, NULL,
       NULL, NULL, NULL, NULL, NULL, 1, 'backfilled by ' || b.backfilled_by, NULL
  FROM awa_beat.backfills b
 WHERE b.schedule = %(name)s AND b.fire_time = %(fire_time)s::timestamptz
   AND NOT EXISTS (SELECT FROM jobs j WHERE j.id = b.job_id)
UNION ALL
SELECT 'occurrence', oc.kind, NULL, NULL, NULL, oc.fire_time, NULL, NULL, NULL, NULL, NULL,
       NULL, oc.last_fire_time, oc.count, oc.reason, oc.recorded_at
  FROM awa_beat.occurrences oc
 WHERE oc.schedule = %(name)s AND oc.fire_time <= %(fire_time)s::timestamptz
   AND coalesce(oc.last_fire_time, oc.fire_time) >= %(fire_time)s::timestamptz
 ORDER BY source, job_id, fire_time;
