"""Print the newest jobs awa-beat fired, from the same database the example beat uses.

    python -m examples.show_jobs [N]
"""

from __future__ import annotations

import sys

from awa_beat._db.conninfo import database_url
from awa_beat._db.database import Database
from awa_beat._db.embedded import embedded_database_url
from awa_beat.errors import AwaBeatError


def main() -> None:
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    try:
        url = database_url() or embedded_database_url()
        with Database(url) as db:
            rows = db.schedules.recent_jobs(limit)
    except AwaBeatError as exc:  # its message is meant for the user as it is
        sys.exit(f"error: {exc}")
    print(f"{'job':>6}  {'schedule':<18} {'fire time (UTC)':<24} {'task':<18} args")
    for job in rows:
        meta = job["metadata"]
        fire = meta.get("cron_fire_time") or "(triggered)"
        print(f"{job['id']:>6}  {meta.get('cron_name', ''):<18} {fire:<24} "
              f"{job['kind']:<18} {job['args']}")


if __name__ == "__main__":
    main()
