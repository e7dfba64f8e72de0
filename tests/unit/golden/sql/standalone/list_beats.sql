SELECT b.identity, b.host, b.pid, b.deployment, b.lock_key, b.role, b.started_at,
       b.leader_since, b.seen_at, b.last_lag_ms, b.publishes, b.clock_skew_ms,
       now() - b.seen_at AS age,
       EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                  AND ((l.classid::bigint << 32) | l.objid::bigint) = b.lock_key
                  AND a.application_name = 'awa-beat leader ' || b.pid
                  AND l.database = (SELECT oid FROM pg_database
                                     WHERE datname = current_database())) AS holds_lock
  FROM awa_beat.beats b
 WHERE b.seen_at > now() - %(window)s::interval
 ORDER BY b.role, b.identity;
