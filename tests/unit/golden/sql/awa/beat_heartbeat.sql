INSERT INTO awa_beat.beats AS b (identity, host, pid, deployment, lock_key, role, started_at,
                                 leader_since, seen_at, last_lag_ms, publishes, clock_skew_ms)
VALUES (%(identity)s, %(host)s, %(pid)s, %(deployment)s, %(lock_key)s, %(role)s,
        %(started_at)s, %(leader_since)s, now(), %(last_lag_ms)s, %(publishes)s,
        %(clock_skew_ms)s)
ON CONFLICT (identity) DO UPDATE
   SET role = EXCLUDED.role, leader_since = EXCLUDED.leader_since, seen_at = now(),
       last_lag_ms = EXCLUDED.last_lag_ms, deployment = EXCLUDED.deployment,
       lock_key = EXCLUDED.lock_key, publishes = EXCLUDED.publishes,
       clock_skew_ms = EXCLUDED.clock_skew_ms;
