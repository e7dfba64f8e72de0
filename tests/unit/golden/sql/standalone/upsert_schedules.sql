WITH input AS (
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
), changed AS (
    -- ON CONFLICT DO UPDATE locks every row it meets, even one its WHERE then leaves
    -- alone (a lock is a write, logged): rows stored as given are left out first, so a
    -- restart with an unchanged schedule writes nothing. A row changed by another
    -- transaction after this snapshot is left as that one wrote it.
    -- Probed by name, row by row (OFFSET 0 keeps the lateral subquery a parameterized
    -- index scan): a hash join would read the whole table for every batch.
    -- JSON is compared as text, as awa_beat.definition_hash sees it (config_in_force):
    -- 30 and 30.0 are equal as jsonb, but a row kept as 30 while the configuration
    -- says 30.0 would never match the configuration's record.
    SELECT i.* FROM input i
      LEFT JOIN LATERAL (SELECT c.name, c.cron_expr, c.timezone, c.kind, c.queue, c.args,
                                c.priority, c.max_attempts, c.tags, c.metadata,
                                c.missed_fire_policy
                           FROM awa.cron_jobs c WHERE c.name = i.name OFFSET 0) c
        ON true
     WHERE c.name IS NULL
        OR (c.cron_expr, c.timezone, c.kind, c.queue, c.args::text, c.priority,
            c.max_attempts, c.tags, c.metadata::text, c.missed_fire_policy)
           IS DISTINCT FROM
           (i.cron_expr, i.timezone, i.kind, i.queue, i.args::text, i.priority,
            i.max_attempts, i.tags, i.metadata::text, i.missed_fire_policy)
), upserted AS (
    INSERT INTO awa.cron_jobs AS c (
           name, cron_expr, timezone, kind, queue, args, priority, max_attempts, tags,
           metadata, missed_fire_policy, last_enqueued_at)
    SELECT name, cron_expr, timezone, kind, queue, args, priority, max_attempts, tags,
           metadata, missed_fire_policy, date_trunc('second', now())
      FROM changed
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
           updated_at = now()
     WHERE (c.cron_expr, c.timezone, c.kind, c.queue, c.args::text, c.priority,
            c.max_attempts, c.tags, c.metadata::text, c.missed_fire_policy)
           IS DISTINCT FROM
           (EXCLUDED.cron_expr, EXCLUDED.timezone, EXCLUDED.kind, EXCLUDED.queue,
            EXCLUDED.args::text, EXCLUDED.priority, EXCLUDED.max_attempts, EXCLUDED.tags,
            EXCLUDED.metadata::text, EXCLUDED.missed_fire_policy)
       AND NOT EXISTS (SELECT FROM awa_beat.schedules o
                        WHERE o.name = c.name AND o.owner = 'runtime')
    RETURNING (xmax = 0) AS inserted
), owned AS (
    INSERT INTO awa_beat.schedules AS s (name, deployment)
    SELECT i.name, %(deployment)s FROM input i
      LEFT JOIN LATERAL (SELECT o.deployment FROM awa_beat.schedules o
                          WHERE o.name = i.name OFFSET 0) o ON true
     WHERE o.deployment IS DISTINCT FROM %(deployment)s
    ON CONFLICT (name) DO UPDATE SET deployment = EXCLUDED.deployment
     WHERE s.deployment IS DISTINCT FROM EXCLUDED.deployment AND s.owner = 'config'
)
SELECT count(*) FILTER (WHERE inserted) AS inserted,
       count(*) FILTER (WHERE NOT inserted) AS updated,
       -- What these rows come to once stored (config_syncs): hashed from the input,
       -- not read back, so a concurrent writer's rows never count as ours.
       (SELECT coalesce(sum(awa_beat.definition_hash(
                   name, cron_expr, timezone, kind, queue, args, priority, max_attempts,
                   tags, metadata, missed_fire_policy)), 0)
          FROM input) AS fingerprint
  FROM upserted;
