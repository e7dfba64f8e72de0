DELETE FROM awa_beat.beats WHERE identity = %(identity)s;
