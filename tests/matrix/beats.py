"""Real ``celery beat`` processes of the matrix, with their endpoint on."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

from awa_beat._testing import terminate, wait_for
from tests.acceptance.test_observability import Beat, free_port

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def running_beat(app: str, url: str, tmp_path: Path, **env: str) -> Iterator[Beat]:
    """``celery -A app beat -S awa_beat.Scheduler`` on the database at ``url``, ready
    (``/readyz``) but not yet scraped; ``env``: more environment variables."""
    port = free_port()
    environ = {**os.environ, "AWA_BEAT_DATABASE_URL": url, "AWA_BEAT_HTTP_PORT": str(port),
               "AWA_BEAT_ELECTION_INTERVAL": "0.2", "PYTHONPATH": str(ROOT), **env}
    log = tmp_path / "beat.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-q", "-A", app, "beat", "-S",
             "awa_beat.Scheduler", "-l", "info", "--pidfile=", "-s", str(tmp_path / "unused")],
            cwd=ROOT, env=environ, stdout=out, stderr=subprocess.STDOUT)
    # A password of the URL must never appear in a page.
    secret = conninfo_to_dict(url).get("password") or "no password in this URL"
    beat = Beat(proc, port, log, str(secret))
    try:
        wait_for(lambda: beat.probe("/readyz") == 200, 60, "the beat to be ready")
        yield beat
    finally:
        terminate([proc], 10)
