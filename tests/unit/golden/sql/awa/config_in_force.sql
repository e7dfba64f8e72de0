SELECT EXISTS (
    SELECT FROM awa_beat.config_syncs k
     WHERE k.deployment = %(deployment)s AND k.digest = %(digest)s
       AND (k.row_count, k.fingerprint) = (
           SELECT count(*), coalesce(sum(awa_beat.definition_hash(
                      c.name, c.cron_expr, c.timezone, c.kind, c.queue, c.args,
                      c.priority, c.max_attempts, c.tags, c.metadata,
                      c.missed_fire_policy)), 0)
             FROM awa_beat.schedules s LEFT JOIN awa.cron_jobs c ON c.name = s.name
            WHERE s.deployment = %(deployment)s AND s.owner = 'config')
) AS in_force;
