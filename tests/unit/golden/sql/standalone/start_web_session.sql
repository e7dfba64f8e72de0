INSERT INTO awa_beat.web_sessions (id_digest, username, expires_at)
VALUES (%(id_digest)s, %(username)s, now() + make_interval(secs => %(lifetime)s));
