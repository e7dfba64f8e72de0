SELECT name, cron_expr, timezone, missed_fire_policy, last_enqueued_at, created_at,
       updated_at, paused_at
  FROM awa.cron_jobs;
