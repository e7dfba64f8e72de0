WITH due AS (
    SELECT * FROM unnest(%(names)b::text[], %(expected)b::timestamptz[],
                         %(cursors)b::timestamptz[], %(counts)b::int[])
                  AS d(name, expected, cursor, n)
), fires AS (
    SELECT * FROM unnest(%(fire_names)b::text[], %(fire_times)b::timestamptz[],
                         %(fire_seqs)b::int[], %(fire_run_ats)b::timestamptz[])
                  WITH ORDINALITY AS f(name, fire_time, seq, run_at, ord)
), limits AS (
    -- Runs left to the schedules with a run limit (their marker ends in " runs=<n>";
    -- the limited names are those the engine saw with one), read from the row itself.
    SELECT c.name, greatest((regexp_match(c.cron_expr, ' runs=([0-9]+)$'))[1]::bigint
                            - coalesce(r.runs, 0), 0) AS remaining
      FROM awa.cron_jobs c LEFT JOIN awa_beat.schedule_runs r USING (name)
     WHERE c.name = ANY(%(limited)b::text[]) AND c.cron_expr ~ '^@.* runs=[0-9]+$'
), left_out AS (  -- outcomes: fires a coalesce left out (empty on most passes)
    SELECT * FROM unnest(%(coalesced_names)b::text[], %(coalesced_first)b::timestamptz[],
                         %(coalesced_last)b::timestamptz[], %(coalesced_counts)b::int[])
                  AS l(name, first_time, last_time, count)
), passed_over AS (  -- catch-up window: fires older than it (empty on most passes)
    SELECT * FROM unnest(%(window_names)b::text[], %(window_first)b::timestamptz[],
                         %(window_last)b::timestamptz[], %(window_counts)b::int[],
                         %(window_reasons)b::text[])
                  AS w(name, first_time, last_time, count, reason)
), mark AS (
    -- A limited schedule fires at most its remaining runs (its cursor then moves to
    -- the last of them), and the fire that uses up its last run retires it: paused_at
    -- and paused_by set. One with no run left is retired without a fire. Under
    -- overlap=skip, an occurrence skipped still uses up a run.
    UPDATE awa.cron_jobs c
       SET last_enqueued_at = CASE
               WHEN l.remaining IS NULL OR l.remaining >= due.n THEN due.cursor
               WHEN l.remaining = 0 THEN c.last_enqueued_at
               ELSE (SELECT f.fire_time FROM fires f
                      WHERE f.name = due.name AND f.seq = l.remaining) END,
           paused_at = CASE WHEN l.remaining <= due.n THEN now() ELSE c.paused_at END,
           paused_by = CASE WHEN l.remaining <= due.n THEN %(retired_by)s::text ELSE c.paused_by END,
           updated_at = now()
      FROM due LEFT JOIN limits l USING (name)
     WHERE c.name = due.name
       AND c.name = ANY(%(names)b::text[])  -- an index probe per name, whatever the stats say
       AND c.last_enqueued_at IS NOT DISTINCT FROM due.expected
       AND c.paused_at IS NULL
       AND c.priority BETWEEN 1 AND 4 AND c.max_attempts BETWEEN 1 AND 1000
       AND length(c.kind) <= 200 AND length(c.queue) <= 200 AND cardinality(c.tags) <= 20
       -- Time comes from the database: a beat whose clock runs ahead never dates a fire
       -- (nor moves a cursor) past now() and the tolerance; see "ahead" below.
       AND due.cursor <= now() + %(clock_tolerance)s::float8 * interval '1 second'
    RETURNING c.name, c.kind, c.queue, c.args, c.priority, c.max_attempts, c.tags, c.metadata,
              least(due.n, coalesce(l.remaining, due.n)) AS allowed,
              l.remaining IS NOT NULL AS limited,
              -- outcomes: an overlap=skip or buffer_one schedule (guarded), whether
              -- buffer_one holds a fire for it already (held), and whether its last run
              -- has not finished (running)
              coalesce((c.metadata -> 'awa_beat' ->> 'overlap') IN ('skip', 'buffer_one'),
                       false) AS guarded,
              (c.metadata -> 'awa_beat' ->> 'overlap') IS NOT DISTINCT FROM 'buffer_one'
                AS buffering,
              (coalesce((c.metadata -> 'awa_beat' ->> 'overlap') IN ('skip', 'buffer_one'),
                        false) AND EXISTS (
                SELECT FROM awa_beat.last_runs h
                 WHERE h.name = c.name AND h.buffered_fire_time IS NOT NULL)) AS held,
              (coalesce((c.metadata -> 'awa_beat' ->> 'overlap') IN ('skip', 'buffer_one'),
                        false) AND EXISTS (
                SELECT FROM awa_beat.last_runs r
                  LEFT JOIN awa_beat.outcomes o
                         ON o.schedule = r.name AND o.fire_time = r.fire_time
                  LEFT JOIN awa.jobs j
                         ON j.id = r.job_id
                        AND (c.metadata -> 'celery' ->> 'dispatch') IS DISTINCT FROM 'celery'
                 WHERE r.name = c.name
                   AND coalesce(o.started_at, r.fired_at) > now()
                       - (c.metadata -> 'awa_beat' ->> 'max_runtime')::float8 * interval '1 s'
                   AND CASE WHEN (c.metadata -> 'celery' ->> 'dispatch') = 'celery'
                            THEN o.state IS NULL OR o.state IN ('started', 'retried')
                            ELSE j.state::text IN ('scheduled', 'available', 'running',
                                                   'retryable', 'waiting_external') END
              )) AS running
), counted AS (
    INSERT INTO awa_beat.schedule_runs AS r (name, runs)
    SELECT name, allowed FROM mark WHERE limited AND allowed > 0
    ON CONFLICT (name) DO UPDATE SET runs = r.runs + EXCLUDED.runs
), passed AS (  -- outcomes: under overlap=skip or buffer_one, a schedule whose last
                -- run has not finished or that holds a fire, and all but the first fire
                -- of one statement, fire nothing (the inserts' complement). buffer_one
                -- holds one of them (held_fire): the first if the last run has not
                -- finished, else the second, as the first runs; none if one is held.
    SELECT m.name, f.fire_time, m.held,
           (m.buffering AND NOT m.held
            AND f.seq = CASE WHEN m.running THEN 1 ELSE 2 END) AS held_fire
      FROM mark m JOIN fires f ON f.name = m.name AND f.seq <= m.allowed
     WHERE m.guarded AND (m.running OR m.held OR f.seq > 1)
), skipped AS (
    SELECT name, fire_time, held FROM passed WHERE NOT held_fire
), buffered AS (
    SELECT name, fire_time FROM passed WHERE held_fire
), inserted AS (
    INSERT INTO awa.jobs (kind, queue, args, state, priority, max_attempts, metadata, tags,
                          run_at)
    SELECT m.kind, m.queue, m.args,
           CASE WHEN f.run_at > now()
                 AND (m.metadata -> 'celery' ->> 'dispatch') IS DISTINCT FROM 'celery'
                THEN 'scheduled' ELSE 'available' END::awa.job_state,
           m.priority, m.max_attempts,
           m.metadata || jsonb_build_object('cron_name', m.name, 'cron_fire_time', f.fire_time::text),
           m.tags, coalesce(f.run_at, now())
      FROM mark m JOIN fires f ON f.name = m.name AND f.seq <= m.allowed
     WHERE NOT (m.guarded AND (m.running OR m.held OR f.seq > 1))
     ORDER BY f.fire_time, f.ord
    RETURNING id, metadata ->> 'cron_name' AS name, metadata ->> 'cron_fire_time' AS fire_time
), guards AS MATERIALIZED (  -- outcomes: read mark once; usually no row
    SELECT name FROM mark WHERE guarded
), ran AS (  -- outcomes: the run an overlap policy waits for, and the fire buffer_one
            -- holds behind it when both came in this statement
    INSERT INTO awa_beat.last_runs AS r (name, fire_time, job_id, buffered_fire_time)
    SELECT DISTINCT ON (i.name) i.name, i.fire_time, i.id,
           (SELECT b.fire_time FROM buffered b WHERE b.name = i.name)
      FROM inserted i JOIN guards g ON g.name = i.name
     ORDER BY i.name, i.fire_time DESC
    ON CONFLICT (name) DO UPDATE
       SET fire_time = EXCLUDED.fire_time, job_id = EXCLUDED.job_id, fired_at = now(),
           buffered_fire_time = EXCLUDED.buffered_fire_time
), holds AS (  -- outcomes: a fire held behind a run of an earlier statement (that run
               -- has a last_runs row, or it would not block)
    UPDATE awa_beat.last_runs r SET buffered_fire_time = b.fire_time
      FROM buffered b
     WHERE r.name = b.name AND NOT EXISTS (SELECT FROM inserted i WHERE i.name = b.name)
), skips AS (  -- outcomes
    INSERT INTO awa_beat.occurrences (schedule, kind, fire_time, reason)
    SELECT name, 'skipped', fire_time,
           CASE WHEN held THEN 'overlap: a fire is held already (buffer_one)'
                ELSE 'overlap: the previous run had not finished' END
      FROM skipped
), buffers AS (  -- outcomes
    INSERT INTO awa_beat.occurrences (schedule, kind, fire_time, reason)
    SELECT name, 'buffered', fire_time,
           'overlap buffer_one: held until the previous run finishes'
      FROM buffered
), coalesced AS (  -- outcomes
    INSERT INTO awa_beat.occurrences (schedule, kind, fire_time, last_fire_time, count, reason)
    SELECT l.name, 'coalesced', l.first_time, l.last_time, l.count,
           'coalesce: fires missed while beat was down or the schedule paused'
      FROM left_out l JOIN mark m ON m.name = l.name
), window_skips AS (  -- catch-up window
    INSERT INTO awa_beat.occurrences (schedule, kind, fire_time, last_fire_time, count, reason)
    SELECT w.name, 'skipped', w.first_time, w.last_time, w.count, w.reason
      FROM passed_over w JOIN mark m ON m.name = w.name
    RETURNING schedule
)
SELECT id, name, fire_time, now() AS updated_at, false AS held FROM inserted
UNION ALL  -- outcomes: skipped fires come back with no job id
SELECT NULL, name, fire_time::text, now(), false FROM skipped
UNION ALL  -- outcomes: a fire buffer_one holds, with no job id, marked held
SELECT NULL, name, fire_time::text, now(), true FROM buffered
UNION ALL  -- catch-up window: the schedules whose older fires were passed over
SELECT NULL, schedule, 'window', now(), false FROM window_skips
UNION ALL  -- schedules not fired because their fire time is ahead of the database's
           -- clock: no job id and no fire time (the host's clock is fast)
SELECT NULL, name, NULL, now(), false FROM due
 WHERE cursor > now() + %(clock_tolerance)s::float8 * interval '1 second';
