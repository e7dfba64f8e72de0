WITH guarded AS (
    SELECT c.name, (c.metadata -> 'awa_beat' ->> 'pause_after_failures')::int AS n,
           (SELECT p.paused_at FROM awa_beat.pause_notes p WHERE p.name = c.name) AS since
      FROM awa.cron_jobs c
     WHERE c.name = ANY(%(names)s::text[])
       AND jsonb_typeof(c.metadata -> 'awa_beat' -> 'pause_after_failures') = 'number'
       AND c.paused_at IS NULL
), latest AS (
    SELECT g.name, g.n, x.state, x.error, x.rank
      FROM guarded g CROSS JOIN LATERAL (
           SELECT o.state, o.error,
                  row_number() OVER (ORDER BY o.fire_time::timestamptz DESC) AS rank
             FROM awa_beat.outcomes o
            WHERE o.schedule = g.name AND o.fire_time IS NOT NULL
              AND (g.since IS NULL OR o.fire_time::timestamptz > g.since)
            ORDER BY o.fire_time::timestamptz DESC
            LIMIT g.n) x
), failing AS (
    SELECT name, n, min(error) FILTER (WHERE rank = 1) AS error
      FROM latest
     GROUP BY name, n
    HAVING count(*) = n AND bool_and(state = 'failed')
), paused AS (
    UPDATE awa.cron_jobs c SET paused_at = now(), paused_by = %(by)s, updated_at = now()
      FROM failing f
     WHERE c.name = f.name AND c.paused_at IS NULL
    RETURNING c.name, c.paused_at,
              'paused after ' || f.n || ' consecutive failures; last error: '
              || CASE WHEN length(coalesce(f.error, '')) > %(error_limit)s::int
                      THEN left(f.error, %(error_limit)s::int) || '...'
                      ELSE coalesce(f.error, 'not reported') END AS note
), noted AS (
    INSERT INTO awa_beat.pause_notes AS p (name, paused_at, note)
    SELECT name, paused_at, note FROM paused
    ON CONFLICT (name) DO UPDATE SET paused_at = EXCLUDED.paused_at, note = EXCLUDED.note
), audited AS (
    INSERT INTO awa_beat.audit_log (actor, source, action, schedule, detail, outcome)
    SELECT %(by)s, 'outcomes', 'pause', name, jsonb_build_object('note', note), 'ok'
      FROM paused
)
SELECT name, note FROM paused;
