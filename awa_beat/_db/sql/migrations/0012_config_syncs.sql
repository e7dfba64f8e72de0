-- The configuration each deployment last synced whole at start-up, so that a restart
-- with the same beat_schedule can tell, with one read, that its rows are stored as
-- they should be and skip the sync. `digest`: beat's hash of the encoded configuration
-- (with the sync statement's text). `row_count` and `fingerprint`: the count of the
-- configuration's rows and the sum of awa_beat.definition_hash over them, worked out
-- by the sync statement from its input, as the rows are to be stored; a start
-- compares them with the same figures over the rows the deployment owns now.
CREATE TABLE IF NOT EXISTS awa_beat.config_syncs (
    deployment   TEXT PRIMARY KEY,
    digest       TEXT NOT NULL,
    row_count    BIGINT NOT NULL,
    fingerprint  NUMERIC NOT NULL,
    synced_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One row's definition, name included, hashed: every column a sync writes, in the
-- types awa.cron_jobs stores them. Fires and pauses change none of them. A plain SQL
-- function (STABLE, as the record-to-text cast is), so the planner inlines it.
-- hashtextextended (PostgreSQL 11) rather than hash_record_extended (14): awa-beat
-- runs on 13.
CREATE OR REPLACE FUNCTION awa_beat.definition_hash(
    name TEXT, cron_expr TEXT, timezone TEXT, kind TEXT, queue TEXT, args JSONB,
    priority SMALLINT, max_attempts SMALLINT, tags TEXT[], metadata JSONB,
    missed_fire_policy TEXT) RETURNS BIGINT
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT hashtextextended((name, cron_expr, timezone, kind, queue, args, priority,
                             max_attempts, tags, metadata, missed_fire_policy)::text, 0)
$$;
