"""Celery dispatch bridge throughput: N schedules due in the same second, to RabbitMQ.

    python benchmarks/database/bench_bridge.py [--n 10000] [--repeat 3] [--broker amqp://...]

Each round fires N schedules in one batch, then times Bridge.drain() until every job
is published with the broker's confirmation (persistent messages, publisher confirms)
and marked published. For comparison, in the same run: Celery's own `send_task` loop
(unconfirmed). Targets: at least 8,000 tasks/s; 10,000 due at once all accepted
within 2 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from celery import Celery
from kombu import Connection

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common

from awa_beat._bridge import Bridge
from awa_beat._db.database import Database, connect
from awa_beat._db.records import FireRequest
from awa_beat._schedules.spec import spec_from_entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672//")
    args = parser.parse_args()
    queue = f"awa-beat-bench-{uuid.uuid4().hex[:6]}"
    app = Celery("bench", set_as_current=False)
    app.conf.update(broker_url=args.broker, result_expires=None, task_default_queue=queue)
    n = args.n
    with common.databases("awabeat_bench") as dbs, Database(dbs.fresh("standalone")) as store:
        rows = [spec_from_entry(f"s{i:06d}", {
            "task": "bench.tick", "schedule": 60, "args": [i], "kwargs": {"k": "v"},
            "options": {"expires": 600, "awa_beat": {"dispatch": "celery"}},
        }).row("bench") for i in range(n)]
        store.schedules.sync(rows, deployment="bench")
        admin = connect(store.conninfo)
        rates, totals = [], []
        for r in range(args.repeat):
            cursor = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(
                minutes=args.repeat - r + 1)
            admin.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (cursor,))
            bridge = Bridge(app, store.outbox, deployment="bench", budget=600)
            bridge._publisher.open()  # connect outside the timing
            fire = cursor + timedelta(seconds=30)
            start = time.perf_counter()
            store.evaluator.fire([FireRequest(f"s{i:06d}", cursor, [fire]) for i in range(n)])
            fired = time.perf_counter()
            published = bridge.drain()
            done = time.perf_counter()
            bridge.close()
            assert published == n, published
            rates.append(n / (done - fired))
            totals.append(done - start)
        admin.close()
    baseline = celery_send_task_rate(app, min(n, 5000))
    with Connection(args.broker) as conn:
        conn.default_channel.queue_delete(queue)
    print(f"{'measure':<52} {'median':>10} {'best':>10}")
    print(f"{'bridge, published + confirmed + marked (tasks/s)':<52} "
          f"{statistics.median(rates):>10,.0f} {max(rates):>10,.0f}")
    print(f"{f'{n:,} due at once: fire + all accepted (s)':<52} "
          f"{statistics.median(totals):>10.2f} {min(totals):>10.2f}")
    print(f"{'Celery send_task loop, unconfirmed (tasks/s)':<52} {baseline:>10,.0f}")


def celery_send_task_rate(app: Celery, n: int) -> float:
    with app.producer_or_acquire() as producer:
        start = time.perf_counter()
        for i in range(n):
            app.send_task("bench.tick", (i,), {"k": "v"}, producer=producer)
        rate = n / (time.perf_counter() - start)
    return rate


if __name__ == "__main__":
    common.run(main)
