-- One row per running beat process, refreshed every few seconds, for `awa-beat status`.
CREATE TABLE IF NOT EXISTS awa_beat.beats (
    identity      TEXT PRIMARY KEY,
    host          TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    deployment    TEXT NOT NULL,
    lock_key      BIGINT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('leader', 'standby')),
    started_at    TIMESTAMPTZ NOT NULL,
    leader_since  TIMESTAMPTZ,
    seen_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_lag_ms   DOUBLE PRECISION
);
