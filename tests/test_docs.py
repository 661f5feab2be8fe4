"""The docs site builds strictly, the README stays short, and no relative link is broken.

``mkdocs build --strict`` fails on a broken link or anchor inside ``docs/``, on a page missing
from the nav, and on any mkdocstrings/griffe warning; the README is not part of the site, so its
links are checked here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _quick_start(text: str) -> str:
    match = re.search(r"^## Quick start\n(.*?)(?=^## )", text, re.MULTILINE | re.DOTALL)
    assert match, "README has no '## Quick start' section followed by another section"
    return match.group(1)


def _outside_fences(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def _heading_anchors(markdown: str) -> set[str]:
    """The anchors mkdocs' toc extension gives a page's headings (slugs, lower case)."""
    anchors = set()
    for line in _outside_fences(markdown).splitlines():
        match = re.match(r"^#{1,6} (.+?)\s*$", line)
        if match:
            slug = re.sub(r"[^\w\s-]", "", match.group(1).strip().lower())
            anchors.add(re.sub(r"[-\s]+", "-", slug).strip("-"))
    return anchors


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines (at most 150)"


def test_readme_quick_start_is_two_commands() -> None:
    section = _quick_start(README.read_text(encoding="utf-8"))
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1, f"Quick start has {len(blocks)} fenced blocks (exactly one)"
    language, body = blocks[0]
    assert language == "bash"
    commands = [line for line in body.splitlines() if line.strip()]
    assert commands == ["bash scripts/repro.sh", "bash scripts/test.sh"]


def test_readme_relative_links_resolve() -> None:
    text = _outside_fences(README.read_text(encoding="utf-8"))
    links = [target for target in LINK.findall(text)
             if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]
    assert links, "README links to no docs page"
    for target in links:
        path, _, anchor = target.partition("#")
        resolved = (ROOT / path) if path else README
        assert resolved.exists(), f"README links to {target}, which does not exist"
        if anchor and resolved.suffix == ".md":
            assert anchor in _heading_anchors(resolved.read_text(encoding="utf-8")), (
                f"README links to {target}: no such heading")


def test_readme_links_every_hand_written_guide() -> None:
    # The README is the map: each guide and reference page must be reachable from it.
    text = README.read_text(encoding="utf-8")
    for folder in ("getting-started", "guides", "extending", "results"):
        for page in sorted((ROOT / "docs" / folder).glob("*.md")):
            if page.name == "index.md":
                continue
            relative = page.relative_to(ROOT).as_posix()
            assert f"({relative})" in text, f"README does not link {relative}"


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[dev]')")
    pytest.importorskip("material", reason="mkdocs-material is not installed")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed")
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site),
         "--config-file", str(ROOT / "mkdocs.yml")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert (site / "index.html").is_file()
    # The generated parts were filled (a marker left in a page would mean a generator did not run).
    for page in site.rglob("*.html"):
        assert "<!-- gen:" not in page.read_text(encoding="utf-8"), page
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "capjudge meta-eval" in cli and "--dataset" in cli
    gveval = (site / "reference" / "methods" / "gveval" / "index.html").read_text(
        encoding="utf-8")
    assert "gveval/video/ref-free" in gveval and "reconstructed" in gveval
    results = (site / "results" / "index.html").read_text(encoding="utf-8")
    assert "likelihood-embedded/npmi" in results
    shutil.rmtree(site)
