SELECT coalesce(metadata -> 'celery' ->> 'deployment', '') AS deployment, count(*) AS jobs
  FROM awa.jobs
 WHERE state = 'available' AND metadata ? 'cron_name'
   AND (metadata -> 'celery' ->> 'dispatch') IS DISTINCT FROM 'celery'
 GROUP BY 1
 ORDER BY 1;
