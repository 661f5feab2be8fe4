"""``source scripts/setup.sh`` leaves the caller's shell options as it found them.

It used to run ``set -euo pipefail`` in the caller's shell: an interactive shell that sourced it
kept ``errexit`` and ``nounset``, so the next failing command closed the terminal. The tests run
the real script in a copy of the project layout whose ``.venv`` is a stub with a matching
set-up stamp (and ``java`` a stub on PATH), so nothing is installed or downloaded.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")


def _project(tmp_path: Path, *, stamp_ok: bool = True) -> Path:
    """A project copy with the real setup.sh, a stub .venv and (optionally) a matching stamp."""
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", root / "scripts" / "setup.sh")
    (root / "requirements.lock").write_text("pinned==1\n")
    (root / "pyproject.toml").write_text("[project]\nname = 'stub'\n")
    venv = root / ".venv" / "bin"
    venv.mkdir(parents=True)
    # The stub python fails, so a set-up that tried to install would fail loudly.
    (venv / "python").write_text("#!/bin/sh\necho 'stub python: no install' >&2\nexit 7\n")
    (venv / "python").chmod(0o755)
    (venv / "activate").write_text('VIRTUAL_ENV="$(pwd)/.venv"; export VIRTUAL_ENV\n')
    stamp = hashlib.sha256(b"pinned==1\n[project]\nname = 'stub'\n").hexdigest()[:16]
    (root / ".venv" / ".setup-stamp").write_text(stamp + "\n" if stamp_ok else "stale\n")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "java").write_text("#!/bin/sh\nexit 0\n")  # never reach apt-get
    (tools / "java").chmod(0o755)
    return root


def _bash(script: str, root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{root.parent / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("VIRTUAL_ENV", None)
    assert BASH is not None
    return subprocess.run([BASH, "--norc", "--noprofile", "-c", script], cwd=root, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


# Prints the options before and after sourcing; a non-zero source status is printed, not fatal.
PROBE = """{prelude}
before_flags=$-; before_opts=$(set +o)
source scripts/setup.sh; status=$?
after_flags=$-; after_opts=$(set +o)
echo "status=$status venv=${{VIRTUAL_ENV:-none}}"
[ "$before_flags" = "$after_flags" ] && echo "flags same: $after_flags" \
  || echo "flags changed: $before_flags -> $after_flags"
[ "$before_opts" = "$after_opts" ] && echo "options same" || diff <(echo "$before_opts") \
  <(echo "$after_opts")
echo still running
"""


@pytest.mark.parametrize("prelude", ["", "set -euo pipefail"],
                         ids=["interactive-like caller", "strict caller (repro.sh)"])
def test_sourcing_keeps_the_callers_shell_options(tmp_path: Path, prelude: str) -> None:
    root = _project(tmp_path)
    done = _bash(PROBE.format(prelude=prelude), root)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"status=0 venv={root / '.venv'}" in out  # it did its work (activated the venv)
    assert "flags same:" in out and "options same" in out, out
    if prelude:  # repro.sh and test.sh keep their own strictness
        assert "e" in out.split("flags same: ")[1].split()[0]
    else:
        assert "e" not in out.split("flags same: ")[1].split()[0]
    assert "stub python" not in done.stderr  # nothing was (re)installed


def test_a_failed_setup_returns_a_status_and_keeps_the_shell(tmp_path: Path) -> None:
    root = _project(tmp_path, stamp_ok=False)  # would install: the stub python fails
    done = _bash(PROBE.format(prelude=""), root)
    assert "stub python: no install" in done.stderr
    assert "[setup] failed (exit 7)" in done.stderr
    assert "status=7 venv=none" in done.stdout  # not activated, and the shell carried on
    assert "options same" in done.stdout and "still running" in done.stdout


def test_run_as_a_script_a_failure_is_its_exit_status(tmp_path: Path) -> None:
    root = _project(tmp_path, stamp_ok=False)
    done = _bash("bash scripts/setup.sh; echo exit=$?", root)
    assert "exit=7" in done.stdout


def _pip_like_uv() -> Any:
    import importlib.util

    path = ROOT / "scripts" / "pip_like_uv.py"
    spec = importlib.util.spec_from_file_location("pip_like_uv", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_uv_gets_the_package_sources_pip_is_configured_with(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """uv ignores pip's configuration: setup.sh hands it over (issue 42's uv set-up)."""
    module = _pip_like_uv()
    listing = ("global.extra-index-url='file:///opt/a/simple file:///opt/b/simple'\n"
               "global.find-links='/opt/global-wheels'\n"
               "global.constraint='/etc/pip/constraints.txt'\n"
               "install.index-url='https://mirror.example/simple'\n"
               ":env:.find-links='/opt/wheels'\n"
               ":env:.default-timeout='180'\n"
               "global.cert='/etc/ssl/ca.crt'\n"
               "freeze.find-links='/not/for/install'\n")
    monkeypatch.setattr(module.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 0, stdout=listing, stderr=""))
    settings = module.pip_settings("python")
    assert settings["find-links"] == "/opt/wheels"  # PIP_* over the files, as pip does
    command = module.uv_command("uv", settings, ["-e", "."])
    assert command[:3] == ["uv", "pip", "install"] and command[-2:] == ["-e", "."]
    pairs = list(zip(command, command[1:], strict=False))
    assert ("--index-url", "https://mirror.example/simple") in pairs
    assert ("--extra-index-url", "file:///opt/a/simple") in pairs
    assert ("--extra-index-url", "file:///opt/b/simple") in pairs
    assert ("--find-links", "/opt/wheels") in pairs and "/opt/global-wheels" not in command
    assert ("--constraint", "/etc/pip/constraints.txt") in pairs
    # pip's "best version from every source", which a local CPU torch build relies on.
    assert ("--index-strategy", "unsafe-best-match") in pairs
    assert "/not/for/install" not in command


def test_uv_with_no_pip_configuration_uses_its_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _pip_like_uv()
    monkeypatch.setattr(module.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 0, stdout="", stderr=""))
    assert module.uv_command("uv", module.pip_settings("python"), ["x"]) == [
        "uv", "pip", "install", "--index-strategy", "unsafe-best-match", "x"]
