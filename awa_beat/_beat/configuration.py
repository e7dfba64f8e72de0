"""The configuration as a beat holds it: its sync statements, packed between resyncs, and
a digest that tells whether the stored rows are already this configuration's.

A beat encodes its ``beat_schedule`` once at start-up. It keeps the batches compressed,
because a configuration of many entries would otherwise hold every row unpacked for the
life of the process, and it unpacks one batch per resync slice. :class:`Configuration`
also runs the start-up sync, which writes the whole configuration before the first fire
unless the stored rows are already this configuration's, and warns of the rows the sync
leaves alone.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .._bulk import collector_paused
from .._db.batches import PackedBatch, SyncBatch
from .._db.sql import queries
from .._logs import event
from .._schedules.spec import ScheduleSpec
from ..errors import DatabaseUnavailable, StoreError

if TYPE_CHECKING:
    from .protocols import NodeStore

# The start-up sync logs under the node's logger, as it did when the node ran it, so that
# logging configurations that select that logger by name go on working.
logger = logging.getLogger("awa_beat.node")

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


class Configuration:
    """A deployment's ``beat_schedule`` as a beat holds it: the sync batches, packed, and
    their digest, with the start-up sync that writes them."""

    def __init__(self, specs: Sequence[ScheduleSpec], deployment: str) -> None:
        self.deployment = deployment
        self.batches, self.digest = packed_configuration(specs, deployment)

    def names(self) -> Iterator[str]:
        """The names of the configured entries, unpacked one batch at a time."""
        return (name for batch in self.batches for name in batch.unpack().names)

    @property
    def size(self) -> int:
        """How many entries the configuration has."""
        return sum(batch.size for batch in self.batches)

    def sync_all(self, store: NodeStore) -> None:
        """The start-up sync, every slice before the first fire, because a fire must not
        use a definition that the configuration has changed. It is skipped when the
        deployment's rows are stored as the last start-up sync of this same
        configuration left them (a restart, or a redeploy that changed no entry), since
        nothing would be written."""
        deployment = self.deployment
        digest = self.digest if self.batches else None
        if digest is not None and self._in_force(store, digest):
            # The rows the deployment owns are then the configured ones, no more (no
            # orphan) and no fewer (none written at run time), so there is nothing to
            # warn of.
            event(logger, logging.INFO, "sync",
                  "beat: the %d schedule(s) of beat_schedule are stored as they are "
                  "configured; nothing to sync", self.size,
                  inserted=0, updated=0, unchanged=self.size, skipped=True)
            return  # the statistics were refreshed with the connections (open_connections)
        result = store.schedules.sync_all([batch.unpack() for batch in self.batches])
        if digest is not None:
            try:
                store.schedules.record_config(deployment, digest, result)
            except DatabaseUnavailable:
                raise
            except StoreError as exc:
                _record_refused(exc, "cannot record the configuration synced")
        inserted, updated, unchanged = result.inserted, result.updated, result.unchanged
        event(logger, logging.INFO, "sync",
              "beat: synced %d schedule(s): %d new, %d changed, %d unchanged",
              result.rows, inserted, updated, unchanged,
              inserted=inserted, updated=updated, unchanged=unchanged, skipped=False)
        store.schedules.analyze_if_stale()  # before the first fire plans against the table
        self._warn_orphans(store)
        self._warn_conflicts(store)

    def _in_force(self, store: NodeStore, digest: str) -> bool:
        """Whether the stored rows are this configuration's. A record that cannot be read
        (a role without rights on awa_beat.config_syncs) means a whole sync."""
        try:
            return store.schedules.config_in_force(self.deployment, digest)
        except DatabaseUnavailable:
            raise
        except StoreError as exc:
            _record_refused(exc, "cannot read the configuration last synced")
            return False

    def _warn_orphans(self, store: NodeStore) -> None:
        """Rows the deployment registered that its configuration no longer has: they keep
        firing until someone removes them, so each is logged."""
        deployment = self.deployment
        for name in store.schedules.orphaned_names(deployment, list(self.names())):
            event(logger, logging.WARNING, "schedule.orphan",
                  "beat: schedule %r is stored (deployment %r) but no longer in "
                  "beat_schedule; it keeps firing until removed: `awa-beat remove %s`",
                  name, deployment, name, schedule=name, deployment=deployment)

    def _warn_conflicts(self, store: NodeStore) -> None:
        """Entries of beat_schedule whose row was written at run time (the Python API,
        `awa-beat add`, or a forced take-over). The sync left those rows alone, and the
        runtime definition stays in force until the row is removed."""
        names = list(self.names())
        if not names:
            return
        for name in store.schedules.runtime_owned_names(names):
            event(logger, logging.WARNING, "schedule.conflict",
                  "beat: schedule %r is in beat_schedule but was written at run time; "
                  "beat leaves the stored row as it is: drop the entry, or `awa-beat "
                  "remove %s` to have the next sync store beat_schedule's definition",
                  name, name, schedule=name, deployment=self.deployment)


def _record_refused(exc: StoreError, what: str) -> None:
    event(logger, logging.WARNING, "sync.record_failed",
          "beat: %s (%s); every start syncs the whole configuration until this is "
          "fixed", what, exc, error=str(exc))
