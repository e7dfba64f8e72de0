"""Real `celery beat` processes with the endpoint on: series, probes and JSON logs.

A leader and a standby reach PostgreSQL through a TCP proxy the test can cut. Their
scrapes must agree with what they do (one leader, fires counted), /readyz must fail
while the database is unreachable and come back, /healthz must fail while a loop is
blocked and come back, and the JSON log lines must carry each event's action and
fields. No DSN password may appear in a page or a log line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from awa_beat._testing import terminate, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "chaos"))

from chaosinfra import BrokerProxy, free_port  # a plain TCP proxy

pytestmark = pytest.mark.acceptance
ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "obs-secret-pw"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:  # not listening yet
        return 0, str(exc)


class Beat:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path,
                 secret: str) -> None:
        self.proc, self.port, self.log, self.secret = proc, port, log, secret
        self.url = f"http://127.0.0.1:{port}"

    def scrape(self) -> dict[str, float]:
        """Samples by name with their labels rendered, e.g. ``awa_beat_leader{...}``."""
        status, text = get(self.url + "/metrics")
        assert status == 200, text
        assert self.secret not in text
        out = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
                out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
        return out

    def probe(self, path: str) -> int:
        if self.proc.poll() is not None:
            raise AssertionError(f"beat exited with {self.proc.returncode}:\n"
                                 f"{self.output()[-3000:]}")
        status, text = get(self.url + path)
        assert self.secret not in text
        return status

    def leading(self) -> bool:
        return any(k.startswith("awa_beat_leader{") and v == 1
                   for k, v in self.scrape().items())

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def upstream(url: str) -> tuple[str, int] | str:
    """Where the server of ``url`` listens: a host and port, or a Unix socket's path."""
    params = conninfo_to_dict(url)
    host, port = str(params.get("host") or "/tmp"), int(params.get("port") or 5432)
    return f"{host}/.s.PGSQL.{port}" if host.startswith("/") else (host, port)


@pytest.fixture
def proxy(databases) -> Iterator[BrokerProxy]:
    # The server every other test uses (AWA_BEAT_TEST_DATABASE_URL, ...), not a fixed one.
    p = BrokerProxy(["127.0.0.1"], upstream(databases.server_url))
    p.start()
    yield p
    p.close()


@pytest.fixture
def beats(databases, proxy: BrokerProxy, tmp_path: Path) -> Iterator[list[Beat]]:
    params = conninfo_to_dict(databases.fresh("standalone"))
    # A server that asks for a password gets its own; one that trusts gets ours, which
    # must then appear in no page and no log line either.
    secret = params.get("password") or PASSWORD
    url = make_conninfo(**{**params, "host": "127.0.0.1", "port": str(proxy.port),
                           "password": secret})
    started: list[Beat] = []

    def start(n: int, extra: dict[str, str]) -> Beat:
        port = free_port()
        env = {**os.environ, "AWA_BEAT_DATABASE_URL": url, "AWA_BEAT_HTTP_PORT": str(port),
               "AWA_BEAT_ELECTION_INTERVAL": "0.2", "AWA_BEAT_PING_INTERVAL": "0.5",
               "AWA_BEAT_STUCK_AFTER": "10", "OBSERVEAPP_STUCK": str(tmp_path / "stuck"),
               "PYTHONPATH": str(ROOT), **extra}
        log = tmp_path / f"beat{n}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                # -q: no banner on stdout, so that every line is a log line
                [sys.executable, "-m", "celery", "-q", "-A", "tests.acceptance.observeapp",
                 "beat", "-S", "tests.acceptance.observeapp.StuckScheduler", "-l", "info",
                 "--pidfile=", "-s", str(tmp_path / f"unused-{n}")],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        beat = Beat(proc, port, log, secret)
        started.append(beat)
        return beat

    first = start(0, {"AWA_BEAT_LOG_FORMAT": "json"})
    wait_for(lambda: first.probe("/readyz") == 200, 60, "the first beat to be ready")
    start(1, {})
    yield started
    terminate([b.proc for b in started], 10)


