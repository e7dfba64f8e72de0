SELECT ARRAY(SELECT a.attname::text FROM pg_attribute a
              WHERE a.attrelid = to_regclass('awa.cron_jobs') AND a.attnum > 0
                AND NOT a.attisdropped
              ORDER BY a.attnum) AS columns,
       ARRAY(SELECT t.tgname::text FROM pg_trigger t
              WHERE t.tgrelid = to_regclass('awa.cron_jobs') AND NOT t.tgisinternal
                AND t.tgenabled <> 'D'
              ORDER BY t.tgname) AS triggers,
       ARRAY(SELECT r.rulename::text FROM pg_rewrite r
              WHERE r.ev_class = to_regclass('awa.cron_jobs')
              ORDER BY r.rulename) AS rules;
