CREATE SCHEMA IF NOT EXISTS awa_beat;
CREATE TABLE IF NOT EXISTS awa_beat.schema_version (
    version     INTEGER PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
