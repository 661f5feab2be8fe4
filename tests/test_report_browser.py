"""The HTML report in a real headless browser (Chromium from Debian's packages; skipped when
it is absent): it renders, leads with the headline, shows the gallery's pictures, and carries
no raw Markdown."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from capjudge.aggregate import AggregateConfig, run_aggregate
from capjudge.judge import JudgeConfig, run_judge
from capjudge.report import ReportConfig, run_report
from capjudge.validate import ValidateConfig, run_validate

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")
def test_report_renders_in_a_headless_browser(ingested: Path, tmp_path: Path) -> None:
    assert CHROMIUM is not None
    dirs = []
    for name, method in (("gv", "gveval"), ("he", "harmoniceval")):
        config = JudgeConfig(method=method, backend="fake/hash", cache_dir=str(tmp_path / "c"),
                             modes=["ref-only"] if method == "gveval" else None)
        run_judge(ingested / "items.parquet", tmp_path / name, config)
        dirs.append(tmp_path / name)
    run_aggregate(dirs, tmp_path / "agg", AggregateConfig())
    run_validate(ingested / "items.parquet", dirs, tmp_path / "out", ValidateConfig())
    run_report(ingested, dirs, tmp_path / "agg", tmp_path / "out",
               ReportConfig(bootstrap=20, registry=None))
    page = tmp_path / "out" / "report.html"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", page.as_uri()], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    text = re.sub(r"<[^>]+>", " ", dom)
    assert "Headline" in text and "Agreement with humans" in text
    assert text.index("Headline") < text.index("What ran")  # the answer comes first
    assert "disagree most" in text and dom.count('class="thumb"') >= 3
    assert "**" not in text and "|---" not in text and "![" not in text
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, *flags, f"--screenshot={shot}", "--window-size=1280,2000",
                    page.as_uri()], capture_output=True, timeout=120, check=True)
    assert shot.is_file() and shot.stat().st_size > 20_000  # a rendered page, not a blank one


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")
def test_history_section_and_rows_only_for_what_ran(ingested: Path, tmp_path: Path) -> None:
    """Two registered runs: the History section renders in Chromium with both points and the
    paired difference; a judge that could not run has its one line and no table rows."""
    assert CHROMIUM is not None
    registry = tmp_path / "runs"
    dirs = []
    for name, method in (("gv", "gveval"), ("c3", "cap3d")):  # cap3d: no views, all skipped
        config = JudgeConfig(method=method, backend="fake/hash", cache_dir=str(tmp_path / "c"),
                             modes=["ref-only"] if method == "gveval" else None)
        run_judge(ingested / "items.parquet", tmp_path / name, config)
        dirs.append(tmp_path / name)
    run_aggregate(dirs, tmp_path / "agg", AggregateConfig())
    for _ in range(2):
        ctx = run_report(ingested, dirs, tmp_path / "agg", tmp_path / "out",
                         ReportConfig(bootstrap=20, registry=str(registry)))
    points = ctx["history"]["gv/ref-only"]
    assert len(points) == 2 and points[1]["paired"]["difference"] == pytest.approx(0.0)
    page = tmp_path / "out" / "report.html"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", page.as_uri()], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom))
    assert 'id="history"' in dom and 'id="toc"' in dom and 'href="#history"' in dom
    assert "gv/ref-only : 2 runs; latest tau_b" in text and "delta vs previous 0.0" in text
    assert dom.count('class="history"') == 1 and "-history.png" not in dom  # one plot, inlined
    assert dom.count("data:image/png;base64,") >= 2
    # The skipped judge: one line under the headline, no rows in the tables below it.
    assert "c3 (default)" in text
    systems = dom[dom.index('id="systems"'):dom.index('id="lineage"')]
    assert "gv/ref-only" in systems and "c3/default" not in systems
    assert "<details>" in systems  # a long table, collapsed behind its one-line summary
