"""The database: connections, the schema and its migrations, the statements in ``sql/``, the
leader lock and the plain records the statements return.

psycopg is imported here and nowhere above; its errors leave this package as awa-beat's typed ones.
"""
