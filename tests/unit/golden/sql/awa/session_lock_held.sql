SELECT count(*) FROM pg_locks
 WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid() AND objsubid = 1
   AND ((classid::bigint << 32) | objid::bigint) = %(key)s;
