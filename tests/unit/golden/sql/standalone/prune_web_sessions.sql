DELETE FROM awa_beat.web_sessions WHERE expires_at <= now();
