-- The dashboard's logins (awa-beat web): the secret that signs its session cookies, and
-- the sessions themselves, so that logging out or expiring ends one for good.
--
-- One row: a random secret (never derived from the password, so a cookie tells nothing
-- about it) and a salted, slow fingerprint of the password it was made for; a dashboard
-- started with another password replaces both and ends every session.
CREATE TABLE IF NOT EXISTS awa_beat.web_secret (
    id           SMALLINT PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    secret       BYTEA NOT NULL,
    fingerprint  TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- A logged-in session, by the digest of the random id its cookie carries.
CREATE TABLE IF NOT EXISTS awa_beat.web_sessions (
    id_digest   TEXT PRIMARY KEY,
    username    TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS web_sessions_expires_at_idx
    ON awa_beat.web_sessions (expires_at);
