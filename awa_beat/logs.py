"""How awa-beat logs: one logger hierarchy, and an action on every event worth an alert.

Every module logs through ``logging.getLogger(__name__)``, so the loggers form one tree
under ``awa_beat`` (``awa_beat.node``, ``awa_beat.bridge.outbox``, ...): one line of
logging configuration quiets or raises all of them. An event a user may alert on or
search for (a leadership change, a fire batch, a skip, an outage, a refusal) is logged
with :func:`event`, which puts a stable ``action`` (``"leader.won"``, ``"fire"``) and its
fields on the record: handlers and JSON formatters read ``record.action``, tests assert
on it, and the message stays free to change.
"""

from __future__ import annotations

import logging
from typing import Any

#: LogRecord's own attributes: a field of that name would make logging raise.
_RESERVED = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message", "asctime"}


def event(logger: logging.Logger, level: int, action: str, msg: str, *args: Any,
          exc_info: Any = None, **fields: Any) -> None:
    """Log ``msg % args`` with ``extra={"action": action, **fields}``.

    Field names must not clash with a LogRecord attribute (``name``, ``msg``, ...): use
    ``schedule=`` for a schedule's name.
    """
    clash = _RESERVED.intersection(fields)
    if clash:
        raise ValueError(f"log field(s) {sorted(clash)} clash with LogRecord attributes")
    if logger.isEnabledFor(level):
        logger.log(level, msg, *args, exc_info=exc_info, stacklevel=2,
                   extra={"action": action, **fields})
