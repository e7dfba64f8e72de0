UPDATE awa.cron_jobs c SET paused_at = NULL, paused_by = NULL, updated_at = clock_timestamp()
 WHERE c.name = %(name)s AND c.paused_at IS NOT NULL AND c.paused_by = %(retired_by)s
   AND (c.cron_expr !~ '^@.* runs=[0-9]+$'
        OR (regexp_match(c.cron_expr, ' runs=([0-9]+)$'))[1]::bigint
           > coalesce((SELECT r.runs FROM awa_beat.schedule_runs r WHERE r.name = c.name), 0))
RETURNING c.name;
