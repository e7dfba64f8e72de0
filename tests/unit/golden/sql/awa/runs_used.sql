SELECT coalesce((SELECT runs FROM awa_beat.schedule_runs WHERE name = %(name)s), 0) AS runs;
