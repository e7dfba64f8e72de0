"""Log lines: a user's text cannot forge a line or reach the terminal as a control."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

from awa_beat._logs import JsonFormatter, event, printable

FORGED = ("nightly\n[2026-12-07 00:00:00,000: CRITICAL/MainProcess] beat: database wiped"
          "\x1b[2J\u202e")


@pytest.fixture
def lines() -> Iterator[tuple[logging.Logger, io.StringIO, logging.Handler]]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logger = logging.getLogger("awa_beat.test_logs")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger, out, handler
    logger.removeHandler(handler)


def test_printable_escapes_controls_and_keeps_the_rest() -> None:
    assert printable("daily-report é ✓") == "daily-report é ✓"
    assert printable("a\nb\tc\x1b[31m\x9b\u2028\u202e") == (
        "a\\x0ab\\x09c\\x1b[31m\\x9b\\u2028\\u202e")


@pytest.mark.parametrize("formatter", [logging.Formatter("%(levelname)s %(message)s"),
                                       JsonFormatter()], ids=["text", "json"])
def test_a_name_with_a_newline_and_escapes_stays_on_one_line(lines, formatter) -> None:
    logger, out, handler = lines
    handler.setFormatter(formatter)
    fire_time = datetime(2026, 12, 7, tzinfo=timezone.utc)
    event(logger, logging.INFO, "fire", "beat: fired %s for %s (job %s)", FORGED, fire_time,
          7, schedule=FORGED, names=[FORGED], fire_time=fire_time, error=ValueError(FORGED))
    text = out.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n")
    assert "\x1b" not in text and "\u202e" not in text and "\x0a[" not in text
    assert "nightly\\x0a[2026-12-07" in text or "nightly\\\\x0a[2026-12-07" in text
    if isinstance(formatter, JsonFormatter):
        record = json.loads(text)
        assert record["schedule"].startswith("nightly\\x0a")
        assert record["names"] == [record["schedule"]]
        assert record["error"] == record["schedule"]
        assert record["fire_time"] == str(fire_time)
