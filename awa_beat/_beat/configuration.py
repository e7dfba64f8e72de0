"""The configuration as a beat holds it: its sync statements, packed between resyncs, and
a digest that tells whether the stored rows are already this configuration's.

A beat encodes its ``beat_schedule`` once at start-up. It keeps the batches compressed,
because a configuration of many entries would otherwise hold every row unpacked for the
life of the process, and it unpacks one batch per resync slice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .._bulk import collector_paused
from .._db.batches import PackedBatch, SyncBatch
from .._db.sql import queries
from .._schedules.spec import ScheduleSpec

#: Rows per statement when beat syncs its configuration (at start, then every sync
#: interval, one slice per tick so that a large schedule never holds up firing).
RESYNC_SLICE = 2000


def encode_batches(specs: Sequence[ScheduleSpec], deployment: str) -> list[SyncBatch]:
    """The configuration as sync statements of RESYNC_SLICE rows."""
    return list(iter_batches(specs, deployment))


def iter_batches(specs: Sequence[ScheduleSpec], deployment: str) -> Iterator[SyncBatch]:
    """:func:`encode_batches`, one at a time."""
    parts: dict[Any, Any] = {}  # rows' metadata and tags, shared (ScheduleSpec.row)
    with collector_paused():
        for i in range(0, len(specs), RESYNC_SLICE):
            yield SyncBatch.encode([spec.row(deployment, parts)
                                    for spec in specs[i:i + RESYNC_SLICE]], deployment)


def config_digest(batches: Iterable[SyncBatch]) -> str:
    """A hash of the configuration as the sync sends it, and of the sync statement
    itself (a release that syncs differently syncs again)."""
    digest = hashlib.sha256(queries["upsert_schedules"].encode())
    for batch in batches:
        digest.update(repr(batch.columns).encode())
    return digest.hexdigest()


def packed_configuration(specs: Sequence[ScheduleSpec], deployment: str
                         ) -> tuple[list[PackedBatch], str]:
    """The configuration packed for the resyncs, encoded a batch at a time (so never
    held whole unpacked), and its :func:`config_digest`."""
    packed: list[PackedBatch] = []

    def packing() -> Iterator[SyncBatch]:
        for batch in iter_batches(specs, deployment):
            packed.append(PackedBatch.pack(batch))
            yield batch

    return packed, config_digest(packing())
