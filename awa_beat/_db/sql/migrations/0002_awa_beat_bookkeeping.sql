-- awa-beat's own bookkeeping. Never stored in Awa's tables: an Awa deployment
-- sharing the database must not see anything of ours it did not write itself.
--
-- One row per schedule that some awa-beat deployment registered: it tells
-- `list` and the start-up orphan check which rows are ours and which deployment registered them.
CREATE TABLE IF NOT EXISTS awa_beat.schedules (
    name           TEXT PRIMARY KEY,
    deployment     TEXT NOT NULL,
    registered_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