def roles(beats: list[Beat]) -> tuple[Beat, Beat] | None:
    """(leader, standby) once exactly one leads."""
    leading = [b.leading() for b in beats]
    if leading.count(True) != 1:
        return None
    return (beats[0], beats[1]) if leading[0] else (beats[1], beats[0])


def test_series_and_probes_of_a_leader_and_a_standby(beats: list[Beat], proxy: BrokerProxy,
                                                     tmp_path: Path) -> None:
    try:
        _check(beats, proxy, tmp_path)
    except AssertionError as exc:
        logs = "\n".join(f"--- beat {b.port}\n{b.output()[-3000:]}" for b in beats)
        raise AssertionError(f"{exc}\n{logs}") from None


def _check(beats: list[Beat], proxy: BrokerProxy, tmp_path: Path) -> None:
    wait_for(lambda: all(b.probe("/readyz") == 200 for b in beats), 60, "both beats ready")
    leader, standby = wait_for(lambda: roles(beats), 30, "one leader")
    # Counters move with what the leader does; the standby fires nothing.
    fires = leader.scrape()["awa_beat_fires_total"]
    wait_for(lambda: leader.scrape()["awa_beat_fires_total"] >= fires + 2, 10,
             "fires_total to grow")
    scrape = leader.scrape()
    assert scrape["awa_beat_fire_lag_seconds_count"] == scrape["awa_beat_fires_total"]
    assert scrape["awa_beat_schedule_last_outcome{outcome=fired,schedule=every-second}"] == 1
    assert standby.scrape()["awa_beat_fires_total"] == 0
    wait_for(lambda: leader.scrape().get("awa_beat_standbys_seen") == 1, 20,
             "the leader to see its standby")
    assert all(b.probe("/healthz") == 200 for b in beats)

    # The database goes away: neither is ready, neither is stuck; then both are back.
    proxy.reset()
    wait_for(lambda: all(b.probe("/readyz") == 503 for b in beats), 30,
             "/readyz to fail on both while the database is unreachable")
    assert all(b.scrape()["awa_beat_database_up"] == 0 for b in beats)
    assert all(b.probe("/healthz") == 200 for b in beats)
    proxy.restore()
    wait_for(lambda: all(b.probe("/readyz") == 200 for b in beats), 30,
             "/readyz to recover")
    leader, standby = wait_for(lambda: roles(beats), 30, "one leader again")
    assert sum(b.scrape()["awa_beat_leadership_changes_total{change=won}"]
               for b in beats) >= 2

    # The leader's loop blocks (as on a dead socket): its liveness fails, the standby's
    # does not; it recovers once the loop moves again.
    flag = tmp_path / "stuck"
    flag.touch()
    wait_for(lambda: leader.probe("/healthz") == 503, 30, "/healthz to fail when stuck")
    assert leader.scrape()["awa_beat_loop_behind_seconds"] > 10
    assert standby.probe("/healthz") == 200
    flag.unlink()
    wait_for(lambda: leader.probe("/healthz") == 200, 10, "/healthz to recover")

    # JSON logs of the first beat: from the switch on (Celery's "beat: Starting..." comes
    # before the scheduler is built), every line one object; actions with their fields.
    text = beats[0].output()
    lines = [json.loads(line) for line in text[text.index("{"):].splitlines() if line.strip()]
    assert all({"time", "level", "logger", "message"} <= set(r) for r in lines)
    actions = {r.get("action") for r in lines}
    assert {"sync", "leader.won", "fire", "leader.lost"} <= actions, actions
    fired = next(r for r in lines if r.get("action") == "fire")
    assert fired["schedule"] == "every-second" and fired["job_id"] >= 1
    assert fired["fire_time"].endswith("+00")
    won = next(r for r in lines if r.get("action") == "leader.won")
    assert won["lock_key"] and won["identity"]
    lost = next(r for r in lines if r.get("action") == "leader.lost")
    assert lost["level"] == "WARNING" and lost["error"]
    # Other libraries' lines through the same handlers (psycopg's pool in the outage).
    assert any(not r["logger"].startswith("awa_beat") for r in lines)
    for beat in beats:
        assert beat.secret not in beat.output()
