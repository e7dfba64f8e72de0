"""MkDocs hooks (mkdocs.yml's ``hooks:``): the reference pages generated from the code at
build time, so that they cannot fall behind it.

* ``reference/settings.md``: every field of :class:`awa_beat._config.Settings`, its
  environment variable, default, allowed values (read from ``Settings.from_app``'s
  checks) and its docstring;
* ``reference/cli.md``: every command of ``awa-beat`` (click), with its options;
* ``reference/metrics.md``: every series :mod:`awa_beat._beat.metrics` defines.

The source files are read with :mod:`ast` where the values are literals in the code (the
attribute docstrings, the ranges, the metric families), so that the pages need no
database and no running beat.
"""

from __future__ import annotations

import ast
import dataclasses
import html as html_module
import inspect
import itertools
import re
from pathlib import Path
from typing import Any

import click
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parent
PACKAGE = ROOT / "awa_beat"
#: `docs/<page>.md` written in a code span, not already a link.
DOC_MENTION = re.compile(r'(?<!">)<code>docs/([\w./-]+\.md)</code>')


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for path, render in (("reference/settings.md", settings_page),
                         ("reference/cli.md", cli_page),
                         ("reference/metrics.md", metrics_page)):
        files.append(File.generated(config, path, content=render()))
    return files


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """The README's sections, included in pages, name the documentation's files as the
    sdist has them (`docs/web.md`: a package index cannot follow a relative link); on the
    site each such name becomes a link to its page. (The inclusion happens while the
    Markdown is converted, so the names are linked in the HTML.)"""

    def link(match: re.Match[str]) -> str:
        target = files.get_file_from_path(html_module.unescape(match.group(1)))
        if target is None:
            return match.group(0)
        return f'<a href="{target.url_relative_to(page.file)}">{match.group(0)}</a>'

    return DOC_MENTION.sub(link, html)


# -- helpers ------------------------------------------------------------------------------

def cell(text: str) -> str:
    """Text made safe for one cell of a Markdown table."""
    return " ".join(text.replace("|", "\\|").split())


def rst_to_md(text: str) -> str:
    """The docstrings' reStructuredText literals (``x``) as Markdown code spans."""
    return text.replace("``", "`")


