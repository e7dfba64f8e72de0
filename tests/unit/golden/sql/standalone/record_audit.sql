INSERT INTO awa_beat.audit_log (actor, source, remote_addr, action, schedule, detail, outcome)
VALUES (%(actor)s, %(source)s, %(remote_addr)s, %(action)s, %(schedule)s, %(detail)s,
        %(outcome)s)
RETURNING id, at;
