WITH snap AS MATERIALIZED (  -- once, not per row
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin,
           pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax
), stats AS (
    SELECT count(*) AS total, coalesce(sum(hashtext(name)::bigint), 0) AS fingerprint,
           statement_timestamp() AS db_now
      FROM awa.cron_jobs
)
SELECT s.total, s.fingerprint, s.db_now, snap.xmin,
       c.name, c.cron_expr, c.timezone, c.missed_fire_policy, c.last_enqueued_at,
       c.created_at, c.updated_at, c.paused_at
  FROM stats s CROSS JOIN snap
  LEFT JOIN awa.cron_jobs c
    ON c.updated_at > %(since)s
   AND (%(seen_xmin)s::bigint IS NULL
        OR snap.xmax - (snap.xmax - c.xmin::text::bigint) %% 4294967296
           >= %(seen_xmin)s::bigint);
