SELECT true AS present FROM awa.cron_jobs WHERE name = %(name)s;
