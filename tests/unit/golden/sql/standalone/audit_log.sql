SELECT id, at, actor, source, remote_addr, action, schedule, detail, outcome
  FROM awa_beat.audit_log
 WHERE (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
   AND (%(schedule)s::text IS NULL OR schedule = %(schedule)s::text)
 ORDER BY id DESC
 LIMIT %(limit)s;
