(SELECT j.id AS job_id, j.metadata ->> 'cron_fire_time' AS fire_time, j.state::text AS state
   FROM awa.jobs j
  WHERE j.metadata ->> 'cron_name' = %(name)s AND j.metadata ? 'cron_name'
    AND (j.state::text IN ('scheduled', 'available', 'running', 'retryable', 'waiting_external')
         AND ((j.metadata -> 'celery' ->> 'dispatch') IS DISTINCT FROM 'celery'
              OR j.state::text = 'available'))
  ORDER BY j.id DESC
  LIMIT 1)
UNION ALL
(SELECT o.job_id, o.fire_time, o.state
   FROM awa_beat.outcomes o
  WHERE o.schedule = %(name)s AND o.state IN ('started', 'retried') AND o.finished_at IS NULL
  ORDER BY o.started_at DESC NULLS LAST
  LIMIT 1)
LIMIT 1;
