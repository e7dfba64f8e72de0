SELECT pg_advisory_xact_lock(%(lock_class)s::int, hashtext(%(name)s));
