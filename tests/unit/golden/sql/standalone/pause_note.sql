SELECT n.note FROM awa_beat.pause_notes n JOIN awa.cron_jobs c
    ON c.name = n.name AND c.paused_at = n.paused_at
 WHERE n.name = %(name)s;
