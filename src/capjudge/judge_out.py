"""One output folder, one owner: the judge's ``--out`` between runs (issue 33).

- **A lock** (:func:`output_lock`): a run holds ``.capjudge-lock`` in its output folder while
  it works; a second run on the same folder refuses at once with a line naming the holder (a
  lock whose process is gone is taken over), never a silent overwrite.
- **What is there** (:func:`merged_with_existing`): a folder that already holds another run's
  judgements gets this run's modes *beside* them when it is the same judge (method, backend,
  model snapshot, method settings) on the same items, the rows of the modes this run judged
  replaced; any other judge's judgements are refused with a line saying what is there. A
  folder a stopped run left marked incomplete holds nothing to keep: this run replaces it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from capjudge.atomic import INCOMPLETE_MARKER

LOCK = ".capjudge-lock"


class OutputBusyError(RuntimeError):
    """Another run is writing the same output folder."""


class OutputTakenError(RuntimeError):
    """The output folder holds another judge's judgements."""


def _alive(host: str, pid: int) -> bool:
    if host != socket.gethostname():
        return True  # another machine's run: assume it is alive
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def output_lock(out_dir: str | Path) -> Iterator[Path]:
    """Hold ``out_dir``'s lock for the body.

    Raises:
        OutputBusyError: a live run holds it.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lock = out / LOCK
    me = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                holder = json.loads(lock.read_text())
            except (OSError, ValueError):
                holder = {}
            if holder and _alive(str(holder.get("host")), int(holder.get("pid", -1))):
                since = time.strftime("%H:%M:%S", time.localtime(holder.get("started", 0)))
                raise OutputBusyError(
                    f"{out}: another run (pid {holder.get('pid')} on {holder.get('host')}, "
                    f"started {since}) is writing this folder; wait for it or use another "
                    "--out") from None
            lock.unlink(missing_ok=True)  # a dead run's lock (or an unreadable one)
            continue
        with os.fdopen(fd, "w") as handle:
            json.dump(me, handle)
        break
    else:
        raise OutputBusyError(f"{out}: could not take the folder's lock ({lock})")
    try:
        yield out
    finally:
        lock.unlink(missing_ok=True)


_IDENTITY = ("method", "backend", "snapshot", "settings")


def _identity(table: pa.Table, defaults: Mapping[str, str] | None = None
              ) -> dict[str, list[str]]:
    """The judge a table's rows name; ``settings`` without the options at their default.

    A named option added in a later version is absent from older rows and at its default in
    newer ones: the two are the same judge (``defaults``: each option's default, from the
    method).
    """
    out = {}
    for name in _IDENTITY:
        if name in table.column_names:
            values = {str(v) for v in table.column(name).to_pylist() if v is not None}
            if name == "settings" and defaults:
                values = {_without_defaults(v, defaults) for v in values}
            out[name] = sorted(values)
    return out


def _without_defaults(settings: str, defaults: Mapping[str, str]) -> str:
    """``settings`` ("k=v; k2=v2") without the options at their default value."""
    kept = [pair for pair in settings.split("; ")
            if defaults.get(pair.partition("=")[0]) != pair.partition("=")[2]]
    return "; ".join(kept)


def _describe(table: pa.Table) -> str:
    ident = _identity(table)
    modes = sorted({str(m) for m in table.column("mode").to_pylist()})
    items = len(set(table.column("item_id").to_pylist()))
    return (f"{', '.join(ident.get('method', ['?']))} on {', '.join(ident.get('backend', ['?']))}"
            f" (modes {', '.join(modes)}; {items} items)")


def _existing(out_dir: str | Path) -> pa.Table | None:
    """The judgements a finished run left in the folder (None: nothing to keep)."""
    out = Path(out_dir)
    path = out / "judgements.parquet"
    if not path.is_file() or (out / INCOMPLETE_MARKER).exists():
        return None
    old = pq.read_table(path)
    return old if old.num_rows else None


def check_existing(out_dir: str | Path, identity: dict[str, list[str]],
                   item_ids: set[str]) -> None:
    """Refuse, before anything is asked, a folder that holds another judge's judgements.

    ``identity`` is this run's (``method``, ``backend``, ``snapshot``; ``settings`` is checked
    on the rows, after the run). Raises :class:`OutputTakenError`.
    """
    old = _existing(out_dir)
    if old is not None:
        _refuse_other(out_dir, old, identity, item_ids)


def _refuse_other(out_dir: str | Path, old: pa.Table, mine: dict[str, list[str]],
                  item_ids: set[str], defaults: Mapping[str, str] | None = None) -> None:
    theirs = _identity(old.filter(pc.not_equal(old.column("status"), "skipped")), defaults)
    same_items = set(old.column("item_id").to_pylist()) == item_ids
    same_judge = all(set(mine.get(k, [])) <= set(theirs.get(k, [])) or not mine.get(k)
                     or not theirs.get(k) for k in _IDENTITY)
    if not (same_judge and same_items):
        why = "other items" if same_judge else "another judge"
        path = Path(out_dir) / "judgements.parquet"
        raise OutputTakenError(
            f"{out_dir} holds judgements of {_describe(old)} ({why}); this run would replace "
            f"them: use another --out, or remove {path} first")


def merged_with_existing(out_dir: str | Path, table: pa.Table,
                         defaults: Mapping[str, str] | None = None) -> pa.Table:
    """``table`` with the rows already in ``out_dir`` that this run keeps (see module doc).

    ``defaults``: the method's named options at their defaults (older rows may lack an
    option added since; at its default it is the same judge).

    Raises:
        OutputTakenError: the folder holds another judge's judgements, or other items.
    """
    old = _existing(out_dir)
    if old is None:
        return table
    scored = pc.not_equal(table.column("status"), "skipped")
    mine = _identity(table.filter(scored), defaults) if table.num_rows else {}
    _refuse_other(out_dir, old, mine, set(table.column("item_id").to_pylist()), defaults)
    modes = set(table.column("mode").to_pylist())
    keep = old.filter(pc.invert(pc.is_in(old.column("mode"),
                                         value_set=pa.array(sorted(modes)))))
    if keep.num_rows == 0:
        return table
    # An older run's table may lack a newer column: filled with nulls.
    return pa.concat_tables([keep, table], promote_options="default")
