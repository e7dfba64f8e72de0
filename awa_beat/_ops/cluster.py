"""The cluster as an operator sees it: the beats sharing a database, who leads, the jobs
waiting for the dispatch bridge, and who would run the jobs of a schedule.

``awa-beat status``, the dashboard's cluster page and doctor read it through
:attr:`awa_beat._ops.operations.Operations.cluster`. It reads the heartbeat rows and the
outbox and never writes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection

from .._db.database import Database
from .records import BeatView, ClusterStatus, Delivery, DeploymentBacklog, Overdue, QueuePause


class Cluster:
    """The beats and backlogs of one database, on an opened
    :class:`~awa_beat._db.database.Database`.

    ``overdue`` gives the overdue schedules for :meth:`status`; the operations layer
    passes its own reading, so that the status and the schedule list agree.
    """

    def __init__(self, store: Database, overdue: Callable[[], list[Overdue]]) -> None:
        self.store = store
        self._overdue = overdue

    def beats(self) -> list[BeatView]:
        """The beats seen in the last minute."""
        return [BeatView.from_row(b) for b in self.store.cluster.beats()]

    def status(self) -> ClusterStatus:
        """The leaders, the standbys, the backlogs and the overdue schedules."""
        beats = self.beats()
        backlogs = self.backlogs(beats)
        return ClusterStatus(
            leaders=[b for b in beats if b.role == "leader" and b.holds_lock],
            standbys=[b for b in beats if b.role == "standby"],
            backlog=sum(b.jobs for b in backlogs), overdue=self._overdue(),
            backlogs=backlogs, stranded=self.store.outbox.stranded_awa_jobs())

    def backlogs(self, beats: list[BeatView] | None = None) -> list[DeploymentBacklog]:
        """Per deployment, the jobs for Celery not yet published and the beats that
        publish them (``beats``: those seen, if already read)."""
        if beats is None:
            beats = self.beats()
        publishers = Counter(b.deployment for b in beats if b.publishes)
        waiting = {b.deployment: b for b in self.store.outbox.backlogs()}
        return [DeploymentBacklog(d, w.jobs if w else 0, w.oldest_age if w else None,
                                  publishers[d])
                for d in sorted({*waiting, *publishers}) for w in [waiting.get(d)]]

    def delivery(self, deployment: str, dispatch: str) -> Delivery:
        """Who would run the jobs of a row of ``deployment`` dispatched to ``dispatch``:
        refused when nothing would while the beats seen show what would (another
        deployment's beat publishes Celery jobs), a warning when no beat is seen that
        would (none may have started yet)."""
        publishing = sorted({b.deployment for b in self.beats() if b.publishes})
        others = ", ".join(repr(d) for d in publishing)
        if dispatch == "celery":
            runner = f"published to Celery by the beat of deployment {deployment!r}"
            if deployment in publishing:
                return Delivery(deployment, dispatch, runner)
            gone = (f"no beat of deployment {deployment!r} publishes Celery jobs, so its "
                    "jobs would wait in awa.jobs")
            if publishing:
                return Delivery(deployment, dispatch, runner, refusal=(
                    f"{gone} for ever; beats of deployment {others} do: give --deployment "
                    f"{publishing[0]} (or add it with `celery -A <app> awa add`), or start "
                    f"a beat of {deployment!r} with awa_beat_dispatch = 'celery' first"))
            return Delivery(deployment, dispatch, runner, warning=(
                f"{gone} until one runs (no beat that publishes was seen in the last "
                "minute)"))
        runner = "left in awa.jobs for Awa workers"
        if self.store.awa_owned:
            return Delivery(deployment, dispatch, runner)
        gone = ("Awa is not installed in this database, so no Awa worker runs its jobs: "
                "they would pile up in awa.jobs")
        if publishing:
            return Delivery(deployment, dispatch, runner, refusal=(
                f"dispatch awa: {gone}; beats of deployment {others} publish Celery jobs: "
                f"give --dispatch celery --deployment {publishing[0]}"))
        return Delivery(deployment, dispatch, runner, warning=(
            f"dispatch awa: {gone} (give --dispatch celery for Celery workers)"))

    def queue_pauses(self, queues: Collection[str]) -> dict[str, QueuePause]:
        """Awa's paused queues among ``queues``, by queue (none in the standalone layout,
        which has no queue pauses)."""
        if not queues:
            return {}
        return {r["queue"]: QueuePause(r["queue"], r["paused_at"], r["paused_by"])
                for r in self.store.cluster.paused_queues(sorted(queues))}
