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
