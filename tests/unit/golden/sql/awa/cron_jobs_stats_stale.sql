SELECT abs(greatest(c.reltuples, 0) - n.total) > greatest(1000, n.total * 0.2)
  FROM pg_class c, (SELECT count(*) AS total FROM awa.cron_jobs) n
 WHERE c.oid = 'awa.cron_jobs'::regclass;
