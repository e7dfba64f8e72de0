-- Every SQL statement awa-beat runs, each under a `-- name --` header and loaded by
-- name (awa_beat/_db/sql/__init__.py); tests/unit/test_sql.py checks that no module
-- writes SQL of its own and that every query here is used.
-- SQL that several statements share is written once, as a fragment
-- (`-- fragment name --`) that they take in with `{{name}}` at the end of a line; a
-- statement or fragment that differs between the two table layouts is written for each
-- (`-- name [standalone] --`, `-- name [awa] --`). Every statement is rendered for both
-- layouts when the module loads; tests/unit/test_sql_golden.py pins what each renders to.
-- Values are always bound parameters; large arrays use binary placeholders (`%(x)b`),
-- which psycopg encodes much faster than text arrays.

-- awa_schema_version --
-- Awa's schema version; run only once has_awa_schema_version said the table exists.
SELECT max(version) AS version FROM awa.schema_version;

-- has_awa_schema_version --
-- Whether Awa itself is installed: it owns the awa schema then, and we never change it.
SELECT to_regclass('awa.schema_version') IS NOT NULL AS present;

-- cron_jobs_shape --
-- What awa.cron_jobs looks like: its columns, and the enabled triggers and the rules on
-- it (all empty while the table does not exist). A newer Awa adds columns and triggers
-- that change what a write does; awa-beat refuses a table it does not know
-- (schema.check_layout).
SELECT ARRAY(SELECT a.attname::text FROM pg_attribute a
              WHERE a.attrelid = to_regclass('awa.cron_jobs') AND a.attnum > 0
                AND NOT a.attisdropped
              ORDER BY a.attnum) AS columns,
       ARRAY(SELECT t.tgname::text FROM pg_trigger t
              WHERE t.tgrelid = to_regclass('awa.cron_jobs') AND NOT t.tgisinternal
                AND t.tgenabled <> 'D'
              ORDER BY t.tgname) AS triggers,
       ARRAY(SELECT r.rulename::text FROM pg_rewrite r
              WHERE r.ev_class = to_regclass('awa.cron_jobs')
              ORDER BY r.rulename) AS rules;

-- lock_migrations --
-- Serialise concurrent migrations across replicas; the lock is ours, never Awa's.
SELECT pg_advisory_xact_lock(%(key)s);

