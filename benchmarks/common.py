"""What the benchmark scripts share: where the repository is, throw-away databases,
timing and percentiles, and the results file that each run writes.

A script in a group folder (``benchmarks/engine/bench_pass.py``) starts with::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import common

Importing this module puts the repository root on ``sys.path`` as well, so a script runs
from a checkout with one command (``python benchmarks/engine/bench_pass.py``) whether or
not the project is installed.

A script ends with ``common.run(main)``. It prints as before, and it also writes what it
printed to ``benchmarks/results/<script>.md`` under a header that names the machine, the
Python, the commit, the date and the command. ``AWA_BENCH_RESULTS`` names another folder
(the tests that run a script point it at a temporary one).
"""

from __future__ import annotations

import io
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
RESULTS = BENCHMARKS / "results"
if str(ROOT) not in sys.path:
    sys.path.insert(1, str(ROOT))

if TYPE_CHECKING:
    from awa_beat._testing import TempDatabases

#: The arguments that start a script's own child process. A child prints to its parent,
#: which records the run, so the child writes no results file of its own.
CHILD_FLAGS = ("--child", "--one")


# -- databases --------------------------------------------------------------------------


@contextmanager
def databases(prefix: str = "awabeat_bench") -> Iterator[TempDatabases]:
    """Yield throw-away databases on the server the tests use, and drop them on exit.

    The server is found as the tests find it: ``AWA_BEAT_TEST_DATABASE_URL``, else
    127.0.0.1:5432, else an embedded PostgreSQL. ``dbs.fresh("standalone")`` (or
    ``"awa"``) creates one database and returns its URL.
    """
    from awa_beat._testing import TempDatabases, server_url

    with server_url() as server:
        dbs = TempDatabases(server, prefix=prefix)
        try:
            yield dbs
        finally:
            dbs.close()


@contextmanager
def log_folder(keep: str | None, prefix: str = "awabeat-") -> Iterator[Path]:
    """Yield the folder where the beat processes of a run write their logs. With ``keep``
    (a script's ``--logs DIR``), the folder is created if need be and kept; otherwise it
    is a temporary folder that is removed on exit."""
    if keep:
        folder = Path(keep)
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield Path(tmp)


# -- timing -----------------------------------------------------------------------------


def measure(repeat: int, func: Callable[[int], object]) -> list[float]:
    """Call ``func(attempt)`` ``repeat`` times and return the seconds that each call took."""
    times = []
    for attempt in range(repeat):
        start = time.perf_counter()
        func(attempt)
        times.append(time.perf_counter() - start)
    return times


def pct(values: Sequence[float], q: float) -> float:
    """Return the q-th percentile (nearest rank) of ``values``."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(1, math.ceil(len(ordered) * q / 100)) - 1]


def summary(values: Sequence[float]) -> dict[str, float]:
    """Return the count, p50, p90, p99, maximum and mean of ``values``."""
    return {"n": len(values), "p50": pct(values, 50), "p90": pct(values, 90),
            "p99": pct(values, 99), "max": max(values, default=float("nan")),
            "mean": statistics.fmean(values) if values else float("nan")}


# -- results ----------------------------------------------------------------------------


def machine() -> dict[str, str]:
    """Describe where a run happened: the machine, the Python, the commit and the date."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown (not a git checkout)"
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
        "machine": f"{platform.node()}: {os.cpu_count()} CPUs, {cpu}, {platform.platform()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
    }


class _Tee(io.TextIOBase):
    """Write to the terminal and keep a copy of everything written."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.copy = io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


def results_path(name: str) -> Path:
    """Return the file that a run of the script ``name`` writes its results to."""
    folder = Path(os.environ.get("AWA_BENCH_RESULTS") or RESULTS)
    return folder / f"{name}.md"


def write_results(name: str, output: str, status: object) -> Path:
    """Write one run's printed figures to :func:`results_path`, under a header that says
    where and how the run happened."""
    script = Path(sys.argv[0]).resolve()
    try:
        shown = script.relative_to(ROOT)
    except ValueError:
        shown = script
    header = {"command": " ".join(["python", str(shown), *sys.argv[1:]]), **machine(),
              "exit status": str(status)}
    lines = [f"# {name}", ""]
    lines += [f"- {key}: `{value}`" if key == "command" else f"- {key}: {value}"
              for key, value in header.items()]
    lines += ["", "```text", output.rstrip("\n"), "```", ""]
    path = results_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def layouts_against_target(description: str, target_n: int, target_seconds: float,
                           heading: str, target: str,
                           run_layout: Callable[[str, int, int], float]) -> int:
    """The ``main`` of a script that times one call per table layout against a target
    of ``target_seconds`` for ``target_n`` items (scaled to ``--n``): options ``--n``,
    ``--repeat`` and ``--layouts``; ``run_layout(url, n, repeat)`` returns the median to
    hold against the target. ``heading`` and ``target`` are formatted with ``n``."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--n", type=int, default=target_n)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--layouts", default="standalone,awa")
    args = parser.parse_args()
    n = args.n
    limit = target_seconds * n / target_n
    met = True
    with databases("awabeat_bench") as dbs:
        for layout in args.layouts.split(","):
            print(f"-- {layout}: {heading.format(n=f'{n:,}')}")
            seconds = run_layout(dbs.fresh(layout), n, args.repeat)
            ok = seconds <= limit
            met = met and ok
            print(f"  target: {target.format(n=f'{n:,}')} in at most {limit:.1f} s: "
                  f"{'met' if ok else 'NOT met'} ({seconds:.3f} s)")
    return 0 if met else 1


def run(main: Callable[[], Any]) -> None:
    """Run a script's ``main``, record what it printed, and exit with its status.

    The results file is written even when ``main`` fails, with the failure as its exit
    status, because a failed target is a result too.
    """
    if len(sys.argv) > 1 and sys.argv[1] in CHILD_FLAGS:
        sys.exit(main())
    name = Path(main.__code__.co_filename).stem
    tee = _Tee(sys.stdout)
    sys.stdout = tee
    status: object = 1
    try:
        status = main()
        status = 0 if status is None else status
    except SystemExit as exc:
        status = 0 if exc.code is None else exc.code
        raise
    finally:
        sys.stdout = tee.out
        path = write_results(name, tee.copy.getvalue(), status)
        print(f"results: {path}", file=sys.stderr)
    sys.exit(status)
