"""Atomic file writes, stage-output sets and orphan clean-up: the one helper every writer uses.

A file is written to a temporary name in its own directory and renamed over the final name:
a reader sees the old file or the new one, never half of one, whatever kills the writer. The
temporary name carries host, pid, thread and random bits (``.NAME.HOST.PID.TID.RAND.tmp``), so
any number of processes and threads may write the same file at once (the last rename wins),
and :func:`clean_orphans` can tell a dead writer's leftover from a live writer's work.

A stage writes several files that belong together (``items.parquet``, ``quarantine.parquet``,
``capjudge.duckdb`` and ``summary.json``). Renames of several files cannot be one atomic step,
so :func:`stage_outputs` marks the folder incomplete (:data:`INCOMPLETE_MARKER`) before the
first write and removes the mark after the last: readers call :func:`check_complete`, which
refuses a folder a killed run left half-rewritten, naming the stage to run again.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

INCOMPLETE_MARKER = ".capjudge-incomplete"
"""Present in a stage's output folder while (or because) a run is rewriting it."""

# Host names may hold characters that are awkward in file names; the temp name only needs to
# be unique and to name the host for clean_orphans.
HOST = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())[:32] or "host"

_TEMP = re.compile(r"^\..+\.(?P<host>[A-Za-z0-9_-]+)\.(?P<pid>\d+)\.\d+\.[0-9a-f]+\.tmp$")
# A temporary from another host (or in the old formats, without a pid) is removed only when
# it is this old: no write takes anywhere near an hour between create and rename.
ORPHAN_AGE_S = 3600.0


class IncompleteOutputError(Exception):
    """A stage's output folder was left half-written by a killed run."""


OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
"""Errors that say the output's disk or folder cannot take a write (full, over quota, read-only),
whatever the input: a stage stops on them rather than blaming (e.g. quarantining) its inputs."""


class OutputWriteError(RuntimeError):
    """An output could not be written (a full disk, a read-only folder): one line, no trace."""

    @classmethod
    def of(cls, out_dir: str | Path, exc: OSError, needed: int | None = None, *,
           what: str = "the outputs", then: str = "run the same command again once there "
                                                  "is room") -> OutputWriteError:
        """The error for ``exc`` while writing into ``out_dir``.

        Args:
            out_dir: the output folder (named when ``exc`` names no file).
            exc: what the write raised.
            needed: about how many bytes the outputs need (said when known).
            what: what was being written, for the message.
            then: what to do next.
        """
        import shutil

        where = exc.filename or out_dir
        try:
            free = f"{shutil.disk_usage(out_dir).free / 1e6:,.1f} MB free"
        except OSError:
            free = "free space unknown"
        need = f"; {what} need about {max(needed, 1) / 1e6:,.1f} MB" if needed is not None \
            else ""
        return cls(f"cannot write {where}: {exc.strerror or exc} ({free} on that disk{need}); "
                   f"{then}")


def temp_path(path: str | Path) -> Path:
    """A unique temporary name next to ``path`` (same directory, so a rename is atomic)."""
    path = Path(path)
    return path.with_name(f".{path.name}.{HOST}.{os.getpid()}.{threading.get_ident()}."
                          f"{os.urandom(4).hex()}.tmp")


def fsync_file(path: str | Path) -> None:
    """Flush a written file's bytes to disk (before it is renamed into place)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | Path, *, durable: bool = False) -> Iterator[Path]:
    """Yield a temporary path to write; on success it is renamed over ``path``.

    For writers that want a file name (``pyarrow.parquet.write_table``, DuckDB, PIL). On an
    exception the temporary is removed and ``path`` is left as it was.

    Args:
        path: the final file.
        durable: fsync the file before the rename (a power loss cannot leave it empty).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        yield tmp
        if durable:
            fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_bytes(path: str | Path, data: bytes, *, durable: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically (see the module docstring); returns ``path``."""
    path = Path(path)
    with atomic_path(path, durable=durable) as tmp:
        with open(tmp, "xb") as f:
            f.write(data)
    return path  # (durable: atomic_path fsyncs the closed file before the rename)


def write_text(path: str | Path, text: str, *, durable: bool = False) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns ``path``."""
    return write_bytes(path, text.encode("utf-8"), durable=durable)


def write_json(path: str | Path, data: Any, *, indent: int | None = 2,
               sort_keys: bool = True) -> Path:
    """Write ``data`` as JSON (with a final newline) to ``path`` atomically; returns ``path``."""
    return write_text(path, json.dumps(data, indent=indent, sort_keys=sort_keys,
                                       ensure_ascii=False) + "\n")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def is_orphan(name: str, mtime: float, now: float | None = None) -> bool:
    """Whether a temporary file was left by a writer that is gone.

    A temporary of this host whose writer's pid is dead is an orphan at once; any other
    temporary (another host's, or an old-format name without a pid) once it is older than
    :data:`ORPHAN_AGE_S`.
    """
    now = time.time() if now is None else now
    m = _TEMP.match(name)
    if m is not None and m.group("host") == HOST:
        return not _pid_alive(int(m.group("pid")))
    return now - mtime > ORPHAN_AGE_S


def clean_orphans(directory: str | Path, *, recursive: bool = False) -> int:
    """Remove the temporaries dead writers left in ``directory``; returns how many.

    Only names that start with ``.`` and end in ``.tmp`` are considered (what this module, the
    request cache and the stage writers create), and only orphans (:func:`is_orphan`) are
    removed: a live writer's file is never touched. Never raises.
    """
    removed = 0
    now = time.time()
    stack = [os.fspath(directory)]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if recursive:
                        stack.append(entry.path)
                    continue
                if not (entry.name.startswith(".") and entry.name.endswith(".tmp")):
                    continue
                if is_orphan(entry.name, entry.stat(follow_symlinks=False).st_mtime, now):
                    os.unlink(entry.path)
                    removed += 1
            except OSError:
                continue
    if removed:
        log.info("removed %d orphan temporary file(s) under %s", removed, directory)
    return removed


@contextlib.contextmanager
def stage_outputs(out_dir: str | Path) -> Iterator[Path]:
    """Mark ``out_dir`` incomplete while a stage rewrites its set of outputs.

    The mark is written (atomically) before anything else and removed after the last output
    is in place; a run killed in between leaves it, and :func:`check_complete` refuses the
    folder until a run finishes. Orphan temporaries of the folder are removed first.

    Yields:
        The output folder (created).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    clean_orphans(out)
    write_text(out / INCOMPLETE_MARKER, f"{HOST} {os.getpid()} {time.time():.0f}\n")
    yield out
    (out / INCOMPLETE_MARKER).unlink(missing_ok=True)


def check_complete(out_dir: str | Path, stage: str = "the stage") -> None:
    """Refuse a stage output folder a killed run left half-written.

    Raises:
        IncompleteOutputError: the folder carries :data:`INCOMPLETE_MARKER`.
    """
    if (Path(out_dir) / INCOMPLETE_MARKER).exists():
        raise IncompleteOutputError(
            f"{out_dir}: incomplete output (a run writing it was stopped before it finished); "
            f"run {stage} again")
