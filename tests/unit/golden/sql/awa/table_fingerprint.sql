SELECT count(*) AS total, coalesce(sum(hashtext(name)::bigint), 0) AS fingerprint,
       statement_timestamp() AS db_now,
       pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin
  FROM awa.cron_jobs;
