SELECT queue, paused_at, paused_by FROM awa.queue_meta
 WHERE paused AND queue = ANY(%(queues)s::text[]);
