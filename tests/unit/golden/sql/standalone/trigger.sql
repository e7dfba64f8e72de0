INSERT INTO awa.jobs (kind, queue, args, state, priority, max_attempts, metadata, tags)
SELECT kind, queue, args, 'available', priority, max_attempts,
       metadata || jsonb_build_object('cron_name', name, 'triggered_manually', true), tags
  FROM awa.cron_jobs WHERE name = %(name)s
RETURNING id;
