SELECT secret, fingerprint FROM awa_beat.web_secret WHERE id = 1;