-- create_bookkeeping --
CREATE SCHEMA IF NOT EXISTS awa_beat;
CREATE TABLE IF NOT EXISTS awa_beat.schema_version (
    version     INTEGER PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- applied_migrations --
SELECT version FROM awa_beat.schema_version ORDER BY version;

-- record_migration --
INSERT INTO awa_beat.schema_version (version, description) VALUES (%(version)s, %(description)s);

-- configure_session --
-- Every session of beat's: timestamps rendered as Awa renders them whatever the
-- server's defaults, the session tagged with its writer's origin (the change
-- notifications carry it). work_mem: the batched fire joins and sorts one row per due
-- schedule; keep that in memory. No parallel workers: the frequent refresh scans
-- awa.cron_jobs, and workers would be started for each scan for nothing.
SELECT set_config('TimeZone', 'UTC', false),
       set_config('DateStyle', 'ISO, MDY', false),
       set_config('work_mem', '64MB', false),
       set_config('max_parallel_workers_per_gather', '0', false),
       set_config('awa_beat.origin', %(origin)s, false);

-- lock_session_keepalives --
-- If the leader's host vanishes or is cut off, the server drops the lock's session, and
-- with it the lock, within the lock timeout instead of the OS default of hours: idle
-- probes for a quiet session, a user timeout for data the leader never acknowledges.
SELECT set_config('tcp_keepalives_idle', %(idle)s, false),
       set_config('tcp_keepalives_interval', %(interval)s, false),
       set_config('tcp_keepalives_count', %(count)s, false),
       set_config('tcp_user_timeout', %(user_timeout_ms)s, false);

-- try_advisory_lock --
SELECT pg_try_advisory_lock(%(key)s);

-- ping --
SELECT 1;

-- backend_pid --
SELECT pg_backend_pid();

-- session_lock_held --
-- Whether this session holds the advisory lock on a bigint key (objsubid 1).
SELECT count(*) FROM pg_locks
 WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid() AND objsubid = 1
   AND ((classid::bigint << 32) | objid::bigint) = %(key)s;

-- advisory_unlock_all --
SELECT pg_advisory_unlock_all();

-- listen --
-- The channel is an identifier, composed in with psycopg.sql.Identifier.
LISTEN {channel};

-- repeatable_read --
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;

-- analyze_cron_jobs --
ANALYZE awa.cron_jobs;

-- create_database --
-- Throw-away databases of awa_beat.testing; the names are composed in as identifiers.
CREATE DATABASE {name} TEMPLATE {template};

-- terminate_backends --
SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %(dbname)s;

-- drop_database --
DROP DATABASE IF EXISTS {name};

-- upsert_schedules --
-- Additive sync of a whole schedule in one round trip (one array per column; JSON
-- values arrive as text). New rows get their cursor set to the second they were
-- registered, so neither awa-beat nor Awa fires a time from before the schedule
-- existed. Existing rows keep created_at and the pause, and keep last_enqueued_at (a
-- catch_up backlog survives a redeploy) unless the calendar (expression or zone)
-- changed: then the cursor moves forward to the second of the change
-- (cursor_after_calendar_change, as in upsert_runtime_schedules). A row is only
-- rewritten (and updated_at bumped) when its definition changed, so watchers of
-- updated_at see real changes only. A row written at run time (owner 'runtime', see
-- upsert_runtime_schedules) is never overwritten: beat reports the clash at start-up
-- (runtime_owned_names) and leaves the row alone.
WITH input AS (
    {{schedule_input}}
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
    {{update_definition}}
           {{cursor_after_calendar_change}}
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

-- fragment schedule_input --
-- The rows to write, one array per column of a schedule's definition (JSON values
-- arrive as text).
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

-- fragment update_definition --
-- A name that exists takes the definition given, column by column. It ends in a comma:
-- the statement goes on to set the cursor and updated_at, each in its own way.
ON CONFLICT (name) DO UPDATE
   SET cron_expr = EXCLUDED.cron_expr, timezone = EXCLUDED.timezone,
       kind = EXCLUDED.kind, queue = EXCLUDED.queue, args = EXCLUDED.args,
       priority = EXCLUDED.priority, max_attempts = EXCLUDED.max_attempts,
       tags = EXCLUDED.tags, metadata = EXCLUDED.metadata,
       missed_fire_policy = EXCLUDED.missed_fire_policy,

-- fragment cursor_after_calendar_change --
-- When the calendar (expression or zone) changes, the cursor moves forward to the
-- second of the write: times missed under the old calendar mean nothing under the
-- new one and must not fire.
last_enqueued_at = CASE
    WHEN (c.cron_expr, c.timezone) IS DISTINCT FROM
         (EXCLUDED.cron_expr, EXCLUDED.timezone)
    THEN GREATEST(c.last_enqueued_at, EXCLUDED.last_enqueued_at)
    ELSE c.last_enqueued_at END,

-- fire_batch --
-- The atomic fire, batched: one statement advances the cursor of every due schedule
-- (compare-and-swap on last_enqueued_at, paused_at re-checked in the same UPDATE) and
-- inserts one job per fire. A schedule whose CAS fails gets no job and no cursor
-- move; the others still fire. Rows whose values Awa's job limits would reject are
-- left alone (no job, no cursor move, as Awa does) instead of failing the batch.
-- Each job comes back with the updated_at its schedule now has (the statement's now()).
-- Run limits (migration 0008): see the limits and mark steps; schedules without one
-- (every Awa row) skip them. A schedule whose newest fire time is later than now() plus
-- the clock tolerance (seconds) is not fired: it comes back with neither job id nor fire time.
-- Overlap (migrations 0009, 0016): see the mark, passed, ran and holds steps; a fire
-- that buffer_one holds comes back with no job id and `held` true (fire_buffered
-- starts it later).
-- The two layouts differ only in how the jobs are inserted (insert_fired_jobs).
-- Catch-up window: a schedule's fire times older than its window are not in `fires`;
-- they come as one `passed_over` row, recorded as a skipped occurrence once the CAS
-- holds (they may be all the schedule has due: then n is 0 and the cursor moves to the
-- last of them), and the schedule comes back with no job id and the fire time 'window'.
-- Jitter: the fires' run times are one NULL unless a fire of the batch has a jitter
-- (unnest pads them with NULLs), else each fire's run time or NULL.
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
                {{run_unfinished}}
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
{{insert_fired_jobs}}
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

-- fragment insert_fired_jobs [standalone] --
-- One job a fire, in the order of the fire times: where the tables are awa-beat's own,
-- into awa.jobs directly.
-- A jittered job (run_at given) that is not yet due waits as 'scheduled'; one for
-- Celery stays 'available', for the bridge to publish at once with that run_at as eta.
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
      {{fires_with_a_job}}
    RETURNING id, metadata ->> 'cron_name' AS name, metadata ->> 'cron_fire_time' AS fire_time

-- fragment insert_fired_jobs [awa] --
-- The same on a database migrated by Awa, where awa.jobs is a view: jobs go through
-- awa.insert_job_compat, exactly as Awa's own cron does; a jittered job that is not yet
-- due is 'scheduled' at its run_at (NULL: Awa's clock_timestamp()).
), ordered AS (
    SELECT m.*, f.fire_time, f.run_at, f.ord
      {{fires_with_a_job}}
), inserted AS (
    SELECT j.id, o.name, j.metadata ->> 'cron_fire_time' AS fire_time
      FROM ordered o CROSS JOIN LATERAL awa.insert_job_compat(
           o.kind, o.queue, o.args,
           CASE WHEN o.run_at > now() THEN 'scheduled' ELSE 'available' END::awa.job_state,
           o.priority, o.max_attempts, o.run_at,
           o.metadata || jsonb_build_object('cron_name', o.name, 'cron_fire_time', o.fire_time::text),
           o.tags, NULL, NULL) AS j

-- fire_buffered --
-- overlap buffer_one: give each held fire whose blocking run has finished (the test of
-- fire_batch's `running`, its max_runtime bound included) its job, as a normal fire of
-- the held fire time plus "buffered": true, and point last_runs at that job (so that it
-- blocks in turn). The held rows are locked: a second statement that waited for them
-- finds buffered_fire_time cleared and starts nothing, so each held fire gets one job.
-- A paused schedule keeps its fire held until it is resumed, but a retired one (its
-- last run was used up, the held fire among them) starts it. The last row has no job:
-- its `still_held` is how many fires remain held.
WITH ready AS (
    SELECT h.name, h.buffered_fire_time, c.kind, c.queue, c.args, c.priority,
           c.max_attempts, c.tags, c.metadata
      FROM awa_beat.last_runs h JOIN awa.cron_jobs c ON c.name = h.name
     WHERE h.buffered_fire_time IS NOT NULL
       -- A retired schedule's held fire was one of its runs: it still starts.
       AND (c.paused_at IS NULL OR c.paused_by = %(retired_by)s::text)
       AND NOT EXISTS (
           {{run_unfinished}}
       )
     ORDER BY h.buffered_fire_time, h.name
       FOR UPDATE OF h
{{insert_buffered_jobs}}
), started AS (
    UPDATE awa_beat.last_runs r
       SET fire_time = i.fire_time, job_id = i.id, fired_at = now(), buffered_fire_time = NULL
      FROM inserted i
     WHERE r.name = i.name
)
SELECT id, name, fire_time, now() AS updated_at, NULL::bigint AS still_held FROM inserted
UNION ALL
SELECT NULL, NULL, NULL, now(),
       (SELECT count(*) FROM awa_beat.last_runs WHERE buffered_fire_time IS NOT NULL)
       - (SELECT count(*) FROM inserted);

-- fragment insert_buffered_jobs [standalone] --
-- The held fires' jobs, into awa.jobs directly.
), inserted AS (
    INSERT INTO awa.jobs (kind, queue, args, state, priority, max_attempts, metadata, tags)
    SELECT kind, queue, args, 'available', priority, max_attempts,
           metadata || jsonb_build_object('cron_name', name,
                                          'cron_fire_time', buffered_fire_time::text,
                                          'buffered', true),
           tags
      FROM ready
     ORDER BY buffered_fire_time, name
    RETURNING id, metadata ->> 'cron_name' AS name, metadata ->> 'cron_fire_time' AS fire_time

-- fragment insert_buffered_jobs [awa] --
-- The same through awa.insert_job_compat, as fire_batch inserts on Awa's tables.
), inserted AS (
    SELECT j.id, r.name, j.metadata ->> 'cron_fire_time' AS fire_time
      FROM ready r CROSS JOIN LATERAL awa.insert_job_compat(
           r.kind, r.queue, r.args, 'available'::awa.job_state, r.priority, r.max_attempts,
           NULL, r.metadata || jsonb_build_object('cron_name', r.name,
                                                  'cron_fire_time', r.buffered_fire_time::text,
                                                  'buffered', true),
           r.tags, NULL, NULL) AS j

-- fragment run_unfinished --
-- Whether the run in last_runs of schedule c has not finished: for Celery dispatch it
-- has no outcome yet or one of started/retried, for Awa dispatch its job is not final;
-- a run that never reports back stops counting max_runtime seconds after its start (or
-- its fire, if it never started).
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

-- fragment fires_with_a_job --
-- The fires that get a job, in the order of their fire times: each schedule's allowed
-- fires, except those `passed` holds.
  FROM mark m JOIN fires f ON f.name = m.name AND f.seq <= m.allowed
 WHERE NOT (m.guarded AND (m.running OR m.held OR f.seq > 1))
 ORDER BY f.fire_time, f.ord

-- fragment schedule_rows --
-- Whole rows with their owners: the fields of records.ScheduleRow, read by name.
SELECT c.name, c.cron_expr, c.timezone, c.kind, c.queue, c.args, c.priority, c.max_attempts,
       c.tags, c.metadata, c.missed_fire_policy, c.last_enqueued_at, c.created_at,
       c.updated_at, c.paused_at, c.paused_by, s.deployment, s.owner
  FROM awa.cron_jobs c LEFT JOIN awa_beat.schedules s USING (name)

-- list_schedules --
{{schedule_rows}}
 WHERE %(pattern)s::text IS NULL OR c.name LIKE %(pattern)s
 ORDER BY c.name;

-- get_schedule --
{{schedule_rows}}
 WHERE c.name = %(name)s;

-- pause_schedule --
UPDATE awa.cron_jobs SET paused_at = now(), paused_by = %(by)s, updated_at = now()
 WHERE name = %(name)s
RETURNING paused_at;

-- resume_schedule --
UPDATE awa.cron_jobs SET paused_at = NULL, paused_by = NULL, updated_at = now()
 WHERE name = %(name)s
RETURNING name;

-- trigger [standalone] --
-- One job now, whether or not the schedule is paused; the cursor is left alone.
INSERT INTO awa.jobs (kind, queue, args, state, priority, max_attempts, metadata, tags)
SELECT kind, queue, args, 'available', priority, max_attempts,
       metadata || jsonb_build_object('cron_name', name, 'triggered_manually', true), tags
  FROM awa.cron_jobs WHERE name = %(name)s
RETURNING id;

-- trigger [awa] --
-- The same on a database migrated by Awa, through awa.insert_job_compat.
SELECT j.id
  FROM awa.cron_jobs c CROSS JOIN LATERAL awa.insert_job_compat(
       c.kind, c.queue, c.args, 'available'::awa.job_state, c.priority, c.max_attempts, NULL,
       c.metadata || jsonb_build_object('cron_name', c.name, 'triggered_manually', true),
       c.tags, NULL, NULL) AS j
 WHERE c.name = %(name)s;

-- backfill_lock --
-- Backfills of one schedule take turns (docs/operating-time.md): held to the end of the
-- transaction, so that the next backfill's insert, a statement started after this one
-- committed, sees the jobs it inserted and skips their fire times. Two-key advisory locks
-- are apart from the leader's one-key lock.
SELECT pg_advisory_xact_lock(%(lock_class)s::int, hashtext(%(name)s));

-- fragment backfill_wanted --
-- The fire times asked for (%(fire_times)s, in order) that have no job yet: none that a
-- backfill gave a job (awa_beat.backfills), none that the schedule fired itself (a job
-- with that cron_name and cron_fire_time, in the text form the fire statement writes,
-- which sorts in time order) and none with a reported outcome (its job may be gone).
WITH asked AS (
    SELECT t AS fire_time, t::text AS fire_text, ord
      FROM unnest(%(fire_times)b::timestamptz[]) WITH ORDINALITY AS u(t, ord)
), fired AS (
    SELECT DISTINCT j.metadata ->> 'cron_fire_time' AS fire_text
      FROM awa.jobs j
     WHERE j.metadata ->> 'cron_name' = %(name)s AND j.metadata ? 'cron_name'
       AND j.metadata ->> 'cron_fire_time' BETWEEN (SELECT min(fire_text) FROM asked)
                                                AND (SELECT max(fire_text) FROM asked)
), wanted AS (
    SELECT a.* FROM asked a
     WHERE NOT EXISTS (SELECT FROM awa_beat.backfills b
                        WHERE b.schedule = %(name)s AND b.fire_time = a.fire_time)
       AND NOT EXISTS (SELECT FROM fired f WHERE f.fire_text = a.fire_text)
       AND NOT EXISTS (SELECT FROM awa_beat.outcomes o
                        WHERE o.schedule = %(name)s AND o.fire_time = a.fire_text)

-- backfill_plan --
-- `awa-beat backfill --dry-run`: which of the fire times asked for would get a job.
{{backfill_wanted}}
)
SELECT fire_time FROM wanted ORDER BY ord;

-- backfill [standalone] --
-- `awa-beat backfill`: one job for each fire time asked for that has none yet, in fire
-- time order, as the fire statement inserts a fire's job (its metadata, cron_fire_time
-- in the same text form) plus "backfilled": true; a row of awa_beat.backfills for each,
-- its key the guard against a second job. Only fire times at or before the cursor: the
-- later ones are the schedule's own to fire. The cursor is not moved. Run after
-- backfill_lock, in its transaction.
{{backfill_wanted}}
{{backfill_schedule}}
), inserted AS (
    INSERT INTO awa.jobs (kind, queue, args, state, priority, max_attempts, metadata, tags)
    SELECT s.kind, s.queue, s.args, 'available', s.priority, s.max_attempts,
           s.metadata || jsonb_build_object('cron_name', s.name, 'cron_fire_time', w.fire_text,
                                            'backfilled', true),
           s.tags
      {{backfill_rows}}
    RETURNING id, (metadata ->> 'cron_fire_time')::timestamptz AS fire_time
{{backfill_record}}

-- backfill [awa] --
-- The same on a database migrated by Awa, through awa.insert_job_compat as its cron does.
{{backfill_wanted}}
{{backfill_schedule}}
), ordered AS (
    SELECT s.*, w.fire_time, w.fire_text, w.ord
      {{backfill_rows}}
), inserted AS (
    SELECT j.id, o.fire_time
      FROM ordered o CROSS JOIN LATERAL awa.insert_job_compat(
           o.kind, o.queue, o.args, 'available'::awa.job_state, o.priority, o.max_attempts, NULL,
           o.metadata || jsonb_build_object('cron_name', o.name, 'cron_fire_time', o.fire_text,
                                            'backfilled', true),
           o.tags, NULL, NULL) AS j
{{backfill_record}}

-- fragment backfill_schedule --
-- The schedule a backfill gives jobs to: what each job copies, and its cursor.
), sched AS (
    SELECT c.name, c.kind, c.queue, c.args, c.priority, c.max_attempts, c.tags, c.metadata,
           c.last_enqueued_at
      FROM awa.cron_jobs c WHERE c.name = %(name)s

-- fragment backfill_rows --
-- The fire times a backfill gives a job, in order: those at or before the cursor.
  FROM sched s JOIN wanted w ON w.fire_time <= s.last_enqueued_at
 ORDER BY w.ord

-- fragment backfill_record --
-- The backfill's rows, then the fire times that got a job, with the job's id.
), recorded AS (
    INSERT INTO awa_beat.backfills (schedule, fire_time, job_id, backfilled_by)
    SELECT %(name)s, i.fire_time, i.id, %(by)s FROM inserted i
    ON CONFLICT (schedule, fire_time) DO NOTHING
)
SELECT fire_time, id FROM inserted ORDER BY fire_time;

-- backfill_run_in_progress --
-- A backfill with overlap 'skip': the newest run of the schedule %(name)s that has not
-- finished, if any: for Awa dispatch a job of it waiting or running, for Celery
-- dispatch one still in the outbox or reported started (or retried) and not finished.
(SELECT j.id AS job_id, j.metadata ->> 'cron_fire_time' AS fire_time, j.state::text AS state
   FROM awa.jobs j
  WHERE j.metadata ->> 'cron_name' = %(name)s AND j.metadata ? 'cron_name'
    AND (j.state::text IN ('scheduled', 'available', 'running', 'retryable', 'waiting_external')
         AND ((j.metadata -> 'celery' ->> 'dispatch') IS DISTINCT FROM 'celery'
              OR j.state::text = 'available'))
  ORDER BY j.id DESC
  LIMIT 1)
UNION ALL
(SELECT o.job_id, o.fire_time, o.state
   FROM awa_beat.outcomes o
  WHERE o.schedule = %(name)s AND o.state IN ('started', 'retried') AND o.finished_at IS NULL
  ORDER BY o.started_at DESC NULLS LAST
  LIMIT 1)
LIMIT 1;

-- unretire_schedule --
-- A retired schedule (its last allowed run fired) whose run limit was just changed, in
-- the transaction of that change: resumed when runs are left under its limit (or it has
-- none), counted as the fire statement counts them (keep the patterns in step).
UPDATE awa.cron_jobs c SET paused_at = NULL, paused_by = NULL, updated_at = clock_timestamp()
 WHERE c.name = %(name)s AND c.paused_at IS NOT NULL AND c.paused_by = %(retired_by)s
   AND (c.cron_expr !~ '^@.* runs=[0-9]+$'
        OR (regexp_match(c.cron_expr, ' runs=([0-9]+)$'))[1]::bigint
           > coalesce((SELECT r.runs FROM awa_beat.schedule_runs r WHERE r.name = c.name), 0))
RETURNING c.name;

-- remove_schedule --
-- Jobs already fired are not touched; a run count goes with the row (a schedule added
-- again under the name starts from none). The owner and the count go only with a row
-- that went: a trigger that skips the delete leaves all three as they were. Its backfill
-- rows go too: a schedule added again under the name may backfill afresh.
WITH gone AS (DELETE FROM awa.cron_jobs WHERE name = %(name)s RETURNING name),
     unowned AS (DELETE FROM awa_beat.schedules WHERE name IN (SELECT name FROM gone)),
     uncounted AS (DELETE FROM awa_beat.schedule_runs WHERE name IN (SELECT name FROM gone)),
     unbackfilled AS (DELETE FROM awa_beat.backfills
                       WHERE schedule IN (SELECT name FROM gone))
SELECT count(*) AS removed FROM gone;

-- schedule_exists --
-- Whether a row named so exists: a write that changed no row tells an unknown name
-- from a write the database skipped.
SELECT true AS present FROM awa.cron_jobs WHERE name = %(name)s;

-- jobs_for_schedule --
SELECT id, kind, queue, args, state::text AS state, priority, max_attempts, metadata, tags,
       created_at, run_at, finalized_at
  FROM awa.jobs
 WHERE metadata ->> 'cron_name' = %(name)s
 ORDER BY id DESC
 LIMIT %(limit)s;

-- changed_schedules --
-- The evaluator's one query per pass: a fingerprint of the whole table (row count and
-- a hash of the names, so any insert or delete shows), the server's clock, the xmin of
-- this statement's snapshot, and the rows changed since %(since)s, with only the
-- columns the evaluator needs. Pauses, resumes, edits and fires all bump updated_at.
-- The lookback overlaps the last read, for transactions that took now() before it and
-- committed after; a row written by a transaction older than the last read's snapshot
-- xmin (%(seen_xmin)s) had committed before that read, which returned it, so it is left
-- out. The row's 32-bit xmin is widened against this snapshot's xmax: a row changed
-- since %(since)s is seconds old, far inside the 2^31 transactions that makes exact.
WITH snap AS MATERIALIZED (  -- once, not per row
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin,
           pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax
), stats AS (
    SELECT count(*) AS total, coalesce(sum(hashtext(name)::bigint), 0) AS fingerprint,
           statement_timestamp() AS db_now
      FROM awa.cron_jobs
)
SELECT s.total, s.fingerprint, s.db_now, snap.xmin,
       c.name, c.cron_expr, c.timezone, c.missed_fire_policy, c.last_enqueued_at,
       c.created_at, c.updated_at, c.paused_at
  FROM stats s CROSS JOIN snap
  LEFT JOIN awa.cron_jobs c
    ON c.updated_at > %(since)s
   AND (%(seen_xmin)s::bigint IS NULL
        OR snap.xmax - (snap.xmax - c.xmin::text::bigint) %% 4294967296
           >= %(seen_xmin)s::bigint);

-- cron_jobs_stats_stale --
-- Whether the planner's idea of the table's size is missing or far off (a bulk insert
-- that autovacuum has not analyzed yet). A table never analyzed counts as empty, so one
-- of at most 1,000 rows is not analyzed at start-up: on so few rows every plan of the
-- fire statement is fast (it probes the index per name whatever the statistics say).
SELECT abs(greatest(c.reltuples, 0) - n.total) > greatest(1000, n.total * 0.2)
  FROM pg_class c, (SELECT count(*) AS total FROM awa.cron_jobs) n
 WHERE c.oid = 'awa.cron_jobs'::regclass;

-- fragment evaluator_columns --
-- The columns the evaluator reads, in the order of records.CronState's fields (the
-- readers build rows by position).
SELECT name, cron_expr, timezone, missed_fire_policy, last_enqueued_at, created_at,
       updated_at, paused_at

