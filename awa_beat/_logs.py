"""How awa-beat logs: through one logger hierarchy, with an action on every event worth
an alert.

Every module logs through a logger under ``awa_beat`` (``awa_beat.node``,
``awa_beat.bridge.outbox``, ...). The names predate the layer packages, and they stay
stable for logging configurations. The loggers form one tree, so one line of logging
configuration quiets or raises all of them. An event that a user may alert on or search
for (a leadership change, a fire batch, a skip, an outage, a refusal) is logged with
:func:`event`, which puts a stable ``action`` (``"leader.won"``, ``"fire"``) and its
fields on the record. Handlers and JSON formatters read ``record.action``, tests assert
on it, and the message stays free to change.

With ``awa_beat_log_format = "json"``, the handlers are given :class:`JsonFormatter`,
which writes each record, with its action and fields, as one JSON object per line.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime, timezone
from typing import Any

#: LogRecord's own attributes. A field with one of these names would make logging raise.
_RESERVED = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message", "asctime"}


#: The characters that a user-supplied value must not put in a log line as they are: C0
#: and C1 controls (a newline forges a line, and ESC starts a terminal sequence), the line
#: and paragraph separators, and the bidirectional overrides that make text read in
#: another order.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """Return ``text`` with every control character written as an escape (``\\n`` as
    ``\\x0a``), so that a schedule's name or a note cannot forge a log line or move a
    terminal's cursor."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def _safe(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, BaseException):
        return printable(str(value))
    if type(value) in (list, tuple):
        return type(value)(map(_safe, value))
    return value


def event(logger: logging.Logger, level: int, action: str, msg: str, *args: Any,
          exc_info: Any = None, **fields: Any) -> None:
    """Log ``msg % args`` with ``extra={"action": action, **fields}``.

    Field names must not clash with a LogRecord attribute (``name``, ``msg``, ...), so use
    ``schedule=`` for a schedule's name. Arguments and fields that are text (names, tasks,
    notes, errors that quote them) are logged with their control characters escaped
    (:func:`printable`), in the text and the JSON formats alike.
    """
    clash = _RESERVED.intersection(fields)
    if clash:
        raise ValueError(f"log field(s) {sorted(clash)} clash with LogRecord attributes")
    if logger.isEnabledFor(level):
        logger.log(level, msg, *map(_safe, args), exc_info=exc_info, stacklevel=2,
                   extra={"action": action, **{k: _safe(v) for k, v in fields.items()}})


class JsonFormatter(logging.Formatter):
    """Write one JSON object per line: ``time`` (UTC, ISO 8601, milliseconds), ``level``,
    ``logger`` and ``message``, then the event's ``action`` and fields (see :func:`event`)
    and any other ``extra`` that a record carries. ``exc_info`` is written as
    ``exception``.

    Values that JSON cannot hold (datetimes, exceptions) are written as their ``str()``.
    """

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc)
            .isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_") and key not in out:
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def use_json(*loggers: logging.Logger) -> int:
    """Switch every handler of ``loggers`` to :class:`JsonFormatter`, and return how many
    were switched. By default the loggers are the root logger, where Celery's handlers
    are, and ``awa_beat``. Where none of them has a handler, a handler that writes to
    stderr is added to the root logger."""
    targets = loggers or (logging.getLogger(), logging.getLogger("awa_beat"))
    handlers = {id(h): h for lg in targets for h in lg.handlers}
    if not handlers:
        stream = logging.StreamHandler()
        logging.getLogger().addHandler(stream)
        handlers = {id(stream): stream}
    formatter = JsonFormatter()
    for handler in handlers.values():
        handler.setFormatter(formatter)
    return len(handlers)
