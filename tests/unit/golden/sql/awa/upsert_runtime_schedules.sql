WITH at AS (
    SELECT clock_timestamp() AS t
), input AS (
    SELECT name, cron_expr, timezone, kind, queue, args::jsonb AS args, priority,
           max_attempts,
           ARRAY(SELECT jsonb_array_elements_text(tags::jsonb)) AS tags,
           metadata::jsonb AS metadata, missed_fire_policy
      FROM unnest(%(names)b::text[], %(cron_exprs)b::text[], %(timezones)b::text[],
                  %(kinds)b::text[], %(queues)b::text[], %(args)b::text[],
                  %(priorities)b::smallint[], %(max_attempts)b::smallint[],
                  %(tags)b::text[], %(metadata)b::text[], %(policies)b::text[])
           AS r(name, cron_expr, timezone, kind, queue, args, priority, max_attempts,
                tags, metadata, missed_fire_policy)
), written AS (
    INSERT INTO awa.cron_jobs AS c (
           name, cron_expr, timezone, kind, queue, args, priority, max_attempts, tags,
           metadata, missed_fire_policy, last_enqueued_at, created_at, updated_at)
    SELECT name, cron_expr, timezone, kind, queue, args, priority, max_attempts, tags,
           metadata, missed_fire_policy, date_trunc('second', at.t), at.t, at.t
      FROM input CROSS JOIN at
    ON CONFLICT (name) DO UPDATE
       SET cron_expr = EXCLUDED.cron_expr, timezone = EXCLUDED.timezone,
           kind = EXCLUDED.kind, queue = EXCLUDED.queue, args = EXCLUDED.args,
           priority = EXCLUDED.priority, max_attempts = EXCLUDED.max_attempts,
           tags = EXCLUDED.tags, metadata = EXCLUDED.metadata,
           missed_fire_policy = EXCLUDED.missed_fire_policy,
           last_enqueued_at = CASE
               WHEN (c.cron_expr, c.timezone) IS DISTINCT FROM
                    (EXCLUDED.cron_expr, EXCLUDED.timezone)
               THEN GREATEST(c.last_enqueued_at, EXCLUDED.last_enqueued_at)
               ELSE c.last_enqueued_at END,
           updated_at = EXCLUDED.updated_at
     WHERE %(replace)s::boolean
    RETURNING c.name, (xmax = 0) AS inserted
), owned AS (
    INSERT INTO awa_beat.schedules AS s (name, deployment, owner)
    SELECT name, %(deployment)s, 'runtime' FROM written
    ON CONFLICT (name) DO UPDATE
       SET deployment = EXCLUDED.deployment, owner = 'runtime', registered_at = now()
)
SELECT count(*) FILTER (WHERE inserted) AS inserted,
       count(*) FILTER (WHERE NOT inserted) AS updated,
       -- The names not written: existing ones without %(replace)s, else rows the
       -- database skipped (a trigger), which the caller must not take for written.
       ARRAY(SELECT i.name FROM input i WHERE i.name NOT IN (SELECT name FROM written)
              ORDER BY i.name) AS skipped
  FROM written;
