DELETE FROM awa_beat.web_sessions;
