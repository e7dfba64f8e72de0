"""Session advisory locks behind a real PgBouncer: refused in transaction pooling."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from awa_beat._cli import main
from awa_beat._db.database import Database
from awa_beat._db.lock import Leadership, SessionLockUnsupported
from tests.pgbouncer import pgbouncer

from .test_beat_processes import ROOT

pytestmark = pytest.mark.acceptance


def test_transaction_pooling_is_refused_everywhere(databases, tmp_path: Path) -> None:
    url = databases.fresh("standalone")
    with pgbouncer(url, "transaction") as bounced:
        with pytest.raises(SessionLockUnsupported, match="PgBouncer"):
            Leadership(bounced).try_acquire()
        # As beat runs it: the check's second connection lent by the store's pool.
        with Database(bounced).open() as store, \
                pytest.raises(SessionLockUnsupported, match="PgBouncer"):
            Leadership(bounced, probe=store.connection).try_acquire()
        doctor = CliRunner().invoke(main, ["doctor", "--database-url", bounced])
        assert doctor.exit_code == 1
        assert "[FAIL] session advisory locks do NOT hold" in doctor.output
        beat = subprocess.run(
            [sys.executable, "-m", "celery", "-A", "tests.acceptance.beatapp", "beat", "-S",
             "awa_beat.Scheduler", "--pidfile=", "-s", str(tmp_path / "unused")],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
            env={**os.environ, "AWA_BEAT_DATABASE_URL": bounced, "PYTHONPATH": str(ROOT)})
    assert beat.returncode == 1
    assert "session advisory locks do not hold" in beat.stderr
    assert "Traceback" not in beat.stderr


def test_session_pooling_is_fine(databases) -> None:
    url = databases.fresh("standalone")
    with pgbouncer(url, "session") as bounced:
        leadership = Leadership(bounced)
        assert leadership.try_acquire() is True
        leadership.resign()
        with Database(bounced).open() as store:
            leadership = Leadership(bounced, probe=store.connection)
            assert leadership.try_acquire() is True
            leadership.resign()
