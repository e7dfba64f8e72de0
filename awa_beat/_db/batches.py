"""The configuration's rows as the bind parameters of the sync statement, and how a beat
keeps them packed in memory between resyncs.

This is no database access: it encodes rows and compresses them. It lives in the database
layer because its shape is the sync statement's parameters (one array per column of
``awa.cron_jobs``), which :class:`~.schedules.ScheduleStore` binds as they are; the beat
above encodes its configuration with it, and the pure schedule code below knows nothing of
statements.
"""

from __future__ import annotations

import json
import pickle
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SyncBatch:
    """Schedule rows encoded as the bind parameters of ``upsert_schedules``. A beat
    keeps its configuration in this form, packed as :class:`PackedBatch` objects."""

    columns: dict[str, Any]
    """The parameters. A column whose every value is the same object is held once, as
    a :class:`_Same`; most columns of a generated configuration are like that."""
    size: int

    @classmethod
    def encode(cls, rows: Sequence[dict[str, Any]], deployment: str) -> SyncBatch:
        """Encode ``rows`` as ``deployment`` registers them."""
        columns = sync_params(rows, deployment)
        for key, values in columns.items():
            # Names never repeat, so their column is not worth comparing.
            if not isinstance(values, list) or key == "names":
                continue
            first = values[0] if values else None
            columns[key] = (_Same(first) if values and all(v == first for v in values)
                            else values)
        return cls(columns, len(rows))

    @property
    def params(self) -> dict[str, Any]:
        """Return the bind parameters of ``upsert_schedules``, each column in full."""
        return {key: [value.value] * self.size if isinstance(value, _Same) else value
                for key, value in self.columns.items()}

    @property
    def names(self) -> list[str]:
        """The names of the batch's rows."""
        return self.columns["names"]


@dataclass(frozen=True, slots=True)
class _Same:
    """A column of a :class:`SyncBatch` whose every row has this value."""

    value: Any


@dataclass(frozen=True, slots=True)
class PackedBatch:
    """A :class:`SyncBatch` held compressed. A beat keeps its configuration for the
    resyncs, which send one batch at a time. Packed, the configuration takes a fraction
    of the memory, because a column of names or arguments becomes one string instead of
    an object per row; each batch is unpacked as it is sent."""

    blob: bytes
    size: int

    @classmethod
    def pack(cls, batch: SyncBatch) -> PackedBatch:
        # Only plain values are pickled, with _Same written as a flag, so that unpickling
        # needs no class of awa-beat's.
        columns = [(k, isinstance(v, _Same), v.value if isinstance(v, _Same) else v)
                   for k, v in batch.columns.items()]
        return cls(zlib.compress(pickle.dumps(columns, pickle.HIGHEST_PROTOCOL), 1),
                   batch.size)

    def unpack(self) -> SyncBatch:
        # The bytes were pickled by pack() in this process, never read from outside.
        columns = pickle.loads(zlib.decompress(self.blob))
        return SyncBatch({k: _Same(v) if same else v for k, same, v in columns}, self.size)


def sync_params(rows: Sequence[dict[str, Any]], deployment: str) -> dict[str, Any]:
    """Return the bind parameters of ``upsert_schedules``, one array per column."""
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    texts: dict[int, str] = {}

    def once(value: Any) -> str:
        # Rows may share one object (ScheduleSpec.row shares them), which is then encoded
        # once. ``rows`` holds every value for the whole call, so no id is reused
        # meanwhile.
        text = texts.get(id(value))
        if text is None:
            text = texts[id(value)] = dumps(value)
        return text

    return {
        "names": [r["name"] for r in rows],
        "cron_exprs": [r["cron_expr"] for r in rows],
        "timezones": [r["timezone"] for r in rows],
        "kinds": [r["kind"] for r in rows],
        "queues": [r["queue"] for r in rows],
        "args": [dumps(r["args"]) for r in rows],
        "priorities": [r["priority"] for r in rows],
        "max_attempts": [r["max_attempts"] for r in rows],
        "tags": [once(r["tags"]) for r in rows],
        "metadata": [once(r["metadata"]) for r in rows],
        "policies": [r["missed_fire_policy"] for r in rows],
        "deployment": deployment,
    }
