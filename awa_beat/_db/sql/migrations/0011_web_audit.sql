-- The dashboard's own tables (awa-beat web and the Django admin); nothing in awa.*.
--
-- Every action taken through a dashboard: who, when, what, from where, and how it
-- ended ('ok', or the error shown to the operator).
CREATE TABLE IF NOT EXISTS awa_beat.audit_log (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    actor        TEXT NOT NULL,
    source       TEXT NOT NULL,
    remote_addr  TEXT,
    action       TEXT NOT NULL,
    schedule     TEXT,
    detail       JSONB NOT NULL DEFAULT '{}',
    outcome      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_log_schedule_id_idx
    ON awa_beat.audit_log (schedule, id DESC);

-- The note given with a pause, kept with the instant of that pause: Awa's paused_by says
-- who, and awa.cron_jobs has no room for why.
CREATE TABLE IF NOT EXISTS awa_beat.pause_notes (
    name       TEXT PRIMARY KEY,
    paused_at  TIMESTAMPTZ NOT NULL,
    note       TEXT NOT NULL
);
