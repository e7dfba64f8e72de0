"""An awa-pg worker process (which runs Awa's own cron leader) for acceptance tests.

    python -m tests.acceptance.awa_worker DATABASE_URL

It serves a queue nobody writes to, so it only competes as Awa's cron evaluator.
Stops on SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from dataclasses import dataclass

import awa

QUEUE = "awa_beat_test_idle"


@dataclass
class Idle:
    """A job kind nobody inserts; Awa will not start without one handler."""


async def main(url: str) -> None:
    client = awa.AsyncClient(url)

    @client.task(Idle, queue=QUEUE)
    async def handle(job: object) -> None:
        pass
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await client.start([(QUEUE, 1)], leader_election_interval_ms=200)
    print("awa worker started", flush=True)
    await stop.wait()
    await client.shutdown()
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
