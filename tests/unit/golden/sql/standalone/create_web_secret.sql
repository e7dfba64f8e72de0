INSERT INTO awa_beat.web_secret (id, secret, fingerprint)
VALUES (1, %(secret)s, %(fingerprint)s)
ON CONFLICT (id) DO NOTHING;
