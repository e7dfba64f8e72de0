SELECT j.id
  FROM awa.cron_jobs c CROSS JOIN LATERAL awa.insert_job_compat(
       c.kind, c.queue, c.args, 'available'::awa.job_state, c.priority, c.max_attempts, NULL,
       c.metadata || jsonb_build_object('cron_name', c.name, 'triggered_manually', true),
       c.tags, NULL, NULL) AS j
 WHERE c.name = %(name)s;
