SELECT coalesce(metadata -> 'celery' ->> 'deployment', '') AS deployment,
       count(*) AS jobs,
       extract(epoch FROM statement_timestamp() - min(created_at))::float8 AS oldest_age
  FROM awa.jobs
 WHERE state = 'available' AND (metadata -> 'celery' ->> 'dispatch') = 'celery'
 GROUP BY 1
 ORDER BY 1;
