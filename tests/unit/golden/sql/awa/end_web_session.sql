DELETE FROM awa_beat.web_sessions WHERE id_digest = %(id_digest)s;
