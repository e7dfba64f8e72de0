SELECT version FROM awa_beat.schema_version ORDER BY version;
