"""The ``awa-beat`` command line (also ``celery -A proj awa ...``).

Each command group has a module of its own. A command parses its options, calls the
operations layer (:mod:`awa_beat._ops.operations`) and prints the result. A user's mistake
(a bad URL, an unreachable database, an unknown name) ends in a one-line error and a
non-zero exit code, never in a traceback.
"""

from __future__ import annotations

import click

from .. import __version__
from .backfill import backfill
from .cluster import status
from .doctor import doctor
from .explain import explain_
from .history import history
from .imports import import_
from .preview import preview_
from .runtime import add, edit
from .schedules import export, list_, pause, remove, resume, show, trigger
from .schema import migrate
from .web import web

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="awa-beat")
def main() -> None:
    """awa-beat: a PostgreSQL-backed, highly available Celery beat."""


for _command in (migrate, list_, add, edit, pause, resume, trigger, backfill, remove, show,
                 preview_, explain_, history, export, status, doctor, import_, web):
    main.add_command(_command)