-- cron_states --
-- Every row, with only the columns the evaluator needs (it holds them all in memory).
{{evaluator_columns}}
  FROM awa.cron_jobs;

-- cron_names --
SELECT name FROM awa.cron_jobs;

-- cron_states_after --
-- A slice of the engine's sweep, in the primary key's order.
{{evaluator_columns}}
  FROM awa.cron_jobs
 WHERE name > %(after)s
 ORDER BY name
 LIMIT %(limit)s;

-- cron_states_by_name --
{{evaluator_columns}}
  FROM awa.cron_jobs
 WHERE name = ANY(%(names)s);

-- table_fingerprint --
-- With the xmin of the snapshot (the caller reads every row in the same one).
SELECT count(*) AS total, coalesce(sum(hashtext(name)::bigint), 0) AS fingerprint,
       statement_timestamp() AS db_now,
       pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin
  FROM awa.cron_jobs;

-- get_schedules --
{{schedule_rows}}
 WHERE c.name = ANY(%(names)s);

-- config_in_force --
-- Whether the deployment's rows are stored as its last start-up sync of this
-- configuration (its digest) left them: the rows it owns now have the count and the
-- fingerprint that sync worked out from its input. Any write to a definition or an
-- owner since (another replica's resync during a rolling deploy, `awa-beat add` or
-- `remove`, an edit by hand, a row of the configuration taken at run time, a row of
-- ours whose awa.cron_jobs row someone else deleted: counted, so that its orphan
-- warning is not skipped) changes them; fires and pauses do not. The rows are only
-- read when the digest matches.
SELECT EXISTS (
    SELECT FROM awa_beat.config_syncs k
     WHERE k.deployment = %(deployment)s AND k.digest = %(digest)s
       AND (k.row_count, k.fingerprint) = (
           SELECT count(*), coalesce(sum(awa_beat.definition_hash(
                      c.name, c.cron_expr, c.timezone, c.kind, c.queue, c.args,
                      c.priority, c.max_attempts, c.tags, c.metadata,
                      c.missed_fire_policy)), 0)
             FROM awa_beat.schedules s LEFT JOIN awa.cron_jobs c ON c.name = s.name
            WHERE s.deployment = %(deployment)s AND s.owner = 'config')
) AS in_force;

