SELECT id, kind, queue, args, state::text AS state, priority, max_attempts, metadata, tags,
       created_at, run_at, finalized_at
  FROM awa.jobs
 WHERE metadata ->> 'cron_name' = %(name)s
 ORDER BY id DESC
 LIMIT %(limit)s;
