-- standalone only
-- Standalone Awa-compatible tables, created only when Awa itself is not installed.
-- awa.cron_jobs has exactly Awa's columns, types, defaults and check constraint (Awa v026),
-- so an Awa deployment reading this table sees what it would have written itself.
-- awa.jobs is a plain table with Awa's producer columns and Awa's limits as constraints.
CREATE SCHEMA IF NOT EXISTS awa;

DO $$
BEGIN
    CREATE TYPE awa.job_state AS ENUM (
        'scheduled', 'available', 'running', 'completed',
        'retryable', 'failed', 'cancelled', 'waiting_external'
    );
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

CREATE TABLE IF NOT EXISTS awa.cron_jobs (
    name               TEXT PRIMARY KEY,
    cron_expr          TEXT NOT NULL,
    timezone           TEXT NOT NULL DEFAULT 'UTC',
    kind               TEXT NOT NULL,
    queue              TEXT NOT NULL DEFAULT 'default',
    args               JSONB NOT NULL DEFAULT '{}',
    priority           SMALLINT NOT NULL DEFAULT 2,
    max_attempts       SMALLINT NOT NULL DEFAULT 25,
    tags               TEXT[] NOT NULL DEFAULT '{}',
    metadata           JSONB NOT NULL DEFAULT '{}',
    missed_fire_policy TEXT NOT NULL DEFAULT 'coalesce'
        CONSTRAINT cron_jobs_missed_fire_policy_check
        CHECK (missed_fire_policy IN ('coalesce', 'catch_up')),
    last_enqueued_at   TIMESTAMPTZ,
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    paused_at          TIMESTAMPTZ,
    paused_by          TEXT
);

CREATE SEQUENCE IF NOT EXISTS awa.jobs_id_seq;

CREATE TABLE IF NOT EXISTS awa.jobs (
    id           BIGINT PRIMARY KEY DEFAULT nextval('awa.jobs_id_seq'),
    kind         TEXT NOT NULL,
    queue        TEXT NOT NULL DEFAULT 'default',
    args         JSONB NOT NULL DEFAULT '{}',
    state        awa.job_state NOT NULL DEFAULT 'available',
    priority     SMALLINT NOT NULL DEFAULT 2,
    attempt      SMALLINT NOT NULL DEFAULT 0,
    max_attempts SMALLINT NOT NULL DEFAULT 25,
    run_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    finalized_at TIMESTAMPTZ,
    metadata     JSONB NOT NULL DEFAULT '{}',
    tags         TEXT[] NOT NULL DEFAULT '{}',
    CONSTRAINT jobs_kind_length CHECK (length(kind) <= 200),
    CONSTRAINT jobs_queue_name_length CHECK (length(queue) <= 200),
    CONSTRAINT jobs_priority_in_range CHECK (priority BETWEEN 1 AND 4),
    CONSTRAINT jobs_max_attempts_range CHECK (max_attempts BETWEEN 1 AND 1000),
    CONSTRAINT jobs_tags_count CHECK (cardinality(tags) <= 20)
);
ALTER SEQUENCE awa.jobs_id_seq OWNED BY awa.jobs.id;

-- History per schedule (`awa-beat history NAME`, `show NAME`): newest fires first.
CREATE INDEX IF NOT EXISTS jobs_cron_name_id_idx
    ON awa.jobs ((metadata ->> 'cron_name'), id DESC)
    WHERE metadata ? 'cron_name';
CREATE INDEX IF NOT EXISTS jobs_queue_state_idx ON awa.jobs (queue, state);