-- record_config_sync --
-- After a whole start-up sync: the configuration now stored for the deployment (see
-- config_in_force). The last replica of a deployment to sync is the one recorded.
INSERT INTO awa_beat.config_syncs AS k (deployment, digest, row_count, fingerprint)
VALUES (%(deployment)s, %(digest)s, %(row_count)s, %(fingerprint)s)
ON CONFLICT (deployment) DO UPDATE
   SET digest = EXCLUDED.digest, row_count = EXCLUDED.row_count,
       fingerprint = EXCLUDED.fingerprint, synced_at = now();

-- orphaned_names --
-- The names ``deployment``'s beat_schedule registered (not those written at run time,
-- which no configuration owns) that are not among ``names``, its configuration now:
-- worked out by the server, so that a large configuration's names are not read back.
-- EXCEPT, not NOT EXISTS over the array: the planner may not hash the array, and a
-- nested loop over two large name lists is quadratic.
SELECT name FROM awa_beat.schedules
 WHERE deployment = %(deployment)s AND owner = 'config'
EXCEPT
SELECT unnest(%(names)b::text[])
 ORDER BY 1;

-- runtime_owned_names --
-- Which of the given names were written at run time (beat's sync leaves those alone).
SELECT name FROM awa_beat.schedules
 WHERE owner = 'runtime' AND name = ANY(%(names)b::text[])
 ORDER BY name;

-- lock_schedules --
-- The stored rows among the given names, with their owner, locked until the end of
-- the transaction: a runtime write checks the owner and writes on what it checked.
-- JSON as text: the caller's connection may decode JSON its own way.
SELECT c.name, c.cron_expr, c.timezone, c.kind, c.queue, c.args::text AS args, c.priority,
       c.max_attempts, c.tags, c.metadata::text AS metadata, c.missed_fire_policy, c.last_enqueued_at, c.created_at,
       c.updated_at, c.paused_at, c.paused_by, s.deployment, s.owner
  FROM awa.cron_jobs c LEFT JOIN awa_beat.schedules s USING (name)
 WHERE c.name = ANY(%(names)b::text[])
   FOR UPDATE OF c;

-- upsert_runtime_schedules --
-- A write of the Python API or `awa-beat add/edit`, in one round trip: the rows become
-- owner 'runtime'. With %(replace)s false an existing name is left alone (the caller
-- counts what was written). A new row's cursor is the second of the write, so nothing
-- before it fires. When an existing row's calendar changes (expression or zone) its
-- cursor moves forward to that second too: the new calendar never fires a time from
-- before the change. clock_timestamp(), not now(): the caller's transaction may have
-- begun long before this statement, and a cursor or updated_at of its start would
-- fire too early or fall behind the leader's refresh window. One instant for the whole
-- statement (a volatile CTE is evaluated once): rows written together share it, as the
-- rows of one sync share now(), and the evaluator holds one timestamp for them all. A
-- new row's created_at is that instant too, so its cursor is the second of its
-- registration, which tells "never fired" (operations.cursor_is_fire).
WITH at AS (
    SELECT clock_timestamp() AS t
), input AS (
    {{schedule_input}}
), written AS (
    INSERT INTO awa.cron_jobs AS c (
           name, cron_expr, timezone, kind, queue, args, priority, max_attempts, tags,
           metadata, missed_fire_policy, last_enqueued_at, created_at, updated_at)
    SELECT name, cron_expr, timezone, kind, queue, args, priority, max_attempts, tags,
           metadata, missed_fire_policy, date_trunc('second', at.t), at.t, at.t
      FROM input CROSS JOIN at
    {{update_definition}}
           {{cursor_after_calendar_change}}
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

-- recent_jobs --
SELECT id, kind, queue, args, state::text AS state, metadata, created_at
  FROM awa.jobs
 WHERE metadata ? 'cron_name'
 ORDER BY id DESC
 LIMIT %(limit)s;

-- pending_celery_jobs --
-- Jobs this deployment's bridge still has to publish: manual triggers, then fires
-- oldest first (the text form sorts in time order), from the key after
-- (%(after_fire)s, %(after_id)s): ('', 0) for the first page. Args and options come as
-- JSON text: the bridge parses each distinct one once. A job that a jitter put off has
-- a run_at later than its insert (the fire statement sets both in one statement, equal
-- otherwise); that run_at is its message's eta. A backfilled job's relative expiry
-- counts from its insert, not from its fire time, which is in the past.
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

-- mark_published --
-- Only after the broker accepted the messages: the job is done, its task id recorded.
UPDATE awa.jobs j
   SET state = 'completed', finalized_at = now(),
       metadata = j.metadata || jsonb_build_object('celery_task_id', u.task_id)
  FROM unnest(%(ids)b::bigint[], %(task_ids)b::text[]) AS u(id, task_id)
 WHERE j.id = u.id AND j.state = 'available';

-- mark_unpublishable --
-- A job Celery cannot build a message for (a bad option): failed, with the reason, so it
-- does not block the jobs behind it.
UPDATE awa.jobs
   SET state = 'failed', finalized_at = now(),
       metadata = metadata || jsonb_build_object('celery_error', %(error)s::text)
 WHERE id = %(id)s AND state = 'available';

-- purge_published --
-- Published jobs older than the retention, in a bounded batch.
DELETE FROM awa.jobs
 WHERE id IN (SELECT id FROM awa.jobs
               WHERE state = 'completed'
                 AND (metadata -> 'celery' ->> 'dispatch') = 'celery'
                 AND finalized_at < now() - %(retention)s::interval
               LIMIT %(limit)s);

-- beat_heartbeat --
INSERT INTO awa_beat.beats AS b (identity, host, pid, deployment, lock_key, role, started_at,
                                 leader_since, seen_at, last_lag_ms, publishes, clock_skew_ms)
VALUES (%(identity)s, %(host)s, %(pid)s, %(deployment)s, %(lock_key)s, %(role)s,
        %(started_at)s, %(leader_since)s, now(), %(last_lag_ms)s, %(publishes)s,
        %(clock_skew_ms)s)
ON CONFLICT (identity) DO UPDATE
   SET role = EXCLUDED.role, leader_since = EXCLUDED.leader_since, seen_at = now(),
       last_lag_ms = EXCLUDED.last_lag_ms, deployment = EXCLUDED.deployment,
       lock_key = EXCLUDED.lock_key, publishes = EXCLUDED.publishes,
       clock_skew_ms = EXCLUDED.clock_skew_ms;

-- beat_gone --
DELETE FROM awa_beat.beats WHERE identity = %(identity)s;

-- list_beats --
-- Beats seen recently, with whether each leader's lock is really held right now.
SELECT b.identity, b.host, b.pid, b.deployment, b.lock_key, b.role, b.started_at,
       b.leader_since, b.seen_at, b.last_lag_ms, b.publishes, b.clock_skew_ms,
       now() - b.seen_at AS age,
       EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                  AND ((l.classid::bigint << 32) | l.objid::bigint) = b.lock_key
                  AND a.application_name = 'awa-beat leader ' || b.pid
                  AND l.database = (SELECT oid FROM pg_database
                                     WHERE datname = current_database())) AS holds_lock
  FROM awa_beat.beats b
 WHERE b.seen_at > now() - %(window)s::interval
 ORDER BY b.role, b.identity;

-- outbox_backlogs --
-- The outbox of every deployment (status, doctor, the dashboard and the metrics): how
-- many jobs for Celery wait for the broker, and the age in seconds of the oldest of them
-- by the database's clock. Each deployment's beat publishes only its own. Reads the
-- pending jobs' partial index.
SELECT coalesce(metadata -> 'celery' ->> 'deployment', '') AS deployment,
       count(*) AS jobs,
       extract(epoch FROM statement_timestamp() - min(created_at))::float8 AS oldest_age
  FROM awa.jobs
 WHERE state = 'available' AND (metadata -> 'celery' ->> 'dispatch') = 'celery'
 GROUP BY 1
 ORDER BY 1;

-- count_stranded_awa_jobs --
-- Jobs left for Awa workers in a database where Awa is not installed: nothing runs them.
SELECT coalesce(metadata -> 'celery' ->> 'deployment', '') AS deployment, count(*) AS jobs
  FROM awa.jobs
 WHERE state = 'available' AND metadata ? 'cron_name'
   AND (metadata -> 'celery' ->> 'dispatch') IS DISTINCT FROM 'celery'
 GROUP BY 1
 ORDER BY 1;

-- database_clock --
SELECT clock_timestamp() AS now;

-- import_schedules --
-- `awa-beat import`: upsert_schedules plus, per row, the cursor imported from the old
-- scheduler (its last run; NULL when unknown) and a pause reason (NULL: active), in one
-- round trip. New rows start at the imported cursor, else at the second they were
-- registered (as a sync does), and are paused when a reason is given. Existing rows get
-- their definition as a sync would and their cursor moved forward only,
-- GREATEST(stored, imported): moving it back would fire again what already ran. Their
-- pause is left alone. A row written at run time (owner 'runtime') is left alone, its
-- definition and owner both, unless %(force)s: then it becomes the deployment's
-- configuration again. The importer's plan refuses such names first; this guard covers
-- a runtime write between the plan's read and this statement. Rows with and without a known cursor go through two upserts on
-- disjoint names, so neither needs a per-row lookup. One row comes back per input row:
-- whether it was inserted, whether its definition changed, its cursor before and after.
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
    {{update_definition}}
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

-- importers: django-celery-beat's tables
-- Read by awa_beat/importers/django.py (`awa-beat import --from-django`), in one
-- read-only snapshot of the source database, not awa-beat's. `SELECT *` keeps older
-- django-celery-beat schemas readable (a column it lacks reads as missing).

-- django_tables_present --
-- Which of the given tables exist, as the source's search_path resolves them.
SELECT t AS table_name, to_regclass(t) IS NOT NULL AS present
  FROM unnest(%(tables)s::text[]) AS t;

-- django_tasks --
SELECT * FROM django_celery_beat_periodictask ORDER BY id;

-- django_intervals --
SELECT * FROM django_celery_beat_intervalschedule ORDER BY id;

-- django_crontabs --
SELECT * FROM django_celery_beat_crontabschedule ORDER BY id;

-- django_solars --
SELECT * FROM django_celery_beat_solarschedule ORDER BY id;

-- django_clocked --
SELECT * FROM django_celery_beat_clockedschedule ORDER BY id;

-- outcomes: what became of each fire (awa_beat/outcomes.py, docs/outcomes.md)

-- record_outcomes --
-- A worker's buffered reports, one row per task (merged by the writer first, since one
-- statement cannot touch a row twice). A start clears the finish of an earlier run
-- (a retry runs again); a second start of a run that had not asked to be retried is a
-- re-execution, counted in duplicates.
INSERT INTO awa_beat.outcomes AS o (task_id, schedule, fire_time, job_id, state, retries,
                                    started_at, finished_at, runtime, worker, error)
