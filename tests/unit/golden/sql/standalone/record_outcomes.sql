INSERT INTO awa_beat.outcomes AS o (task_id, schedule, fire_time, job_id, state, retries,
                                    started_at, finished_at, runtime, worker, error)
SELECT * FROM unnest(%(task_ids)b::text[], %(schedules)b::text[], %(fire_times)b::text[],
                     %(job_ids)b::bigint[], %(states)b::text[], %(retries)b::int[],
                     %(started)b::timestamptz[], %(finished)b::timestamptz[],
                     %(runtimes)b::float8[], %(workers)b::text[], %(errors)b::text[])
ON CONFLICT (task_id) DO UPDATE
   SET state = EXCLUDED.state,
       retries = greatest(o.retries, EXCLUDED.retries),
       started_at = coalesce(EXCLUDED.started_at, o.started_at),
       finished_at = EXCLUDED.finished_at,
       runtime = EXCLUDED.runtime,
       worker = coalesce(EXCLUDED.worker, o.worker),
       error = EXCLUDED.error,
       duplicates = o.duplicates
           + (EXCLUDED.started_at IS NOT NULL AND o.started_at IS NOT NULL
              AND o.state <> 'retried' AND EXCLUDED.retries <= o.retries)::int,
       updated_at = now();
