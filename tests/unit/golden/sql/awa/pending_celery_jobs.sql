SELECT id, kind, args::text AS args, (metadata -> 'celery' -> 'options')::text AS options,
       metadata ->> 'cron_name' AS cron_name, metadata ->> 'cron_fire_time' AS cron_fire_time,
       created_at, coalesce(metadata ->> 'cron_fire_time', '') AS fire_key,
       coalesce((metadata -> 'awa_beat' ->> 'at_most_once')::boolean, false) AS at_most_once,
       CASE WHEN run_at > created_at THEN run_at END AS eta,
       coalesce((metadata ->> 'backfilled')::boolean, false) AS backfilled
  FROM awa.jobs
 WHERE state = 'available' AND (metadata -> 'celery' ->> 'dispatch') = 'celery'
   AND (metadata -> 'celery' ->> 'deployment') = %(deployment)s
   AND (coalesce(metadata ->> 'cron_fire_time', ''), id) > (%(after_fire)s::text, %(after_id)s::bigint)
   -- The fence: with a leader's lock session given, only while that session still holds
   -- the lock, so that a deposed leader which has not noticed yet reads nothing to send.
   AND (%(leader_pid)s::int IS NULL OR EXISTS (
        SELECT FROM pg_locks
         WHERE locktype = 'advisory' AND granted AND pid = %(leader_pid)s::int
           AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = %(lock_key)s::bigint))
 ORDER BY coalesce(metadata ->> 'cron_fire_time', ''), id
 LIMIT %(limit)s;
