"""A real PgBouncer in front of the test server, for the session-lock checks.

Skips when the pgbouncer binary is not installed (.ci/run installs it) or when the
tests run on an embedded server (PgBouncer needs a TCP server here).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def pgbouncer(server_url: str, mode: str) -> Iterator[str]:
    """Run PgBouncer in ``mode`` pooling; yield ``server_url`` rewritten to go through it."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not Path(binary).exists():
        pytest.skip("pgbouncer is not installed")
    parts = urlsplit(server_url)
    if not parts.hostname or not parts.port:
        pytest.skip("PgBouncer needs a TCP PostgreSQL server")
    # PgBouncer runs as the postgres user, who cannot enter pytest's private tmp_path.
    workdir = Path(tempfile.mkdtemp(prefix="awa-beat-pgbouncer-"))
    workdir.chmod(0o777)
    port = _free_port()
    (workdir / "users.txt").write_text('"postgres" ""\n')
    ini = workdir / "pgbouncer.ini"
    ini.write_text(
        f"[databases]\n* = host={parts.hostname} port={parts.port}\n[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nauth_type = trust\n"
        f"auth_file = {workdir / 'users.txt'}\npool_mode = {mode}\nunix_socket_dir =\n"
        f"logfile = {workdir / 'pgbouncer.log'}\n"
        "ignore_startup_parameters = extra_float_digits,options\n")
    for path in workdir.iterdir():
        path.chmod(0o666)
    # PgBouncer will not run as root; -u drops to the server's own user.
    proc = subprocess.Popen([binary, "-u", "postgres", str(ini)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                log = workdir / "pgbouncer.log"
                pytest.skip(f"pgbouncer did not start: "
                            f"{log.read_text() if log.exists() else 'no log'}")
            time.sleep(0.05)
    try:
        user = parts.username or "postgres"
        yield urlunsplit(parts._replace(netloc=f"{user}@127.0.0.1:{port}"))
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)
