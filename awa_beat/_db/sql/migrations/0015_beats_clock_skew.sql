-- Each beat's clock measured against the database's at its last election or ping, in
-- milliseconds (the database's ahead of the host's; negative: behind), so that status,
-- doctor and the dashboard show a replica whose clock keeps it from leading.
ALTER TABLE awa_beat.beats ADD COLUMN IF NOT EXISTS clock_skew_ms DOUBLE PRECISION;
