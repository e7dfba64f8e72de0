SELECT id, kind, queue, args, state::text AS state, metadata, created_at
  FROM awa.jobs
 WHERE metadata ? 'cron_name'
 ORDER BY id DESC
 LIMIT %(limit)s;