SELECT * FROM unnest(%(task_ids)b::text[], %(schedules)b::text[], %(fire_times)b::text[],
                     %(job_ids)b::bigint[], %(states)b::text[], %(retries)b::int[],
                     %(started)b::timestamptz[], %(finished)b::timestamptz[],
                     %(runtimes)b::float8[], %(workers)b::text[], %(errors)b::text[])
ON CONFLICT (task_id) DO UPDATE
   SET state = EXCLUDED.state,
       retries = greatest(o.retries, EXCLUDED.retries),
       started_at = coalesce(EXCLUDED.started_at, o.started_at),
       finished_at = EXCLUDED.finished_at,
       runtime = EXCLUDED.runtime,
       worker = coalesce(EXCLUDED.worker, o.worker),
       error = EXCLUDED.error,
       duplicates = o.duplicates
           + (EXCLUDED.started_at IS NOT NULL AND o.started_at IS NOT NULL
              AND o.state <> 'retried' AND EXCLUDED.retries <= o.retries)::int,
       updated_at = now();

-- lock_failure_guards --
-- Pause on failure, step one, before a batch with a failed outcome is written: lock the
-- rows of its schedules that ask to be paused after failures (and are not paused), and
-- return their names. Two workers reporting failures of one schedule at once take turns
-- here, so the second one's check (pause_after_failures, a later statement of the same
-- transaction) sees the first one's outcomes.
SELECT c.name FROM awa.cron_jobs c
 WHERE c.name = ANY(%(names)s::text[])
   AND jsonb_typeof(c.metadata -> 'awa_beat' -> 'pause_after_failures') = 'number'
   AND c.paused_at IS NULL
 ORDER BY c.name
   FOR NO KEY UPDATE;

