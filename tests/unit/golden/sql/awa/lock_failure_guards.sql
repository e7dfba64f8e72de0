SELECT c.name FROM awa.cron_jobs c
 WHERE c.name = ANY(%(names)s::text[])
   AND jsonb_typeof(c.metadata -> 'awa_beat' -> 'pause_after_failures') = 'number'
   AND c.paused_at IS NULL
 ORDER BY c.name
   FOR NO KEY UPDATE;
