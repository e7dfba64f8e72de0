UPDATE awa_beat.outcomes SET duplicates = duplicates + 1, updated_at = now()
 WHERE task_id = %(task_id)s;
