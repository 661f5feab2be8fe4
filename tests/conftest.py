"""Shared fixtures. The default run is hermetic: no network, Prefect state in a temp dir."""

from __future__ import annotations

import atexit
import inspect
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="session")
def prefect_server() -> Iterator[Any]:
    """One Prefect API server (on its own temporary SQLite database) per test process.

    Started the first time a test asks for it and stopped when the session ends: starting
    one took 8-14 s per module or test here, which every flow test paid (issue 41). Tests
    reach it through :func:`prefect_context` (the ``harness`` and ``prefect_api`` fixtures);
    tests that never ask for it run without it.
    """
    import prefect.settings
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.testing.utilities import _find_available_port

    folder = tempfile.mkdtemp(prefix="capjudge-prefect-db-")
    database = f"sqlite+aiosqlite:///{Path(folder) / 'prefect-test.db'}"
    # The server process takes its settings from the ones in force when it starts.
    with prefect.settings.temporary_settings(updates={
            prefect.settings.PREFECT_SERVER_DATABASE_CONNECTION_URL: database}):
        server = SubprocessASGIServer(port=_find_available_port())
        server.start(timeout=90)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def prefect_context(server: Any) -> Iterator[str]:
    """Flows run in this block report to ``server`` (what ``prefect_test_harness`` sets up,
    without starting a server of its own); its API URL.

    Tests in one process run one after another, so a test that reads the server's records
    (artifacts, flow runs) reads those created since it started.
    """
    import prefect.context
    import prefect.settings
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.utilities.asyncutils import run_coro_as_sync

    prior = SubprocessASGIServer._instances.get(None)
    # Code that would start an ephemeral server finds this one instead (as the harness does).
    SubprocessASGIServer._instances[None] = server
    try:
        with prefect.settings.temporary_settings(
                updates={prefect.settings.PREFECT_API_URL: server.api_url}), \
                prefect.context._temporary_global_settings_context(
                    prefect.context.get_settings_context()):
            yield str(server.api_url)

            async def drain() -> None:
                # Logs and events go out before the next test (as the harness drains them).
                try:
                    drained = APILogWorker.instance().drain()
                    if inspect.isawaitable(drained):
                        await drained
                except RuntimeError:
                    pass  # never started
                drained = EventsWorker.drain_all()
                if inspect.isawaitable(drained):
                    await drained

            run_coro_as_sync(drain())
    finally:
        if prior is not None:
            SubprocessASGIServer._instances[None] = prior
        else:
            SubprocessASGIServer._instances.pop(None, None)


@pytest.fixture
def harness(prefect_server: Any) -> Iterator[str]:
    """The test's flows report to this process's Prefect server; its API URL."""
    with prefect_context(prefect_server) as url:
        yield url


@pytest.fixture
def prefect_api(prefect_server: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """This process's Prefect server, used by this test's subprocesses too; its API URL.

    Every stage of a ``dvc repro`` is a process whose flow would otherwise start a temporary
    Prefect server of its own (8-15 s each here, see STACK_NOTES). Tests of the pipeline's
    logic (DVC, the watch) point their stages at one running server instead.
    """
    with prefect_context(prefect_server) as url:
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
    """The ``heavy`` tests first (longest first), then the ``slow`` ones, dealt across the
    parallel workers' first tests.

    pytest-xdist's ``worksteal`` (the README's test command) hands each of the N workers one
    contiguous block of the collection, and an idle worker takes the *end* of another's
    queue. Sorted alone, every heavy test sat at the front of the first block: one worker ran
    them one after another while the other ran the quick ones and then waited (measured: the
    watch test started after 7 of the run's 9 minutes). Dealt, each worker starts with its
    share of the heavy tests, and the quick ones fill the gaps at the end. Run serially, the
    order changes nothing a test relies on (each test sets up what it needs).
    """
    items.sort(key=lambda item: -_seconds(item))
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if workers > 1:
        items[:] = deal(items, workers, _seconds)


def _seconds(item: pytest.Item) -> float:
    """A test's expected time: its ``heavy(seconds=N)``; 2 s a ``slow`` one, else 0.1 s."""
    heavy = item.get_closest_marker("heavy")
    if heavy is not None:
        return float(heavy.kwargs.get("seconds", 10))
    return 2.0 if item.get_closest_marker("slow") is not None else 0.1


def deal(items: list[Any], workers: int, seconds: Callable[[Any], float]) -> list[Any]:
    """``items`` (longest first) dealt into the blocks worksteal will hand out, each to the
    block with the least expected time so far that still has room.

    The block sizes are worksteal's first hand-out: ``len(rest) // workers_left`` each.
    """
    sizes, left = [], len(items)
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    blocks: list[list[Any]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for item in items:
        open_blocks = [b for b in range(workers) if len(blocks[b]) < sizes[b]]
        chosen = min(open_blocks, key=lambda b: (load[b], b))
        blocks[chosen].append(item)
        load[chosen] += seconds(item)
    return [item for block in blocks for item in block]
