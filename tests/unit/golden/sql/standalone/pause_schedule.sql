UPDATE awa.cron_jobs SET paused_at = now(), paused_by = %(by)s, updated_at = now()
 WHERE name = %(name)s
RETURNING paused_at;