def attribute_docstrings(tree: ast.Module, class_name: str) -> dict[str, str]:
    """The docstrings written under the fields of ``class_name``."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            body = node.body
            for field, after in itertools.pairwise(body):
                if (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
                        and isinstance(after, ast.Expr)
                        and isinstance(after.value, ast.Constant)
                        and isinstance(after.value.value, str)):
                    found[field.target.id] = inspect.cleandoc(after.value.value)
    return found


# -- settings -----------------------------------------------------------------------------

def number_text(value: float | None) -> str | None:
    return None if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def setting_checks(tree: ast.Module, namespace: dict[str, Any]) -> dict[str, str]:
    """What ``Settings.from_app`` allows for each setting, read from its calls of
    ``_number(..., minimum=, maximum=)``, ``_choice(..., choices)`` and ``_flag``."""
    allowed: dict[str, str] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)):
            continue
        name, kind = node.args[1].value, node.func.id
        if kind == "_number":
            bounds = {k.arg: eval(compile(ast.Expression(k.value), "<config>", "eval"),
                                  namespace) for k in node.keywords}
            number = ast.unparse(node.args[2])
            low, high = (number_text(bounds.get(k)) for k in ("minimum", "maximum"))
            allowed[name] = f"{number} from {low}" + ("" if high is None else f" to {high}")
        elif kind == "_choice":
            choices = ast.literal_eval(node.args[2])
            allowed[name] = " or ".join(f"`{c}`" for c in choices)
        elif kind == "_flag":
            allowed[name] = "a flag: true/false, 1/0, yes/no, on/off"
    return allowed


def settings_page() -> str:
    from awa_beat import _config as config

    source = (PACKAGE / "_config.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    docs = attribute_docstrings(tree, "Settings")
    allowed = setting_checks(tree, vars(config))
    rows = []
    for field in dataclasses.fields(config.Settings):
        default = field.default
        shown = "none" if default is None else f"`{default!r}`"
        rows.append(f"| `awa_beat_{field.name}` | `AWA_BEAT_{field.name.upper()}` | {shown} "
                    f"| {cell(allowed.get(field.name, 'text'))} "
                    f"| {cell(rst_to_md(docs.get(field.name, '')))} |")
    doc = rst_to_md(inspect.cleandoc(config.Settings.__doc__ or ""))
    return "\n".join([
        "# Settings", "",
        "Generated from `awa_beat._config.Settings` when this site was built.", "",
        doc, "",
        "A value outside what is allowed, or a number that is not finite, stops beat at "
        "start-up with one line naming the setting. Per-entry options "
        "(`options[\"awa_beat\"]`) are in [Writing schedules](../guides/schedules.md).", "",
        "| Celery setting | environment | default | allowed | meaning |",
        "|---|---|---|---|---|",
        *rows, ""])


# -- the command line ---------------------------------------------------------------------

def param_row(param: click.Parameter, ctx: click.Context) -> str:
    if isinstance(param, click.Option):
        names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
        help_text = param.help or ""
        default = param.get_default(ctx, call=False)
        # click 8.2+ marks "no default" with a sentinel object of its own.
        unset = type(default).__name__ == "Sentinel"
        if unset or param.is_flag or default in (None, (), False) or callable(default):
            shown = ""
        else:
            shown = f"`{default}`"
        if param.envvar:
            help_text += f" (environment: `{param.envvar}`)"
    else:
        names = f"`{param.human_readable_name}`"
        help_text, shown = "argument" + ("" if param.required else ", optional"), ""
    kind = param.type.get_metavar(param, ctx) if isinstance(param.type, click.Choice) \
        else param.type.name
    return f"| {names} | {cell(kind or '')} | {cell(shown)} | {cell(help_text)} |"


def help_markdown(text: str) -> list[str]:
    """A command's help as Markdown: click's ``\\b`` paragraphs (kept as written, the
    examples) become code blocks."""
    lines: list[str] = []
    for paragraph in inspect.cleandoc(text).split("\n\n"):
        if paragraph.startswith("\b\n"):
            lines += ["```", paragraph[2:], "```", ""]
        else:
            lines += [paragraph, ""]
    return lines


def command_section(name: str, command: click.Command, parent: click.Context) -> list[str]:
    ctx = click.Context(command, info_name=name, parent=parent)
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines = [f"## `{name}`", "", "```", f"awa-beat {name} {usage}", "```", "",
             *help_markdown(command.help or ""), ""]
    params = [p for p in command.params if p.name != "help"]
    if params:
        lines += ["| option | type | default | meaning |", "|---|---|---|---|",
                  *(param_row(p, ctx) for p in params), ""]
    return lines


def cli_page() -> str:
    from awa_beat._cli import main

    root = click.Context(main, info_name="awa-beat")
    lines = ["# The `awa-beat` command", "",
             "Generated from the command's own definitions (click) when this site was "
             "built; `awa-beat COMMAND --help` prints the same. Every command also runs "
             "as `celery -A proj awa COMMAND`, where the app's configuration supplies the "
             "database and the settings. `awa-beat --version` prints the version.", "",
             "Mistakes (an unknown name, a bad URL, an unreachable database) end in a "
             "one-line `error: ...` and exit code 1; a command line that cannot be parsed "
             "prints its usage and exits 2.", ""]
    for name in sorted(main.list_commands(root)):
        command = main.get_command(root, name)
        if command is not None and not command.hidden:
            lines += command_section(name, command, root)
    return "\n".join(lines)


# -- metrics ------------------------------------------------------------------------------

def metric_families(tree: ast.Module) -> list[tuple[str, str, str, list[str]]]:
    """(name, type, help, labels) of every metric family :mod:`awa_beat._beat.metrics` builds:
    the calls of ``*MetricFamily("name", "help", labels=[...])`` and the loops over
    ``("name", "help", value)`` tuples that feed one."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id.endswith("MetricFamily") and len(node.args) >= 2
                and all(isinstance(a, ast.Constant) for a in node.args[:2])):
            labels = next((ast.literal_eval(k.value) for k in node.keywords
                           if k.arg == "labels"), [])
            kind = node.func.id.removesuffix("MetricFamily").lower()
            found.append((node.args[0].value, kind, node.args[1].value, labels))
        elif isinstance(node, ast.For) and isinstance(node.iter, ast.Tuple):
            family = next((n.func.id for n in ast.walk(node) if isinstance(n, ast.Call)
                           and isinstance(n.func, ast.Name)
                           and n.func.id.endswith("MetricFamily")), None)
            for item in node.iter.elts:
                if family and isinstance(item, ast.Tuple) and all(
                        isinstance(e, ast.Constant) for e in item.elts[:2]):
                    kind = family.removesuffix("MetricFamily").lower()
                    found.append((item.elts[0].value, kind, item.elts[1].value, []))
    return sorted(found)


def metrics_page() -> str:
    tree = ast.parse((PACKAGE / "_beat" / "metrics.py").read_text(encoding="utf-8"))
    rows = []
    for name, kind, help_text, labels in metric_families(tree):
        exposed = f"{name}_total" if kind == "counter" else name
        shown_kind = "histogram (`_bucket`, `_sum`, `_count`)" if kind == "histogram" else kind
        shown_labels = ", ".join(f"`{label}`" for label in labels)
        rows.append(f"| `{exposed}` | {shown_kind} | {shown_labels} | {cell(help_text)} |")
    return "\n".join([
        "# Metrics", "",
        "Every series a beat's `/metrics` endpoint (setting `awa_beat_http_port`) can "
        "export, generated from `awa_beat/_beat/metrics.py` when this site was built. Counters "
        "are exposed with the `_total` suffix. When each appears, what it means in "
        "operation and the alerts built on them: [Observability](../observability.md).", "",
        "| series | type | labels | meaning |", "|---|---|---|---|", *rows, ""])
