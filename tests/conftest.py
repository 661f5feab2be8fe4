"""Shared fixtures. The default run is hermetic: no network, Prefect state in a temp dir."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# ../shared next to the checkout; a worktree elsewhere points at it with CAPJUDGE_SHARED_DIR.
SHARED = Path(os.environ.get("CAPJUDGE_SHARED_DIR") or ROOT.parent / "shared")

# Before anything imports Prefect: private home (cached results must not leak across runs),
# no telemetry, a start-up timeout that survives a loaded 2-core machine.
_PREFECT_HOME = tempfile.mkdtemp(prefix="capjudge-prefect-")
os.environ["PREFECT_HOME"] = _PREFECT_HOME
# Removed when the session (each parallel worker's) ends: one was left in /tmp per run.
atexit.register(shutil.rmtree, _PREFECT_HOME, ignore_errors=True)
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
# flows/ and tasks/ are top-level packages of the project, not of the installed library.
sys.path.insert(0, str(ROOT))


@pytest.fixture
def prefect_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A Prefect server (the test harness's) that this test's subprocesses use too.

    Every stage of a ``dvc repro`` is a process whose flow would otherwise start a temporary
    Prefect server of its own (8-15 s each here, see STACK_NOTES). Tests of the pipeline's
    logic (DVC, the watch) point their stages at one running server instead; the user's own
    first run, with a temporary server per stage, is tested as it is in test_first_run.
    """
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        url = str(PREFECT_API_URL.value())
        monkeypatch.setenv("PREFECT_API_URL", url)
        yield url


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample suite, generated once per test session."""
    from capjudge.sample import generate_sample

    out = tmp_path_factory.mktemp("sample")
    generate_sample(out, seed=0)
    return out


@pytest.fixture(scope="session")
def ingested(sample_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample suite after ingest (items.parquet, tiles, DuckDB)."""
    from capjudge.ingest import ingest

    out = tmp_path_factory.mktemp("ingest")
    ingest(sample_dir / "manifest.jsonl", sample_dir, out)
    return out


@pytest.fixture
def shared_dir() -> Path:
    """../shared, or skip: it exists for developers and CI, never on a user's machine."""
    if not SHARED.is_dir():
        pytest.skip("../shared is not present")
    return SHARED


PLUGINS = ROOT / "tests" / "plugins"


def install_plugin_path(path: Path) -> None:
    """Put a folder holding ``*.dist-info`` distributions on the path, as ``pip install`` would."""
    from capjudge.registry import refresh_plugins

    sys.path.insert(0, str(path))
    refresh_plugins()


def uninstall_plugin_path(path: Path, *modules: str) -> None:
    """Undo :func:`install_plugin_path` and forget the plugin's imported modules."""
    from capjudge.registry import refresh_plugins

    sys.path.remove(str(path))
    for name in [m for m in sys.modules if m.split(".")[0] in modules]:
        del sys.modules[name]
    refresh_plugins()


@pytest.fixture(scope="module")
def demo_plugin() -> Iterator[Path]:
    """tests/plugins/capjudge_demo_plugin, "installed" (its dist-info found on sys.path)."""
    install_plugin_path(PLUGINS)
    yield PLUGINS
    uninstall_plugin_path(PLUGINS, "capjudge_demo_plugin")


@pytest.fixture(autouse=True)
def _logging_to_open_streams() -> Iterator[None]:
    """Every log handler writes to an open stream when a test starts.

    A flow run in a test sets Prefect's console handler up on the stream pytest captured for
    that test, closed when the test ends; a later test in the same process that logs a
    warning then gets a "--- Logging error ---" traceback on stderr instead of the line
    (which tests of the CLI's output read). The handlers are pointed back at the real stderr.
    """
    import logging

    loggers = [logging.getLogger(), *(v for v in logging.Logger.manager.loggerDict.values()
                                      if isinstance(v, logging.Logger))]
    for logger in loggers:
        for handler in logger.handlers:
            console = getattr(handler, "console", None)  # rich (Prefect's console handler)
            if console is not None and getattr(console.file, "closed", False):
                console.file = sys.__stderr__
            stream = getattr(handler, "stream", None)
            if isinstance(handler, logging.StreamHandler) and getattr(stream, "closed", False):
                handler.stream = sys.__stderr__  # (setStream would flush the closed one)
    yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The ``heavy`` tests first, then the ``slow`` ones (stable order otherwise).

    With parallel workers (``pytest -n auto --dist worksteal``, the README's test command)
    the longest tests then start at once and the others fill the gaps, instead of one worker
    running the last long test alone; run serially, the order changes nothing a test relies
    on (each test sets up what it needs).
    """
    items.sort(key=lambda item: (item.get_closest_marker("heavy") is None,
                                 item.get_closest_marker("slow") is None))
