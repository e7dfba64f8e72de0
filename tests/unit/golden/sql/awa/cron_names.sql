SELECT name FROM awa.cron_jobs;
