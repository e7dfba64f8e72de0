DELETE FROM awa.jobs
 WHERE id IN (SELECT id FROM awa.jobs
               WHERE state = 'completed'
                 AND (metadata -> 'celery' ->> 'dispatch') = 'celery'
                 AND finalized_at < now() - %(retention)s::interval
               LIMIT %(limit)s);
