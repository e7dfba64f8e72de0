SELECT to_regclass('awa.schema_version') IS NOT NULL AS present;
