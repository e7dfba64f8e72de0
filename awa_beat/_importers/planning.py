"""The plan of an import: what the results would do to the stored rows.

The plan says what would be new, what would change (field by field), what stays
unchanged, whose cursor moves forward (a stored cursor never moves back), and what is
left out. It is pure: nothing is read or written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .common import Imported, NotCarried, Result, iso

DEFINITION = ("cron_expr", "timezone", "kind", "queue", "args", "priority", "max_attempts",
              "tags", "metadata", "missed_fire_policy")


@dataclass
class Plan:
    """What importing ``results`` does to the stored rows. It is computed; nothing is written."""

    new: list[Imported] = field(default_factory=list)
    changed: list[tuple[str, dict[str, tuple[Any, Any]]]] = field(default_factory=list)
    """The pairs (name, {field: (stored, imported)}) of existing rows whose definition
    changes."""
    cursor_moves: list[tuple[str, datetime | None, datetime]] = field(default_factory=list)
    """The triples (name, stored, imported) whose cursor moves forward to the source's
    last run."""
    cursor_kept: list[tuple[str, datetime, datetime]] = field(default_factory=list)
    """The triples (name, stored, imported) whose source's last run is older, so the
    cursor stays."""
    unchanged: list[str] = field(default_factory=list)
    not_carried: list[NotCarried] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "new": [{"name": i.name, "schedule": i.spec.cron_expr, "timezone": i.spec.timezone,
                     "task": i.spec.kind, "cursor": iso(i.cursor), "paused_by": i.paused_by}
                    for i in self.new],
            "changed": [{"name": n, "fields": {k: {side: _jsonable(v) for side, v in
                                                   (("stored", a), ("imported", b))
                                                   if v is not ABSENT}
                                               for k, (a, b) in f.items()}}
                        for n, f in self.changed],
            "cursor_moves": [{"name": n, "stored": iso(a), "imported": iso(b)}
                             for n, a, b in self.cursor_moves],
            "cursor_kept": [{"name": n, "stored": iso(a), "imported": iso(b)}
                            for n, a, b in self.cursor_kept],
            "unchanged": list(self.unchanged),
            "not_carried_over": [{"name": r.name, "reason": r.reason} for r in self.not_carried],
            "notes": list(self.notes),
        }


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def runtime_owned(name: str) -> NotCarried:
    return NotCarried(name, "written at run time (the Python API or `awa-beat add`): the "
                      "import leaves the stored row as it is; --force to overwrite it, "
                      "and make it this deployment's configuration again")


def plan(results: Sequence[Result], existing: Mapping[str, Any], deployment: str, *,
         now: datetime | None = None, force: bool = False) -> Plan:
    """Compare ``results`` with the stored rows (``ScheduleRow`` by name).

    With ``now``, a cursor in the future (the old scheduler's clock was ahead) gets a
    note. It is kept as it is, since moving it back could fire a run twice. A stored row
    written at run time (owner 'runtime') is not carried over unless ``force`` is given,
    because the application that wrote it owns its definition, as beat's own sync
    respects.
    """
    out = Plan()
    for result in results:
        if isinstance(result, NotCarried):
            out.not_carried.append(result)
            continue
        stored = existing.get(result.name)
        if not force and stored is not None and stored.owner == "runtime":
            out.not_carried.append(runtime_owned(result.name))
            continue
        if now is not None and result.cursor is not None and result.cursor > now:
            out.notes.append(f"{result.name}: its last run, {iso(result.cursor)}, is in the "
                             "future (was the old scheduler's clock ahead?); no fire before "
                             "it will happen")
        row = existing.get(result.name)
        if row is None:
            out.new.append(result)
            continue
        wanted = result.spec.row(deployment)
        fields: dict[str, tuple[Any, Any]] = {}
        for key in DEFINITION:
            _diff(key, _normal(getattr(row, key)), _normal(wanted[key]), fields)
        if row.deployment != deployment:
            fields["deployment"] = (row.deployment, deployment)
        if fields:
            out.changed.append((result.name, fields))
        stored, imported = row.last_enqueued_at, result.cursor
        moves = False
        if imported is not None and (stored is None or imported > stored):
            moves = True
            out.cursor_moves.append((result.name, stored, imported))
        elif imported is not None and stored is not None and imported < stored:
            out.cursor_kept.append((result.name, stored, imported))
        if not fields and not moves:
            out.unchanged.append(result.name)
        if result.paused and row.paused_at is None:
            out.notes.append(f"{result.name}: disabled in the source but active here; left "
                             f"active (`awa-beat pause {result.name}` to pause it)")
        elif not result.paused and row.paused_at is not None:
            out.notes.append(f"{result.name}: paused here (by {row.paused_by or '?'}) but "
                             f"enabled in the source; left paused (`awa-beat resume "
                             f"{result.name}` to resume it)")
    return out


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


#: In a :attr:`Plan.changed` pair, this says that the key is missing on that side.
ABSENT: Any = _Absent()


def _diff(path: str, old: Any, new: Any, out: dict[str, tuple[Any, Any]]) -> None:
    """Return the differing leaves of two JSON values by dotted path. Dicts are walked into."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*old, *(k for k in new if k not in old)]:
            _diff(f"{path}.{key}", old.get(key, ABSENT), new.get(key, ABSENT), out)
    elif old != new:
        out[path] = (old, new)


def _normal(value: Any) -> Any:
    """Return values as JSONB would compare them: tuples become lists, and 1 and 1.0 are
    equal."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))