-- pause_after_failures --
-- Pause on failure, step two, after the batch is written: pause each of the locked
-- schedules %(names)s whose latest N outcomes by fire time (N its pause_after_failures)
-- all failed. Only fires after the schedule's last noted pause count, so a resume starts
-- the count afresh. The pause is awa-beat's (paused_by %(by)s, updated_at bumped for
-- beat's refresh), with a note that says why and the last error (truncated), and an
-- audit_log entry. Returns the schedules paused, with their notes.
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

-- claim_outcome --
-- At most once: the run of a task id starts only if no run of it started before, or the
-- last one asked to be retried (Celery redelivers a retry under the same id). No row
-- back: a duplicate delivery, not to be run.
INSERT INTO awa_beat.outcomes AS o (task_id, schedule, fire_time, job_id, state, retries,
                                    started_at, worker)
VALUES (%(task_id)s, %(schedule)s, %(fire_time)s, %(job_id)s, 'started', %(retries)s,
        %(started_at)s, %(worker)s)
ON CONFLICT (task_id) DO UPDATE
   SET state = 'started', retries = EXCLUDED.retries, started_at = EXCLUDED.started_at,
       finished_at = NULL, runtime = NULL, error = NULL, worker = EXCLUDED.worker,
       updated_at = now()
 WHERE o.state = 'retried' AND o.retries < EXCLUDED.retries
RETURNING task_id;

-- count_duplicate --
UPDATE awa_beat.outcomes SET duplicates = duplicates + 1, updated_at = now()
 WHERE task_id = %(task_id)s;

-- purge_outcomes --
-- Outcomes and occurrences older than the retention, in bounded batches.
WITH old_outcomes AS (
    DELETE FROM awa_beat.outcomes
     WHERE task_id IN (SELECT task_id FROM awa_beat.outcomes
                        WHERE updated_at < now() - %(retention)s::interval LIMIT %(limit)s)
    RETURNING 1
), old_occurrences AS (
    DELETE FROM awa_beat.occurrences
     WHERE id IN (SELECT id FROM awa_beat.occurrences
                   WHERE recorded_at < now() - %(retention)s::interval LIMIT %(limit)s)
    RETURNING 1
)
SELECT (SELECT count(*) FROM old_outcomes) + (SELECT count(*) FROM old_occurrences);

-- schedule_history --
-- `awa-beat history [NAME]`: the occurrences of the schedule %(name)s (NULL: of every
-- schedule), newest first: its jobs (fired, triggered or backfilled) with what became of them
-- (Celery dispatch: the workers' reports; Awa dispatch: Awa's own job state), and the
-- fires the overlap policy skipped or a coalesce left out. A run that started and never
-- reported back within its bound (max_runtime, else a numeric expires, else the
-- default) reads 'lost'. The branches on %(name)s being NULL are planned away with the
-- value (statements are never prepared server-side), so a name keeps its index scans.
WITH jobs AS (
    SELECT j.id, j.state::text AS job_state, j.created_at, j.finalized_at,
           j.metadata ->> 'cron_name' AS schedule,
           j.metadata ->> 'cron_fire_time' AS fire_time,
           coalesce((j.metadata ->> 'triggered_manually')::boolean, false) AS triggered,
           coalesce((j.metadata ->> 'backfilled')::boolean, false) AS backfilled,
           (j.metadata -> 'celery' ->> 'dispatch') = 'celery' AS celery,
           j.metadata ->> 'celery_task_id' AS task_id
      FROM awa.jobs j
     WHERE j.metadata ->> 'cron_name' = %(name)s
        OR (%(name)s::text IS NULL AND j.metadata ? 'cron_name')
     ORDER BY j.id DESC
     LIMIT %(limit)s
), bounds AS (
    SELECT c.name,
           coalesce((c.metadata -> 'awa_beat' ->> 'max_runtime')::float8,
                    CASE WHEN jsonb_typeof(c.metadata -> 'celery' -> 'options' -> 'expires')
                              = 'number'
                         THEN (c.metadata -> 'celery' -> 'options' ->> 'expires')::float8 END
                    ) * interval '1 s' AS bound
      FROM awa.cron_jobs c WHERE c.name IN (SELECT schedule FROM jobs)
), fired AS (
    SELECT j.schedule, CASE WHEN j.triggered THEN 'triggered'
                            WHEN j.backfilled THEN 'backfilled' ELSE 'fired' END AS kind,
           coalesce(j.fire_time::timestamptz, j.created_at) AS at, j.id AS job_id,
           coalesce(o.task_id, j.task_id) AS task_id, j.job_state,
           CASE WHEN NOT j.celery THEN
                    CASE j.job_state WHEN 'completed' THEN 'succeeded' WHEN 'failed' THEN 'failed'
                                     WHEN 'cancelled' THEN 'revoked' WHEN 'running' THEN 'started'
                                     WHEN 'retryable' THEN 'retried' END
                WHEN o.state = 'started' AND coalesce(o.started_at, j.created_at)
                     < now() - coalesce((SELECT b.bound FROM bounds b WHERE b.name = j.schedule),
                                        %(default_max_runtime)s::float8 * interval '1 s')
                     THEN 'lost'
                ELSE o.state END AS outcome,
           o.started_at, coalesce(o.finished_at, CASE WHEN NOT j.celery THEN j.finalized_at END)
               AS finished_at,
           o.runtime, o.worker, o.error, coalesce(o.duplicates, 0) AS duplicates,
           NULL::timestamptz AS last_fire_time, 1 AS count, NULL::text AS reason
      FROM jobs j
      LEFT JOIN LATERAL (
           SELECT o.task_id, o.state, o.started_at, o.finished_at, o.runtime, o.worker,
                  o.error, o.duplicates
             FROM awa_beat.outcomes o
            WHERE o.schedule = j.schedule
              AND (o.fire_time = j.fire_time OR (j.fire_time IS NULL AND o.job_id = j.id))
            LIMIT 1) o ON true
), passed_over AS (
    (SELECT schedule, kind, fire_time AS at, last_fire_time, count, reason
       FROM awa_beat.occurrences
      WHERE schedule = %(name)s
      ORDER BY fire_time DESC
      LIMIT %(limit)s)
    UNION ALL
    (SELECT schedule, kind, fire_time AS at, last_fire_time, count, reason
       FROM awa_beat.occurrences
      WHERE %(name)s::text IS NULL
      ORDER BY recorded_at DESC
      LIMIT %(limit)s)
), passed_over_rows AS (
    SELECT schedule, kind, at, NULL::bigint AS job_id, NULL::text AS task_id,
           NULL::text AS job_state, NULL::text AS outcome, NULL::timestamptz AS started_at,
           NULL::timestamptz AS finished_at, NULL::float8 AS runtime, NULL::text AS worker,
           NULL::text AS error, 0 AS duplicates, last_fire_time, count, reason
      FROM passed_over
)
SELECT * FROM (SELECT * FROM fired UNION ALL SELECT * FROM passed_over_rows) h
 ORDER BY at DESC, job_id DESC NULLS LAST
 LIMIT %(limit)s;

