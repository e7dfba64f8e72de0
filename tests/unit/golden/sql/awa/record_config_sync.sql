INSERT INTO awa_beat.config_syncs AS k (deployment, digest, row_count, fingerprint)
VALUES (%(deployment)s, %(digest)s, %(row_count)s, %(fingerprint)s)
ON CONFLICT (deployment) DO UPDATE
   SET digest = EXCLUDED.digest, row_count = EXCLUDED.row_count,
       fingerprint = EXCLUDED.fingerprint, synced_at = now();
