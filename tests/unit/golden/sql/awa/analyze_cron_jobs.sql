ANALYZE awa.cron_jobs;
