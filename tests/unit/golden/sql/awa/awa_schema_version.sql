SELECT max(version) AS version FROM awa.schema_version;
