SELECT to_regclass('awa.queue_meta') IS NOT NULL AS present;
