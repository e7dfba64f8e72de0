"""The chaos harness's checks (benchmarks/chaos/chaoscheck.py) each fail on the corruption
meant for them, and pass on a clean run: no database, broker or process needed."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "chaos"))

import chaoscheck as cc


def test_a_clean_run_passes_every_check() -> None:
    assert cc.clean(cc.check_all(cc.synthetic()))


@pytest.mark.parametrize("kind", list(cc.CORRUPTIONS))
def test_each_corruption_is_reported_by_its_check(kind: str) -> None:
    data = cc.synthetic()
    after = cc.check_all(cc.corrupted(data, kind))
    target = cc.CORRUPTIONS[kind][1]
    assert len(after[target]) == 1, after
    assert cc.caught(cc.check_all(data), after, kind)


def test_self_test_catches_everything() -> None:
    rows = cc.self_test()
    assert [r["kind"] for r in rows] == list(cc.CORRUPTIONS)
    assert all(r["caught"] for r in rows)


def test_lost_says_why() -> None:
    data = cc.synthetic()
    pending = dataclasses.replace(data.jobs[10], state="available")
    data.jobs[10] = pending
    data.runs = [r for r in data.runs if r.task_id != pending.task_id]
    [item] = cc.lost(data)
    assert item["job"] == pending.id and item["why"] == "never published"


def test_fault_figures_of_an_outage() -> None:
    """The coalesce schedule skips 10..14 s, then catches up at 15 s; the catch_up
    schedules fire their missed times late, at 15.5 s; everything runs by 16 s."""
    base = cc.synthetic(seconds=40)
    t0 = base.jobs[0].fire_time
    jobs, runs = [], []
    ran = {r.task_id: r for r in base.runs}
    for job in base.jobs:
        offset = job.fire_time - t0
        if 10 <= offset < 15:
            if job.name == "chaos-1s":
                continue  # coalesced away
            job = dataclasses.replace(job, created_at=t0 + 15.5, finalized_at=t0 + 15.6)
            runs.append(dataclasses.replace(ran[job.task_id], at=t0 + 16.0))
        else:
            runs.append(ran[job.task_id])
        jobs.append(job)
    data = dataclasses.replace(base, jobs=jobs, runs=runs)
    fault = cc.Fault("broker-hang", t0 + 9.5, t0 + 14.5, window_end=t0 + 30)
    figures = cc.fault_figures(data, fault)
    assert figures["skipped_at"] == [int(t0) + s for s in range(10, 15)]
    assert figures["recovery_s"] == pytest.approx(15.002 - 14.5)
    assert figures["longest_gap_s"] == pytest.approx(15.002 - 9.002)
    assert figures["drain_published_s"] == pytest.approx(1.1)
    assert figures["drain_executed_s"] == pytest.approx(1.5)
    assert cc.clean(cc.check_all(data))
    assert cc.missing_catch_up(data, fault.start, fault.end) == []
    early = dataclasses.replace(data, jobs=[j for j in jobs if j.created_at < t0 + 15])
    assert ("chaos-2s", t0 + 10) in cc.missing_catch_up(early, fault.start, fault.end)
