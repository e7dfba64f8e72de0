-- Who owns a schedule row. 'config': a deployment's beat_schedule registered it, and
-- that beat re-asserts it on every sync and reports it as an orphan once it leaves the
-- configuration. 'runtime': the Python API or `awa-beat add` wrote it; no beat's sync
-- ever overwrites it and no beat reports it as an orphan. `deployment` stays the
-- deployment that wrote the row (for a runtime row: the app whose settings it used).
ALTER TABLE awa_beat.schedules
    ADD COLUMN IF NOT EXISTS owner TEXT NOT NULL DEFAULT 'config'
        CONSTRAINT schedules_owner_check CHECK (owner IN ('config', 'runtime'));
