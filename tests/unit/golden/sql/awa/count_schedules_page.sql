SELECT count(*) FROM (
    SELECT 1
      FROM awa.cron_jobs c
      LEFT JOIN awa_beat.schedules s USING (name)
     WHERE (%(search)s::text IS NULL OR strpos(lower(c.name), %(search)s::text) > 0)
       AND (%(paused)s::boolean IS NULL OR (c.paused_at IS NOT NULL) = %(paused)s::boolean)
       AND (%(owner)s::text IS NULL OR s.deployment IS NOT DISTINCT FROM nullif(%(owner)s::text, ''))
       AND (%(owned_by)s::text IS NULL OR s.owner = %(owned_by)s::text)
       AND (%(names)s::text[] IS NULL OR c.name = ANY(%(names)s::text[]))
     LIMIT %(cap)s
) matching;
