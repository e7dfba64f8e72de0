SELECT name FROM awa_beat.schedules
 WHERE deployment = %(deployment)s AND owner = 'config'
EXCEPT
SELECT unnest(%(names)b::text[])
 ORDER BY 1;
