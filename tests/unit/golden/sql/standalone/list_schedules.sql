SELECT c.name, c.cron_expr, c.timezone, c.kind, c.queue, c.args, c.priority, c.max_attempts,
       c.tags, c.metadata, c.missed_fire_policy, c.last_enqueued_at, c.created_at,
       c.updated_at, c.paused_at, c.paused_by, s.deployment, s.owner
  FROM awa.cron_jobs c LEFT JOIN awa_beat.schedules s USING (name)
 WHERE %(pattern)s::text IS NULL OR c.name LIKE %(pattern)s
 ORDER BY c.name;