-- explain_records --
-- `awa-beat explain NAME --at T`: what is recorded of the schedule %(name)s at the fire
-- time %(fire_time)s (NULL when the instant is not one) and in the second %(second)s:
-- the jobs made for that fire time (fired, backfilled, or buffered and started later)
-- and the jobs triggered by hand in that second, with what became of them as
-- schedule_history reads it; a backfill of that fire time whose job is gone; and the
-- occurrences (skipped, coalesced, buffered) whose span of fire times holds it.
WITH jobs AS (
    SELECT j.id, j.state::text AS job_state, j.created_at, j.run_at, j.finalized_at,
           j.metadata ->> 'cron_fire_time' AS fire_time,
           CASE WHEN coalesce((j.metadata ->> 'triggered_manually')::boolean, false)
                     THEN 'triggered'
                WHEN coalesce((j.metadata ->> 'buffered')::boolean, false) THEN 'buffered'
                WHEN coalesce((j.metadata ->> 'backfilled')::boolean, false) THEN 'backfilled'
                ELSE 'fired' END AS kind,
           (j.metadata -> 'celery' ->> 'dispatch') = 'celery' AS celery,
           j.metadata ->> 'celery_task_id' AS task_id
      FROM awa.jobs j
     WHERE j.metadata ? 'cron_name' AND j.metadata ->> 'cron_name' = %(name)s
       AND CASE WHEN j.metadata ? 'cron_fire_time'
                THEN (j.metadata ->> 'cron_fire_time')::timestamptz
                     = %(fire_time)s::timestamptz
                ELSE coalesce((j.metadata ->> 'triggered_manually')::boolean, false)
                     AND j.created_at >= %(second)s::timestamptz
                     AND j.created_at < %(second)s::timestamptz + interval '1 second' END
), bound AS (
    SELECT coalesce((c.metadata -> 'awa_beat' ->> 'max_runtime')::float8,
                    CASE WHEN jsonb_typeof(c.metadata -> 'celery' -> 'options' -> 'expires')
                              = 'number'
                         THEN (c.metadata -> 'celery' -> 'options' ->> 'expires')::float8 END,
                    %(default_max_runtime)s::float8) * interval '1 s' AS bound
      FROM awa.cron_jobs c WHERE c.name = %(name)s
)
SELECT 'job' AS source, j.kind, j.id AS job_id, j.job_state,
       CASE WHEN NOT j.celery THEN
                CASE j.job_state WHEN 'completed' THEN 'succeeded' WHEN 'failed' THEN 'failed'
                                 WHEN 'cancelled' THEN 'revoked' WHEN 'running' THEN 'started'
                                 WHEN 'retryable' THEN 'retried' END
            WHEN o.state = 'started' AND coalesce(o.started_at, j.created_at)
                 < now() - coalesce((SELECT b.bound FROM bound b),
                                    %(default_max_runtime)s::float8 * interval '1 s')
                 THEN 'lost'
            ELSE o.state END AS outcome,
       j.fire_time::timestamptz AS fire_time, j.created_at, j.run_at, o.started_at,
       coalesce(o.finished_at, CASE WHEN NOT j.celery THEN j.finalized_at END) AS finished_at,
       o.error, coalesce(o.task_id, j.task_id) AS task_id,
       NULL::timestamptz AS last_fire_time, 1 AS count, NULL::text AS reason,
       NULL::timestamptz AS recorded_at
  FROM jobs j
  LEFT JOIN LATERAL (
       SELECT o.task_id, o.state, o.started_at, o.finished_at, o.error
         FROM awa_beat.outcomes o
        WHERE o.schedule = %(name)s
          AND (o.fire_time = j.fire_time OR (j.fire_time IS NULL AND o.job_id = j.id))
        LIMIT 1) o ON true
UNION ALL
SELECT 'backfill', 'backfilled', b.job_id, NULL, NULL, b.fire_time, b.backfilled_at, NULL,
       NULL, NULL, NULL, NULL, NULL, 1, 'backfilled by ' || b.backfilled_by, NULL
  FROM awa_beat.backfills b
 WHERE b.schedule = %(name)s AND b.fire_time = %(fire_time)s::timestamptz
   AND NOT EXISTS (SELECT FROM jobs j WHERE j.id = b.job_id)
UNION ALL
SELECT 'occurrence', oc.kind, NULL, NULL, NULL, oc.fire_time, NULL, NULL, NULL, NULL, NULL,
       NULL, oc.last_fire_time, oc.count, oc.reason, oc.recorded_at
  FROM awa_beat.occurrences oc
 WHERE oc.schedule = %(name)s AND oc.fire_time <= %(fire_time)s::timestamptz
   AND coalesce(oc.last_fire_time, oc.fire_time) >= %(fire_time)s::timestamptz
 ORDER BY source, job_id, fire_time;

-- overdue_candidates --
-- What the overdue rules (operations.overdue_reasons) need of every schedule: its
-- calendar and cursor, its deadline, the outcome of its latest reported run, and the
-- outcome of the fire its cursor points at. Lost as in schedule_history. Awa-dispatched
-- jobs are read from awa.jobs in one pass.
WITH sched AS (
    SELECT c.name, c.cron_expr, c.timezone, c.missed_fire_policy, c.last_enqueued_at,
           c.created_at, c.paused_at,
           (c.metadata -> 'awa_beat' ->> 'deadline')::float8 AS deadline,
           coalesce((c.metadata -> 'celery' ->> 'dispatch') = 'celery', false) AS celery,
           coalesce((c.metadata -> 'awa_beat' ->> 'max_runtime')::float8,
                    CASE WHEN jsonb_typeof(c.metadata -> 'celery' -> 'options' -> 'expires')
                              = 'number'
                         THEN (c.metadata -> 'celery' -> 'options' ->> 'expires')::float8 END,
                    %(default_max_runtime)s::float8) * interval '1 s' AS bound
      FROM awa.cron_jobs c
), awa_latest AS (
    SELECT DISTINCT ON (j.metadata ->> 'cron_name')
           j.metadata ->> 'cron_name' AS name, j.metadata ->> 'cron_fire_time' AS fire_time,
           j.state::text AS state, j.finalized_at
      FROM awa.jobs j
     WHERE j.metadata ? 'cron_fire_time'
       AND (j.metadata -> 'celery' ->> 'dispatch') IS DISTINCT FROM 'celery'
     ORDER BY j.metadata ->> 'cron_name', j.id DESC
)
SELECT s.name, s.cron_expr, s.timezone, s.missed_fire_policy, s.last_enqueued_at,
       s.created_at, s.paused_at, s.deadline,
       CASE WHEN s.celery THEN
                CASE WHEN o.state = 'started' AND o.started_at < now() - s.bound THEN 'lost'
                     ELSE o.state END
            ELSE CASE a.state WHEN 'completed' THEN 'succeeded' WHEN 'failed' THEN 'failed'
                              WHEN 'cancelled' THEN 'revoked' END
       END AS last_outcome,
       CASE WHEN s.celery THEN o.fire_time ELSE a.fire_time END AS last_run_fire_time,
       CASE WHEN s.celery THEN f.state
            ELSE CASE WHEN a.fire_time = s.last_enqueued_at::text AND a.state = 'completed'
                      THEN 'succeeded' END END AS cursor_outcome,
       CASE WHEN s.celery THEN f.finished_at
            WHEN a.fire_time = s.last_enqueued_at::text THEN a.finalized_at END
           AS cursor_finished_at
  FROM sched s
  LEFT JOIN LATERAL (
       SELECT o.fire_time, o.state, o.started_at FROM awa_beat.outcomes o
        WHERE s.celery AND o.schedule = s.name AND o.fire_time IS NOT NULL
        ORDER BY o.fire_time DESC LIMIT 1) o ON true
  LEFT JOIN awa_beat.outcomes f
         ON s.celery AND f.schedule = s.name AND f.fire_time = s.last_enqueued_at::text
  LEFT JOIN awa_latest a ON NOT s.celery AND a.name = s.name
 ORDER BY s.name;

