"""The house style, enforced: ruff (with Google-style docstrings on the library's public
surface) and mypy with ``disallow_untyped_defs`` on the library (settings in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import ROOT


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.skipif(shutil.which("ruff") is None and not (ROOT / ".venv").is_dir(),
                    reason="ruff is not installed")
def test_ruff_passes() -> None:
    result = _run("ruff", "check", "src", "flows", "tasks", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.heavy(seconds=22)
@pytest.mark.slow
def test_mypy_passes_on_the_library_flows_and_tasks() -> None:
    # flows/ and tasks/ too: what crosses the Prefect boundary is typed (issue 41).
    result = _run("mypy", "src", "flows", "tasks")
    assert result.returncode == 0, result.stdout + result.stderr
