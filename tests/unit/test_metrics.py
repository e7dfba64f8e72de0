"""Metrics, probes and JSON logs of a node on the in-memory store: no database."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from awa_beat._beat.http import CONTACT_WINDOW, Endpoint, liveness, readiness
from awa_beat._beat.metrics import BeatCollector, Refresher, registry_for
from awa_beat._beat.node import BeatNode
from awa_beat._config import Settings
from awa_beat._db.records import OutboxBacklog, OutboxStats
from awa_beat._logs import JsonFormatter, event
from awa_beat._ops.operations import node_run_report
from awa_beat._testing import FakeClock, wait_for
from awa_beat.errors import ConfigError, EndpointError, StoreError, ValidationError
from tests.unit.test_node import Cluster

UTC = timezone.utc
T0 = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)
ENTRIES = {
    "five": {"task": "t.five", "schedule": 5},
    "minutely": {"task": "t.m", "schedule": 60},
    "zeta": {"task": "t.z", "schedule": 3600},
}


def samples(registry: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape by (name, sorted labels), parsed back from the text."""
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(scrape: dict[Any, float], name: str, **labels: str) -> float | None:
    return scrape.get((name, tuple(sorted(labels.items()))))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def test_leader_and_standby_series(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    a = cluster.node("a", ENTRIES).open()
    b = cluster.node("b", ENTRIES).open()
    cluster.run([a, b], 21)
    ra, ca = registry_for(a, clock=clock.monotonic)
    rb, cb = registry_for(b, clock=clock.monotonic)
    sa, sb = samples(ra), samples(rb)
    key = str(a.settings.lock_key)
    assert value(sa, "awa_beat_leader", lock_key=key) == 1
    assert value(sb, "awa_beat_leader", lock_key=key) == 0
    assert value(sa, "awa_beat_leadership_changes_total", change="won") == 1
    assert value(sb, "awa_beat_leadership_changes_total", change="won") == 0
    fired = len(cluster.store.jobs)
    assert fired >= 4 and value(sa, "awa_beat_fires_total") == fired
    assert value(sb, "awa_beat_fires_total") == 0
    # Every fire lands in the lag histogram; the fake clock fires on the second.
    assert value(sa, "awa_beat_fire_lag_seconds_count") == fired
    assert value(sa, "awa_beat_fire_lag_seconds_bucket", le="0.005") == fired
    assert value(sa, "awa_beat_schedules") == value(sb, "awa_beat_schedules") == 3
    assert value(sa, "awa_beat_paused_schedules") == 0
    assert value(sa, "awa_beat_overdue_schedules") == 0
    assert value(sa, "awa_beat_database_up") == 1
    assert value(sa, "awa_beat_seconds_since_last_pass") is not None
    assert value(sb, "awa_beat_seconds_since_last_pass") is None  # only a leader passes
    # Per schedule: the cursor and the next fire, from the engine's memory.
    last = value(sa, "awa_beat_schedule_last_fire_timestamp_seconds", schedule="five")
    nxt = value(sa, "awa_beat_schedule_next_fire_timestamp_seconds", schedule="five")
    assert last == datetime(2026, 3, 2, 12, 0, 20, tzinfo=UTC).timestamp()
    assert nxt == last + 5
    assert value(sa, "awa_beat_schedule_last_outcome", schedule="five", outcome="fired") == 1
    # Standbys come from the heartbeats, read on a thread of the collector's.
    assert value(sa, "awa_beat_standbys_seen") == 1
    ca.close()
    cb.close()
    a.close()
    b.close()


def test_per_schedule_series_are_bounded_by_the_limit(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    node = cluster.node("a", ENTRIES, metrics_schedule_limit=2).open()
    cluster.run([node], 2)
    registry, collector = registry_for(node, clock=clock.monotonic)
    scrape = samples(registry)
    shown = {dict(labels)["schedule"] for name, labels in scrape
             if name == "awa_beat_schedule_paused"}
    assert shown == {"five", "minutely"}  # the first two by name, not "zeta"
    collector.close()
    node.close()


def test_entries_that_opt_in_are_the_ones_with_series(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    entries = {**ENTRIES, "zeta": {**ENTRIES["zeta"],
                                   "options": {"awa_beat": {"metrics": True}}}}
    node = cluster.node("a", entries).open()
    assert node.watched == ["zeta"]
    node.close()
    with pytest.raises(ValidationError, match=r"options\.awa_beat\.metrics"):
        cluster.node("b", {"x": {"task": "t", "schedule": 5,
                                 "options": {"awa_beat": {"metrics": "yes"}}}})


def test_pauses_database_errors_and_coalesced_fires(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    node = cluster.node("a", ENTRIES).open()
    cluster.run([node], 6)
    cluster.store.update("minutely", paused_at=clock())
    cluster.store.down = "connection refused"
    cluster.run([node], 16)  # "five" misses 12:00:10, 12:00:15 and 12:00:20
    registry, collector = registry_for(node, clock=clock.monotonic, census_ttl=0)
    down = samples(registry)
    assert value(down, "awa_beat_database_up") == 0
    assert (value(down, "awa_beat_database_errors_total") or 0) >= 1
    cluster.store.down = None
    cluster.run([node], 3)
    up = samples(registry)
    assert value(up, "awa_beat_database_up") == 1
    assert value(up, "awa_beat_paused_schedules") == 1
    assert value(up, "awa_beat_schedule_paused", schedule="minutely") == 1
    # coalesce: 12:00:10 and 12:00:15 were folded into one fire of 12:00:20
    assert cluster.store.fired("five")[-2:] == ["2026-03-02 12:00:05+00",
                                                "2026-03-02 12:00:20+00"]
    assert value(up, "awa_beat_coalesced_fires_total") == 2
    # The fires put off while the database was away were retried, not skipped.
    assert value(up, "awa_beat_skipped_fires_total", reason="concurrent") == 0
    assert value(up, "awa_beat_skipped_fires_total", reason="failed") == 0
    collector.close()
    node.close()


def test_a_fire_taken_by_another_evaluator_is_skipped_as_concurrent(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    node = cluster.node("a", {"five": ENTRIES["five"]}).open()
    cluster.run([node], 6)
    registry, collector = registry_for(node, clock=clock.monotonic)
    real_fire = cluster.store.evaluator.fire

    def others_first(requests: Any) -> Any:
        for r in requests:  # Awa's leader fired it a moment before us
            cluster.store.update(r.name, last_enqueued_at=r.fire_times[-1])
        return real_fire(requests)

    cluster.store.evaluator.fire = others_first  # type: ignore[method-assign]
    cluster.run([node], 5)
    scrape = samples(registry)
    assert value(scrape, "awa_beat_skipped_fires_total", reason="concurrent") == 1
    assert value(scrape, "awa_beat_schedule_last_outcome", schedule="five",
                 outcome="concurrent") == 1
    collector.close()
    node.close()


def test_overdue_counts_rows_whose_fire_time_passed_long_ago(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    a = cluster.node("a", ENTRIES).open()
    b = cluster.node("b", ENTRIES).open()
    cluster.run([a, b], 2)
    a.close()  # the leader is gone and b never gets to lead: nothing fires
    cluster.lock.holder = object()  # type: ignore[assignment]
    registry, collector = registry_for(b, clock=clock.monotonic, census_ttl=0)
    cluster.run([b], 30)
    assert value(samples(registry), "awa_beat_overdue_schedules") == 0
    cluster.run([b], 61)  # 12:01:33: "five" (due 12:00:05) is more than 60 s late
    assert value(samples(registry), "awa_beat_overdue_schedules") == 1
    cluster.run([b], 30)  # 12:02:03: so is "minutely" (due 12:01:00)
    assert value(samples(registry), "awa_beat_overdue_schedules") == 2
    collector.close()
    b.close()


def test_pluggable_sources_replace_the_engines_view(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    node = cluster.node("a", ENTRIES).open()
    cluster.run([node], 2)
    registry, collector = registry_for(
        node, clock=clock.monotonic, overdue=lambda: 7,
        outcomes=lambda names: {n: "completed" for n in names if n != "zeta"})
    scrape = samples(registry)
    assert value(scrape, "awa_beat_overdue_schedules") == 7
    assert value(scrape, "awa_beat_schedule_last_outcome", schedule="minutely",
                 outcome="completed") == 1
    assert value(scrape, "awa_beat_schedule_last_outcome", schedule="zeta",
                 outcome="completed") is None
    collector.close()
    node.close()


class StatsOutbox:
    """An outbox that publishes nothing and reports fixed counters."""

    def __init__(self) -> None:
        self.stats_now = OutboxStats(5, 2, False)

    def wake(self) -> None: ...
    def lead(self, fence: Any) -> None: ...
    def stand_down(self) -> None: ...
    def due(self) -> bool:
        return False

    def next_wake(self) -> float:
        return float("inf")

    def drain(self) -> int:
        return 0

    def purge(self) -> int:
        return 0

    def close(self) -> None: ...
    def stats(self) -> OutboxStats:
        return self.stats_now


def test_outbox_series(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    node = cluster.node("a", ENTRIES, dispatch="celery", outbox=StatsOutbox()).open()
    cluster.store.backlogs = [OutboxBacklog("other", 3, 400.0)]
    cluster.run([node], 2)
    registry, collector = registry_for(node, clock=clock.monotonic)
    scrape = samples(registry)
    assert value(scrape, "awa_beat_published_total") == 5
    assert value(scrape, "awa_beat_publish_errors_total") == 2
    assert value(scrape, "awa_beat_broker_up") == 0
    # Its own deployment's (none waiting), and every other's, as `awa-beat status` shows.
    assert value(scrape, "awa_beat_outbox_backlog", deployment="d") == 0
    assert value(scrape, "awa_beat_outbox_oldest_age_seconds", deployment="d") == 0
    assert value(scrape, "awa_beat_outbox_backlog", deployment="other") == 3
    assert value(scrape, "awa_beat_outbox_oldest_age_seconds", deployment="other") == 400
    collector.close()
    node.close()


def test_the_database_figures_are_read_at_most_once_per_ttl(clock: FakeClock) -> None:
    reads: list[int] = []

    def fetch() -> int:
        reads.append(1)
        return len(reads)

    refresher = Refresher(fetch, 15, clock=clock.monotonic)
    assert refresher.get() == 1  # the first call waits for the first read
    assert refresher.get() == 1 and len(reads) == 1
    clock.advance(seconds=16)
    refresher.get()  # asks for a new read, answers at once with the last value
    wait_for(lambda: refresher.get() == 2, 5, "the second read")
    assert len(reads) == 2
    refresher.close()


def test_a_read_that_fails_logs_one_line_and_the_next_call_reads_again(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    failures = [AttributeError("'NoneType' object has no attribute 'x'")] * 2

    def fetch() -> str:
        if failures:
            raise failures.pop()
        return "read"

    refresher = Refresher(fetch, 60, name="report", clock=clock.monotonic)
    with caplog.at_level(logging.DEBUG, "awa_beat.metrics"):
        assert refresher.get() is None  # failed: nothing read yet
        # No ttl to wait after a failure: the next call asks again, on the same thread.
        thread = refresher._thread
        wait_for(lambda: refresher.get() == "read", 5, "a read after the failures")
    assert refresher._thread is thread and thread is not None and thread.is_alive()
    failed = [r for r in caplog.records if r.getMessage().startswith("metrics: cannot read")]
    assert [r.levelno for r in failed] == [logging.WARNING, logging.DEBUG]  # once per run
    assert failed[0].getMessage() == (
        "metrics: cannot read report (the next scrape tries again): "
        "AttributeError: 'NoneType' object has no attribute 'x'")
    assert all(r.exc_info is None for r in caplog.records)
    refresher.close()


def test_the_run_report_of_a_node_not_yet_open_is_a_store_error(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    node = cluster.node("a", ENTRIES)
    report = node_run_report(node)  # built before the node opens, as the endpoint is
    with pytest.raises(StoreError, match="not connected"):
        report()


# -- probes ------------------------------------------------------------------------------


@pytest.fixture
def served(clock: FakeClock) -> Iterator[tuple[Cluster, BeatNode, str]]:
    cluster = Cluster(clock)
    node = cluster.node("a", ENTRIES, stuck_after=10).open()
    registry, collector = registry_for(node, clock=clock.monotonic)
    endpoint = Endpoint(node, registry, host="127.0.0.1", port=0,
                        monotonic=clock.monotonic).start()
    host, port = endpoint.address
    yield cluster, node, f"http://{host}:{port}"
    endpoint.close()
    collector.close()
    node.close()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_endpoint_serves_metrics_and_probes(served: tuple[Cluster, BeatNode, str]
                                                ) -> None:
    cluster, node, url = served
    assert get(url + "/readyz") == (503, "fail: starting: no election yet\n")
    cluster.run([node], 2)
    status, text = get(url + "/metrics")
    assert status == 200 and "awa_beat_leader{" in text
    assert get(url + "/healthz") == (200, "ok: alive\n")
    assert get(url + "/readyz") == (200, "ok: leader\n")
    assert get(url + "/nope")[0] == 404


def test_healthz_fails_when_the_loop_is_past_its_planned_step(
        served: tuple[Cluster, BeatNode, str]) -> None:
    cluster, node, url = served
    cluster.run([node], 2)
    wait = node.tick(cluster.clock.monotonic())
    cluster.clock.advance(seconds=wait + 9)  # within awa_beat_stuck_after (10 s)
    assert get(url + "/healthz")[0] == 200
    cluster.clock.advance(seconds=2)  # the loop never came back: stuck
    status, text = get(url + "/healthz")
    assert status == 503 and text.startswith("fail: stuck: the beat loop is")
    node.tick(cluster.clock.monotonic())
    assert get(url + "/healthz")[0] == 200  # it moved again


def test_readyz_follows_the_database(served: tuple[Cluster, BeatNode, str]) -> None:
    cluster, node, url = served
    cluster.run([node], 2)
    cluster.store.down = "connection refused"
    cluster.run([node], 2)
    assert get(url + "/readyz") == (503, "fail: leader: the database is unreachable\n")
    cluster.store.down = None
    cluster.run([node], 2)
    assert get(url + "/readyz")[0] == 200


def test_readyz_fails_without_recent_contact(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    node = cluster.node("a", ENTRIES).open()
    cluster.run([node], 2)
    assert readiness(node, clock.monotonic()) == (True, "leader")
    stale = clock.monotonic() + CONTACT_WINDOW + 1
    ok, why = readiness(node, stale)
    assert not ok and "no database contact" in why
    assert liveness(node, clock.monotonic()) == (True, "alive")
    node.close()
    assert readiness(node, clock.monotonic()) == (False, "closed")


def test_a_port_in_use_is_a_typed_error(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    node = cluster.node("a", ENTRIES)
    registry, _ = registry_for(node)
    first = Endpoint(node, registry, host="127.0.0.1", port=0)
    try:
        with pytest.raises(EndpointError, match=r"cannot listen on 127\.0\.0\.1"):
            Endpoint(node, registry, host="127.0.0.1", port=first.address[1])
    finally:
        first.close()


def test_two_collectors_in_one_process_do_not_clash(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    a = cluster.node("a", ENTRIES)
    b = cluster.node("b", ENTRIES)
    (ra, ca), (rb, cb) = registry_for(a), registry_for(b)
    assert isinstance(ca, BeatCollector) and ca is not cb
    assert value(samples(ra), "awa_beat_info", identity="h:1", deployment="d",
                 version=__import__("awa_beat").__version__) == 1
    assert value(samples(rb), "awa_beat_info", identity="h:2", deployment="d",
                 version=__import__("awa_beat").__version__) == 1


# -- settings and logs -------------------------------------------------------------------


def test_endpoint_and_log_settings() -> None:
    s = Settings.from_app({}, environ={})
    assert (s.http_port, s.http_bind, s.log_format, s.metrics_schedule_limit,
            s.stuck_after) == (None, "127.0.0.1", "text", 100, 60.0)
    s = Settings.from_app({"awa_beat_http_port": 9100}, environ={
        "AWA_BEAT_HTTP_BIND": "0.0.0.0", "AWA_BEAT_LOG_FORMAT": "json",
        "AWA_BEAT_METRICS_SCHEDULE_LIMIT": "0", "AWA_BEAT_STUCK_AFTER": "5"})
    assert (s.http_port, s.http_bind, s.log_format, s.metrics_schedule_limit,
            s.stuck_after) == (9100, "0.0.0.0", "json", 0, 5.0)
    with pytest.raises(ConfigError, match="awa_beat_log_format"):
        Settings.from_app({"awa_beat_log_format": "xml"}, environ={})
    with pytest.raises(ConfigError, match="awa_beat_http_port"):
        Settings.from_app({"awa_beat_http_port": 70000}, environ={})


def test_json_lines_carry_the_action_and_fields(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("awa_beat.test")
    with caplog.at_level(logging.INFO, logger="awa_beat.test"):
        event(log, logging.INFO, "fire", "beat: fired %s", "five", schedule="five",
              fire_time="2026-03-02 12:00:05+00", job_id=7)
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("failed at %s", T0)
    fire, failed = (json.loads(JsonFormatter().format(r)) for r in caplog.records)
    assert fire.pop("time").endswith("Z")
    assert fire == {"level": "INFO", "logger": "awa_beat.test", "message": "beat: fired five",
                    "action": "fire", "schedule": "five",
                    "fire_time": "2026-03-02 12:00:05+00", "job_id": 7}
    assert failed["message"] == f"failed at {T0}" and "ValueError: boom" in failed["exception"]


def test_json_lines_write_what_json_cannot_hold_as_text() -> None:
    record = logging.LogRecord("awa_beat.x", logging.WARNING, __file__, 1, "m", None, None)
    record.lag = timedelta(seconds=3)
    assert json.loads(JsonFormatter().format(record))["lag"] == "0:00:03"


def test_a_failing_source_is_a_500_not_a_dead_endpoint(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    cluster = Cluster(clock)
    node = cluster.node("a", ENTRIES).open()
    cluster.run([node], 2)

    def broken() -> int:
        raise RuntimeError("bug")

    registry, collector = registry_for(node, overdue=broken)
    endpoint = Endpoint(node, registry, host="127.0.0.1", port=0,
                        monotonic=clock.monotonic).start()
    host, port = endpoint.address
    url = f"http://{host}:{port}"
    try:
        with caplog.at_level(logging.INFO, "awa_beat"):
            assert get(url + "/metrics")[0] == 500
        assert get(url + "/healthz")[0] == 200
        # One line saying what and where, not a traceback.
        [line] = [r for r in caplog.records if r.name == "awa_beat.http"]
        assert line.levelno == logging.ERROR and line.exc_info is None
        assert line.getMessage().startswith(
            "http: building /metrics failed: RuntimeError: bug (at test_metrics.py:")
    finally:
        endpoint.close()
        collector.close()
        node.close()


def test_held_and_started_fires_of_buffer_one_are_counted(clock: FakeClock) -> None:
    from awa_beat._db.records import BufferedStart, FiredJob

    cluster = Cluster(clock)
    node = cluster.node("a", {"five": ENTRIES["five"]}).open()
    cluster.run([node], 6)
    registry, collector = registry_for(node, clock=clock.monotonic)
    evaluator = cluster.store.evaluator
    real_fire = evaluator.fire
    held: list[FiredJob] = []

    def held_by_buffer_one(requests: Any) -> Any:
        # What the fire statement answers for a buffer_one schedule whose last run has
        # not finished: the cursor moves, and the fire comes back held, with no job.
        result = real_fire(requests)
        result.buffered, result.jobs = result.jobs, []
        held.extend(result.buffered)
        return result

    def started() -> BufferedStart:
        jobs = [FiredJob(99, j.name, j.fire_time) for j in held]
        held.clear()
        return BufferedStart(jobs, 0)

    evaluator.fire = held_by_buffer_one  # type: ignore[method-assign]
    evaluator.fire_buffered = started  # type: ignore[method-assign]
    cluster.run([node], 7)  # held at :10, started at the look two seconds later
    scrape = samples(registry)
    assert value(scrape, "awa_beat_buffered_fires_total") == 1
    assert value(scrape, "awa_beat_buffered_fires_started_total") == 1
    # The held fire's job counts as a fire, but its wait is no lag of beat's.
    assert value(scrape, "awa_beat_fires_total") == value(
        scrape, "awa_beat_fire_lag_seconds_count") + 1
    collector.close()
    node.close()


def test_fires_older_than_the_catch_up_window_are_counted_as_window(clock: FakeClock
                                                                     ) -> None:
    cluster = Cluster(clock)
    entry = {"task": "t.five", "schedule": 5,
             "options": {"awa_beat": {"catch_up_window": 12, "missed_fire_policy": "catch_up"}}}
    node = cluster.node("a", {"five": entry}).open()
    cluster.run([node], 6)
    registry, collector = registry_for(node, clock=clock.monotonic)
    # The beat is away for a minute: its cursor stays where it was.
    cursor = cluster.store.rows["five"].last_enqueued_at
    assert cursor is not None
    clock.advance(seconds=60)
    cluster.store.update("five", last_enqueued_at=cursor)
    cluster.run([node], 1)
    scrape = samples(registry)
    skipped = value(scrape, "awa_beat_skipped_fires_total", reason="window")
    assert skipped is not None and skipped >= 9
    assert [o[1] for o in cluster.store.occurrences] == ["skipped"]
    assert cluster.store.occurrences[0][4] == skipped
    collector.close()
    node.close()