-- the dashboard (awa-beat web, the Django admin)

-- schedules_page --
-- One page of the list in name order, the rows after %(after)s (NULL: from the start),
-- filtered in the statement: the primary key on name gives the order, so a page reads
-- about a page of rows even among 100,000. %(search)s is lower-case text the name
-- contains (strpos: no pattern to escape); %(owner)s a deployment ('' for rows no
-- awa-beat registered); %(owned_by)s 'config' or 'runtime' (who writes the row); %(names)s
-- narrows to a set computed elsewhere (overdue, failing). The pause note is shown only
-- for the pause it was written with.
{{list_rows}}
 WHERE (%(after)s::text IS NULL OR c.name > %(after)s::text)
   AND {{list_filters}}
 ORDER BY c.name
 LIMIT %(limit)s;

-- schedules_page_before --
-- The page before %(before)s, the same filters, read backwards (the caller reverses it).
{{list_rows}}
 WHERE c.name < %(before)s::text
   AND {{list_filters}}
 ORDER BY c.name DESC
 LIMIT %(limit)s;

-- count_schedules_page --
-- How many rows the list's filters match, counted up to %(cap)s: past that the
-- page says "over", and a broad filter does not cost a full count.
SELECT count(*) FROM (
    SELECT 1
      FROM awa.cron_jobs c
      LEFT JOIN awa_beat.schedules s USING (name)
     WHERE {{list_filters}}
     LIMIT %(cap)s
) matching;

-- fragment list_rows --
-- A row of the list: the schedule, who registered it, and the note of its pause.
SELECT c.name, c.cron_expr, c.timezone, c.kind, c.queue, c.args, c.priority, c.max_attempts,
       c.tags, c.metadata, c.missed_fire_policy, c.last_enqueued_at, c.created_at,
       c.updated_at, c.paused_at, c.paused_by, s.deployment, s.owner, n.note AS pause_note
  FROM awa.cron_jobs c
  LEFT JOIN awa_beat.schedules s USING (name)
  LEFT JOIN awa_beat.pause_notes n ON n.name = c.name AND n.paused_at = c.paused_at

-- fragment list_filters --
-- The list's filters, the same for its pages and its count.
    (%(search)s::text IS NULL OR strpos(lower(c.name), %(search)s::text) > 0)
AND (%(paused)s::boolean IS NULL OR (c.paused_at IS NOT NULL) = %(paused)s::boolean)
AND (%(owner)s::text IS NULL OR s.deployment IS NOT DISTINCT FROM nullif(%(owner)s::text, ''))
AND (%(owned_by)s::text IS NULL OR s.owner = %(owned_by)s::text)
AND (%(names)s::text[] IS NULL OR c.name = ANY(%(names)s::text[]))

-- deployments --
-- The deployments that registered rows, for the list's owner filter.
SELECT DISTINCT deployment FROM awa_beat.schedules ORDER BY deployment;

-- has_queue_meta --
-- Whether Awa's queue pauses are recorded here (Awa's own schema; not the standalone one).
SELECT to_regclass('awa.queue_meta') IS NOT NULL AS present;

-- paused_queues --
-- Awa's paused queues among %(queues)s: a cron pause and a queue pause are independent,
-- and fires into a paused queue pile up.
SELECT queue, paused_at, paused_by FROM awa.queue_meta
 WHERE paused AND queue = ANY(%(queues)s::text[]);

-- pause_schedule_with_note --
-- A pause and its note, in one statement: the note is kept with the pause's instant,
-- so a later pause without one (the CLI, Awa's UI) does not show it.
WITH paused AS (
    UPDATE awa.cron_jobs SET paused_at = now(), paused_by = %(by)s, updated_at = now()
     WHERE name = %(name)s
    RETURNING name, paused_at
), noted AS (
    INSERT INTO awa_beat.pause_notes (name, paused_at, note)
    SELECT name, paused_at, %(note)s FROM paused
    ON CONFLICT (name) DO UPDATE SET paused_at = EXCLUDED.paused_at, note = EXCLUDED.note
)
SELECT paused_at FROM paused;

-- pause_note --
SELECT n.note FROM awa_beat.pause_notes n JOIN awa.cron_jobs c
    ON c.name = n.name AND c.paused_at = n.paused_at
 WHERE n.name = %(name)s;

-- runs_used --
-- How many runs of a schedule with a run limit have fired (what the fire statement
-- counted), for the runs left that `show` and the dashboard list.
SELECT coalesce((SELECT runs FROM awa_beat.schedule_runs WHERE name = %(name)s), 0) AS runs;

-- record_audit --
INSERT INTO awa_beat.audit_log (actor, source, remote_addr, action, schedule, detail, outcome)
VALUES (%(actor)s, %(source)s, %(remote_addr)s, %(action)s, %(schedule)s, %(detail)s,
        %(outcome)s)
RETURNING id, at;

-- audit_log --
-- Newest first, the entries before id %(before_id)s (NULL: the newest), of one schedule
-- or of all.
SELECT id, at, actor, source, remote_addr, action, schedule, detail, outcome
  FROM awa_beat.audit_log
 WHERE (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
   AND (%(schedule)s::text IS NULL OR schedule = %(schedule)s::text)
 ORDER BY id DESC
 LIMIT %(limit)s;

-- The dashboard's logins (migration 0014).

-- web_secret --
SELECT secret, fingerprint FROM awa_beat.web_secret WHERE id = 1;

-- create_web_secret --
-- The first dashboard with a password to start makes the secret; one that starts at the
-- same instant keeps the winner's.
INSERT INTO awa_beat.web_secret (id, secret, fingerprint)
VALUES (1, %(secret)s, %(fingerprint)s)
ON CONFLICT (id) DO NOTHING;

-- replace_web_secret --
-- Only over the secret this dashboard read: two started with a new password at once
-- replace it once.
UPDATE awa_beat.web_secret
   SET secret = %(secret)s, fingerprint = %(fingerprint)s, created_at = now()
 WHERE id = 1 AND fingerprint = %(replaces)s;

-- end_web_sessions --
DELETE FROM awa_beat.web_sessions;

-- start_web_session --
INSERT INTO awa_beat.web_sessions (id_digest, username, expires_at)
VALUES (%(id_digest)s, %(username)s, now() + make_interval(secs => %(lifetime)s));

-- web_session_user --
SELECT username FROM awa_beat.web_sessions
 WHERE id_digest = %(id_digest)s AND expires_at > now();

-- end_web_session --
DELETE FROM awa_beat.web_sessions WHERE id_digest = %(id_digest)s;

-- prune_web_sessions --
DELETE FROM awa_beat.web_sessions WHERE expires_at <= now();
