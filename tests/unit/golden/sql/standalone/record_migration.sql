INSERT INTO awa_beat.schema_version (version, description) VALUES (%(version)s, %(description)s);
