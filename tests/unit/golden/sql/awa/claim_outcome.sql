INSERT INTO awa_beat.outcomes AS o (task_id, schedule, fire_time, job_id, state, retries,
                                    started_at, worker)
VALUES (%(task_id)s, %(schedule)s, %(fire_time)s, %(job_id)s, 'started', %(retries)s,
        %(started_at)s, %(worker)s)
ON CONFLICT (task_id) DO UPDATE
   SET state = 'started', retries = EXCLUDED.retries, started_at = EXCLUDED.started_at,
       finished_at = NULL, runtime = NULL, error = NULL, worker = EXCLUDED.worker,
       updated_at = now()
 WHERE o.state = 'retried' AND o.retries < EXCLUDED.retries
RETURNING task_id;
