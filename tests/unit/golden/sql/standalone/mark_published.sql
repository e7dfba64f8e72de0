UPDATE awa.jobs j
   SET state = 'completed', finalized_at = now(),
       metadata = j.metadata || jsonb_build_object('celery_task_id', u.task_id)
  FROM unnest(%(ids)b::bigint[], %(task_ids)b::text[]) AS u(id, task_id)
 WHERE j.id = u.id AND j.state = 'available';
