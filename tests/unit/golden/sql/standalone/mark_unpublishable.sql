UPDATE awa.jobs
   SET state = 'failed', finalized_at = now(),
       metadata = metadata || jsonb_build_object('celery_error', %(error)s::text)
 WHERE id = %(id)s AND state = 'available';
