WITH input AS (
    SELECT name, cron_expr, timezone, kind, queue, args::jsonb AS args, priority,
           max_attempts,
           ARRAY(SELECT jsonb_array_elements_text(tags::jsonb)) AS tags,
           metadata::jsonb AS metadata, missed_fire_policy,
           date_trunc('second', cursor) AS cursor, paused_by
      FROM unnest(%(names)b::text[], %(cron_exprs)b::text[], %(timezones)b::text[],
                  %(kinds)b::text[], %(queues)b::text[], %(args)b::text[],
                  %(priorities)b::smallint[], %(max_attempts)b::smallint[],
                  %(tags)b::text[], %(metadata)b::text[], %(policies)b::text[],
                  %(cursors)b::timestamptz[], %(paused_by)b::text[])
           AS r(name, cron_expr, timezone, kind, queue, args, priority, max_attempts,
                tags, metadata, missed_fire_policy, cursor, paused_by)
), before AS (
    SELECT c.name, c.last_enqueued_at,
           (c.cron_expr, c.timezone, c.kind, c.queue, c.args, c.priority, c.max_attempts,
            c.tags, c.metadata, c.missed_fire_policy)
           IS DISTINCT FROM
           (i.cron_expr, i.timezone, i.kind, i.queue, i.args, i.priority, i.max_attempts,
            i.tags, i.metadata, i.missed_fire_policy) AS changed
      FROM awa.cron_jobs c JOIN input i USING (name)
), with_cursor AS (
    INSERT INTO awa.cron_jobs AS c (
           name, cron_expr, timezone, kind, queue, args, priority, max_attempts, tags,
           metadata, missed_fire_policy, last_enqueued_at, paused_at, paused_by)
    SELECT name, cron_expr, timezone, kind, queue, args, priority, max_attempts, tags,
           metadata, missed_fire_policy, cursor,
           CASE WHEN paused_by IS NOT NULL THEN now() END, paused_by
      FROM input WHERE cursor IS NOT NULL
    ON CONFLICT (name) DO UPDATE
       SET cron_expr = EXCLUDED.cron_expr, timezone = EXCLUDED.timezone,
           kind = EXCLUDED.kind, queue = EXCLUDED.queue, args = EXCLUDED.args,
           priority = EXCLUDED.priority, max_attempts = EXCLUDED.max_attempts,
           tags = EXCLUDED.tags, metadata = EXCLUDED.metadata,
           missed_fire_policy = EXCLUDED.missed_fire_policy,
           last_enqueued_at = GREATEST(c.last_enqueued_at, EXCLUDED.last_enqueued_at),
           updated_at = now()
     WHERE (c.cron_expr, c.timezone, c.kind, c.queue, c.args, c.priority, c.max_attempts,
            c.tags, c.metadata, c.missed_fire_policy, c.last_enqueued_at)
           IS DISTINCT FROM
           (EXCLUDED.cron_expr, EXCLUDED.timezone, EXCLUDED.kind, EXCLUDED.queue,
            EXCLUDED.args, EXCLUDED.priority, EXCLUDED.max_attempts, EXCLUDED.tags,
            EXCLUDED.metadata, EXCLUDED.missed_fire_policy,
            GREATEST(c.last_enqueued_at, EXCLUDED.last_enqueued_at))
       AND (%(force)s::boolean OR NOT EXISTS (SELECT FROM awa_beat.schedules o
                                               WHERE o.name = c.name AND o.owner = 'runtime'))
    RETURNING c.name, (xmax = 0) AS inserted, c.last_enqueued_at
), without_cursor AS (
    INSERT INTO awa.cron_jobs AS c (
           name, cron_expr, timezone, kind, queue, args, priority, max_attempts, tags,
           metadata, missed_fire_policy, last_enqueued_at, paused_at, paused_by)
    SELECT name, cron_expr, timezone, kind, queue, args, priority, max_attempts, tags,
           metadata, missed_fire_policy, date_trunc('second', now()),
           CASE WHEN paused_by IS NOT NULL THEN now() END, paused_by
      FROM input WHERE cursor IS NULL
    ON CONFLICT (name) DO UPDATE
       SET cron_expr = EXCLUDED.cron_expr, timezone = EXCLUDED.timezone,
           kind = EXCLUDED.kind, queue = EXCLUDED.queue, args = EXCLUDED.args,
           priority = EXCLUDED.priority, max_attempts = EXCLUDED.max_attempts,
           tags = EXCLUDED.tags, metadata = EXCLUDED.metadata,
           missed_fire_policy = EXCLUDED.missed_fire_policy, updated_at = now()
     WHERE (c.cron_expr, c.timezone, c.kind, c.queue, c.args, c.priority, c.max_attempts,
            c.tags, c.metadata, c.missed_fire_policy)
           IS DISTINCT FROM
           (EXCLUDED.cron_expr, EXCLUDED.timezone, EXCLUDED.kind, EXCLUDED.queue,
            EXCLUDED.args, EXCLUDED.priority, EXCLUDED.max_attempts, EXCLUDED.tags,
            EXCLUDED.metadata, EXCLUDED.missed_fire_policy)
       AND (%(force)s::boolean OR NOT EXISTS (SELECT FROM awa_beat.schedules o
                                               WHERE o.name = c.name AND o.owner = 'runtime'))
    RETURNING c.name, (xmax = 0) AS inserted, c.last_enqueued_at
), owned AS (
    INSERT INTO awa_beat.schedules AS s (name, deployment)
    SELECT name, %(deployment)s FROM input
    ON CONFLICT (name) DO UPDATE SET deployment = EXCLUDED.deployment, owner = 'config'
     WHERE (s.deployment, s.owner) IS DISTINCT FROM (EXCLUDED.deployment, 'config')
       AND (%(force)s::boolean OR s.owner = 'config')
), written AS (
    SELECT * FROM with_cursor UNION ALL SELECT * FROM without_cursor
)
SELECT i.name, coalesce(w.inserted, false) AS inserted, coalesce(b.changed, false) AS changed,
       b.last_enqueued_at AS cursor_before,
       coalesce(w.last_enqueued_at, b.last_enqueued_at) AS cursor_after
  FROM input i LEFT JOIN before b USING (name) LEFT JOIN written w USING (name)
 ORDER BY i.name;
