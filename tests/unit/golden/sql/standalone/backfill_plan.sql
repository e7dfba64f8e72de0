WITH asked AS (
    SELECT t AS fire_time, t::text AS fire_text, ord
      FROM unnest(%(fire_times)b::timestamptz[]) WITH ORDINALITY AS u(t, ord)
), fired AS (
    SELECT DISTINCT j.metadata ->> 'cron_fire_time' AS fire_text
      FROM awa.jobs j
     WHERE j.metadata ->> 'cron_name' = %(name)s AND j.metadata ? 'cron_name'
       AND j.metadata ->> 'cron_fire_time' BETWEEN (SELECT min(fire_text) FROM asked)
                                                AND (SELECT max(fire_text) FROM asked)
), wanted AS (
    SELECT a.* FROM asked a
     WHERE NOT EXISTS (SELECT FROM awa_beat.backfills b
                        WHERE b.schedule = %(name)s AND b.fire_time = a.fire_time)
       AND NOT EXISTS (SELECT FROM fired f WHERE f.fire_text = a.fire_text)
       AND NOT EXISTS (SELECT FROM awa_beat.outcomes o
                        WHERE o.schedule = %(name)s AND o.fire_time = a.fire_text)
)
SELECT fire_time FROM wanted ORDER BY ord;
