UPDATE awa.cron_jobs SET paused_at = NULL, paused_by = NULL, updated_at = now()
 WHERE name = %(name)s
RETURNING name;
