"""What a published package promises: one version everywhere, and a README whose links
work on a package index page (where relative links break: the README mentions the
sdist's files as plain text instead, and those files must exist)."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

import awa_beat

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")

# Markdown links and images, autolinks and HTML attributes: every way a README can link.
LINK_PATTERNS = (
    re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)"),
    re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE),
    re.compile(r"<(https?://[^>]+)>"),
    re.compile(r"""(?:href|src)\s*=\s*["']([^"']+)"""),
)
# Files of the sdist the README names in code spans: `docs/web.md`, `LICENSE`, ...
MENTION = re.compile(r"`((?:docs|examples|benchmarks|awa_beat|tests)/[^`\s]+|LICENSE|"
                     r"CHANGELOG\.md|CONTRIBUTING\.md|mkdocs\.yml)`")


def readme_links() -> list[str]:
    return [m.group(1) for pattern in LINK_PATTERNS for m in pattern.finditer(README)]


def test_awa_beat_version_agrees_with_the_package_metadata() -> None:
    assert awa_beat.__version__ == importlib.metadata.version("awa-beat")


def test_the_version_option_prints_the_package_version() -> None:
    done = subprocess.run([sys.executable, "-m", "awa_beat", "--version"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"awa-beat, version {awa_beat.__version__}"


def test_the_awa_beat_command_is_the_cli_entry_point() -> None:
    scripts = importlib.metadata.entry_points(group="console_scripts")
    assert [ep.value for ep in scripts if ep.name == "awa-beat"] == ["awa_beat._cli:main"]


def test_every_readme_link_is_absolute() -> None:
    links = readme_links()
    assert links, "the README has links (PyPI pages among them)"
    relative = [link for link in links if not link.startswith("https://")]
    assert relative == [], ("relative links and in-page anchors break on a package index; "
                            "name the file in a code span instead")


def test_no_placeholder_hosts_in_the_readme_or_the_metadata() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for text in (README, pyproject):
        assert not re.search(r"example\.(invalid|com|org)|localhost/awa-beat", text)


def test_every_file_the_readme_names_is_in_the_source_tree() -> None:
    named = sorted({m.group(1) for m in MENTION.finditer(README)})
    assert "docs/web.md" in named and "LICENSE" in named
    missing = [name for name in named if not (ROOT / name.split("#")[0]).exists()]
    assert missing == []


def test_the_api_reference_documents_every_public_name() -> None:
    from awa_beat import errors

    page = (ROOT / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    directives = set(re.findall(r"^::: (\S+)", page, re.MULTILINE))
    documented = {path.rsplit(".", 1)[-1] for path in directives}
    if "awa_beat.errors" in directives:
        documented |= {name for name in awa_beat.__all__ if hasattr(errors, name)}
    assert sorted(set(awa_beat.__all__) - documented - {"__version__"}) == []


def test_the_readme_renders_as_a_package_index_renders_it() -> None:
    markdown = pytest.importorskip("readme_renderer.markdown")
    pytest.importorskip("comrak", reason="readme-renderer[md]: the renderer PyPI uses")
    page = markdown.render(README)
    assert page is not None and "<h2" in page
    hrefs = re.findall(r'(?:href|src)="([^"]+)"', page)
    # The renderer adds anchors to its own headings; every other link leaves the page.
    assert [h for h in hrefs if not h.startswith(("https://", "#user-content-"))] == []
    assert "8&lt;" not in page and "8<--" not in page  # the site's section markers hidden
