"""The two table layouts awa-beat runs on, as one object chosen when the database is opened.

In the standalone layout awa-beat created ``awa.cron_jobs`` and a plain ``awa.jobs`` itself,
with triggers of its own that announce changes, and a Celery outbox beside them. Where Awa
is installed, Awa owns those tables: jobs are inserted the way Awa inserts them, no trigger
of ours announces anything, and Celery dispatch is refused, so there is no outbox to read.

Everything that differs between the two is held here, so that the code which reads and
writes the tables asks its layout instead of branching on which one it runs on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .sql import LayoutName, statements

if TYPE_CHECKING:
    from typing_extensions import LiteralString

#: The channel awa-beat's triggers NOTIFY in the standalone layout (see migration 0007).
#: The payload is the table's name, a space and the writer's origin.
CHANGE_CHANNEL = "awa_beat_changes"


@dataclass(frozen=True, slots=True)
class Layout:
    """What one table layout does its own way."""

    name: LayoutName
    """``"standalone"`` or ``"awa"``, as the statements in ``sql/queries.sql`` name it."""
    awa_owned: bool
    """Whether Awa owns the ``awa`` tables (the operator commands report it)."""
    change_channel: str | None
    """The channel announcing changes to ``awa.cron_jobs`` and new jobs, or None where
    nothing announces them (Awa's tables carry no trigger of ours)."""
    celery_outbox: bool
    """Whether jobs may wait here for Celery's broker. Where Awa owns the tables, Celery
    dispatch is refused and Awa's workers run every job, so nothing waits."""
    statements: Mapping[str, LiteralString]
    """Every statement by name, as it is rendered for this layout."""

    @property
    def fire_statement(self) -> LiteralString:
        """The batched compare-and-swap that fires due schedules and inserts their jobs."""
        return self.statements["fire_batch"]

    @property
    def trigger_statement(self) -> LiteralString:
        """The statement that inserts one job for a schedule now (``awa-beat trigger``)."""
        return self.statements["trigger"]


STANDALONE = Layout(
    name="standalone", awa_owned=False, change_channel=CHANGE_CHANNEL, celery_outbox=True,
    statements=statements("standalone"))

AWA = Layout(
    name="awa", awa_owned=True, change_channel=None, celery_outbox=False,
    statements=statements("awa"))


def layout_for(awa_owned: bool) -> Layout:
    """The layout of a database where Awa does (or does not) own the ``awa`` tables."""
    return AWA if awa_owned else STANDALONE
