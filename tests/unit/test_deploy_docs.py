"""The operating docs hold: the Kubernetes example parses and probes the right paths,
the alert rules pass promtool (when installed) and use only documented series, and
every series a beat exports is documented in docs/observability.md."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from prometheus_client import generate_latest

from awa_beat._beat.metrics import registry_for
from awa_beat._testing import FakeClock
from tests.unit.test_metrics import ENTRIES, StatsOutbox
from tests.unit.test_node import Cluster

DOCS = Path(__file__).resolve().parents[2] / "docs"
KUBE = DOCS / "deploy" / "kubernetes"
RULES = DOCS / "deploy" / "prometheus" / "awa-beat-rules.yml"
SERIES = re.compile(r"\bawa_beat_[a-z_]+[a-z]\b")


def manifests() -> dict[str, dict]:
    docs = [d for path in sorted(KUBE.glob("*.yaml"))
            for d in yaml.safe_load_all(path.read_text()) if d]
    return {d["kind"]: d for d in docs}


def test_the_kubernetes_example_parses_and_probes_the_endpoint() -> None:
    kinds = manifests()
    assert set(kinds) >= {"Deployment", "PodDisruptionBudget", "Secret"}
    deployment = kinds["Deployment"]
    assert deployment["spec"]["replicas"] == 3
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    env = {e["name"]: e for e in container["env"]}
    assert env["AWA_BEAT_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": kinds["Secret"]["metadata"]["name"], "key": "database-url"}
    port = int(env["AWA_BEAT_HTTP_PORT"]["value"])
    assert [p["containerPort"] for p in container["ports"]] == [port]
    assert env["AWA_BEAT_HTTP_BIND"]["value"] == "0.0.0.0"  # the kubelet calls the pod IP
    assert "awa_beat.Scheduler" in container["args"]
    pdb = kinds["PodDisruptionBudget"]["spec"]
    assert pdb["minAvailable"] == 2
    assert pdb["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


def documented() -> set[str]:
    text = (DOCS / "observability.md").read_text()
    text = text[text.index("## Series"):text.index("## Pluggable sources")]
    rows = [line for line in text.splitlines() if line.startswith("| `awa_beat_")]
    return {SERIES.search(row).group(0) for row in rows}  # type: ignore[union-attr]


def test_every_series_exported_is_documented() -> None:
    clock = FakeClock(datetime(2026, 3, 2, 12, tzinfo=timezone.utc))
    cluster = Cluster(clock)
    node = cluster.node("a", ENTRIES, dispatch="celery", outbox=StatsOutbox()).open()
    cluster.run([node], 6)
    registry, collector = registry_for(node, clock=clock.monotonic)
    text = generate_latest(registry).decode()
    collector.close()
    node.close()
    exported = {m.group(1) for m in re.finditer(r"^# TYPE (\S+) ", text, re.MULTILINE)}
    exported = {n + "_total" if f"{n}_total" in text else n for n in exported}
    assert exported - documented() == set()
    assert documented() - exported == set()


def test_the_alert_rules_use_only_documented_series() -> None:
    rules = yaml.safe_load(RULES.read_text())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    used = {re.sub(r"_(bucket|count|sum)$", "", m) for e in exprs for m in SERIES.findall(e)}
    assert used - documented() == set()
    names = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    assert names >= {"AwaBeatNoLeader", "AwaBeatFireLagHigh", "AwaBeatOutboxGrowing",
                     "AwaBeatScheduleOverdue", "AwaBeatStuck"}


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (Debian package `prometheus`)")
    return found


def test_promtool_checks_the_rules() -> None:
    out = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    tests = RULES.with_name("awa-beat-rules.test.yml")
    out = subprocess.run([promtool(), "test", "rules", tests.name], capture_output=True,
                         text=True, cwd=tests.parent)
    assert out.returncode == 0, out.stdout + out.stderr
