SELECT c.name, c.cron_expr, c.timezone, c.kind, c.queue, c.args, c.priority, c.max_attempts,
       c.tags, c.metadata, c.missed_fire_policy, c.last_enqueued_at, c.created_at,
       c.updated_at, c.paused_at, c.paused_by, s.deployment, s.owner, n.note AS pause_note
  FROM awa.cron_jobs c
  LEFT JOIN awa_beat.schedules s USING (name)
  LEFT JOIN awa_beat.pause_notes n ON n.name = c.name AND n.paused_at = c.paused_at
 WHERE (%(after)s::text IS NULL OR c.name > %(after)s::text)
   AND (%(search)s::text IS NULL OR strpos(lower(c.name), %(search)s::text) > 0)
   AND (%(paused)s::boolean IS NULL OR (c.paused_at IS NOT NULL) = %(paused)s::boolean)
   AND (%(owner)s::text IS NULL OR s.deployment IS NOT DISTINCT FROM nullif(%(owner)s::text, ''))
   AND (%(owned_by)s::text IS NULL OR s.owner = %(owned_by)s::text)
   AND (%(names)s::text[] IS NULL OR c.name = ANY(%(names)s::text[]))
 ORDER BY c.name
 LIMIT %(limit)s;
