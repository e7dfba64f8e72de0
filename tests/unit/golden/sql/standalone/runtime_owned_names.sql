SELECT name FROM awa_beat.schedules
 WHERE owner = 'runtime' AND name = ANY(%(names)b::text[])
 ORDER BY name;
