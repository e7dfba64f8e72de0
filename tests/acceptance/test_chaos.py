"""The chaos harness's short form (benchmarks/chaos/chaos.py --short): three real beat
replicas and a real worker through a SIGKILL of the leader and a broker reset, then
every corruption injected into the run's own table and record, each caught."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.brokers import answers

pytestmark = pytest.mark.acceptance

ROOT = Path(__file__).resolve().parents[2]


def missing() -> str | None:
    pg_config = shutil.which("pg_config")
    if pg_config is None:
        return "no pg_config on PATH: the harness starts a private PostgreSQL cluster"
    bindir = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True).stdout
    if not (Path(bindir.strip()) / "initdb").exists():
        return "no initdb: the harness starts a private PostgreSQL cluster"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "root without runuser: initdb must run as the postgres user"
    if not answers(5672):
        return "RabbitMQ does not answer on 127.0.0.1:5672"
    return None


def test_short_chaos_run(tmp_path: Path) -> None:
    reason = missing()
    if reason:
        pytest.skip(reason)
    # The harness records its run in AWA_BENCH_RESULTS, kept out of the checkout here.
    env = {**os.environ, "AWA_BENCH_RESULTS": str(tmp_path), "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "chaos" / "chaos.py"), "--short", "--json",
         "--inject", "all", "--logs", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.stdout.strip(), f"no report (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
    out = json.loads(proc.stdout)
    context = f"{json.dumps(out, indent=1)[:4000]}\n{proc.stderr[-3000:]}"
    assert [f["fault"] for f in out["faults"]] == ["sigkill", "broker-reset"], context
    assert all(f["recovered"] for f in out["faults"]), context
    checks = out["checks"]
    # The guarantees: one job per fire, no catch_up fire time missed, nothing lost.
    # Re-executions are allowed (delivery is at least once), so only reported.
    for name in ("duplicates", "catch_up_gaps", "lost"):
        assert checks[name]["pass"], f"{name}: {context}"
    assert "count" in checks["re_executions"]
    assert out["executions"] >= out["jobs"] > 20, context
    # Then every corruption was done to the real table / record, and caught.
    assert out["injected"] and all(r["caught"] for r in out["injected"].values()), context
    assert proc.returncode == 0, context
