SELECT DISTINCT deployment FROM awa_beat.schedules ORDER BY deployment;
