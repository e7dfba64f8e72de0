"""The node's deadlines: when each periodic duty of a beat replica is due again.

Every deadline is a point on the monotonic clock, which the node is handed, so a test
drives the duties by passing times instead of sleeping.
"""

from __future__ import annotations

from dataclasses import dataclass


class Deadline:
    """A point on the monotonic clock from which something is due again."""

    __slots__ = ("at",)

    def __init__(self, at: float = 0.0) -> None:
        self.at = at
        """Monotonic seconds; 0 means due at the next look."""

    def due(self, now: float) -> bool:
        return now >= self.at

    def set(self, now: float, seconds: float) -> None:
        """Due again ``seconds`` after ``now``."""
        self.at = now + seconds

    def expire(self) -> None:
        """Due at the next look, whatever was set."""
        self.at = 0.0

    def left(self, now: float) -> float:
        """Seconds until due (negative once due)."""
        return self.at - now

    def __repr__(self) -> str:
        return f"Deadline({self.at:.3f})"


@dataclass
class Timers:
    """The node's deadlines, one per periodic duty."""

    election: Deadline
    ping: Deadline
    sync: Deadline
    heartbeat: Deadline
    outbox_check: Deadline
    standby_refresh: Deadline

    @classmethod
    def new(cls) -> Timers:
        return cls(Deadline(), Deadline(), Deadline(), Deadline(), Deadline(), Deadline())
