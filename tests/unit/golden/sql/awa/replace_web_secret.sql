UPDATE awa_beat.web_secret
   SET secret = %(secret)s, fingerprint = %(fingerprint)s, created_at = now()
 WHERE id = 1 AND fingerprint = %(replaces)s;
