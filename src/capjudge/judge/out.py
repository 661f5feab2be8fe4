"""One output folder, one owner: the judge's ``--out`` between runs (issue 33).

- **A lock** (:func:`output_lock`): a run holds ``.capjudge-lock`` in its output folder while
  it works; a second run on the same folder refuses at once with a line naming the holder (a
  lock whose process is gone is taken over), never a silent overwrite.
- **What is there** (:func:`merged_with_existing`): a folder that already holds another run's
  judgements gets this run's modes *beside* them when it is the same judge (method, backend,
  model snapshot, method settings) on the same items, the rows of the modes this run judged
  replaced; any other judge's judgements are refused with a line saying what is there. A
  folder a stopped run left marked incomplete holds nothing to keep: this run replaces it.
- **What is written** (:func:`write_outputs`, :func:`summarise`): ``judgements.parquet`` and
  ``summary.json`` as one set, the summary's counts computed from the rows and the merged
  client statistics; :func:`check_writable_dir` proves the folder can be written before any
  model call. Re-exported by :mod:`capjudge.judge`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from capjudge.client import ClientStats
from capjudge.judge.config import JudgeConfig
from capjudge.methods import get_method
from capjudge.records import JudgeSummary
from capjudge.stage_files import judgements_file, summary_file
from capjudge.util.atomic import (
    INCOMPLETE_MARKER,
    OutputWriteError,
    atomic_path,
    stage_outputs,
    write_json,
    write_text,
)

LOCK = ".capjudge-lock"

FAILURES = ("error", "refused", "parse_failure")


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
    path = judgements_file(out)
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
        path = judgements_file(out_dir)
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


def summarise(table: pa.Table, stats: ClientStats, config: JudgeConfig,
              backend: Mapping[str, object], seconds: float) -> JudgeSummary:
    """The run's counts for summary.json (and DVC metrics).

    They come from the judgement table and the merged statistics of every call that produced
    it.
    """
    status = table.column("status").to_pylist()
    mode = table.column("mode").to_pylist()
    reason = table.column("reason").to_pylist()
    costs = [c for c, s in zip(table.column("cost_usd").to_pylist(), status, strict=True)
             if c is not None and s != "skipped"]
    by_status = Counter(status)
    judged = len(status) - by_status.get("skipped", 0)
    modes_ran = sorted({m for m, s in zip(mode, status, strict=True) if s != "skipped"})
    skipped_modes: dict[str, dict[str, int]] = {}
    for m, s, r in zip(mode, status, reason, strict=True):
        if s == "skipped":
            per_mode = skipped_modes.setdefault(m, {})
            per_mode[r or "skipped"] = per_mode.get(r or "skipped", 0) + 1
    templates = sorted({t for t in table.column("template").to_pylist() if t})
    settings = sorted({t for t in table.column("settings").to_pylist() if t}) \
        if "settings" in table.column_names else []
    # Answers that hit max_tokens: for a method that reasons before its score (G-VEval) the
    # reasoning was cut, which is another method (its "w/o reason" ablation), said so here.
    tokens = (table.column("completion_tokens").to_pylist()
              if "completion_tokens" in table.column_names else [None] * len(status))
    cut = sum(1 for s, n in zip(status, tokens, strict=True)
              if s != "skipped" and n is not None and n >= config.max_tokens)
    notes = []
    cut_note = getattr(get_method(config.method), "cut_reasoning", None)
    if cut and cut_note:
        notes.append(f"reasoning cut at max_tokens ({config.max_tokens}) in {cut} of {judged} "
                     f"judgements: {cut_note}")
    confirmations = Counter(c for c, s in zip(
        table.column("confirmation").to_pylist() if "confirmation" in table.column_names
        else [], status, strict=False) if c and s != "skipped")
    if confirmations.get("unconfirmed") or confirmations.get("contradicted"):
        # Issue 40: a reading off the method's contract is trusted once a second channel
        # agrees; the report says how many stand on the rules alone, and how many were refused.
        notes.append(f"{confirmations.get('unconfirmed', 0)} of "
                     f"{sum(confirmations.values())} readings are off the method's contract "
                     "with no second channel to confirm them (their values stand, "
                     "confirmation: unconfirmed); "
                     f"{confirmations.get('contradicted', 0)} were contradicted by it "
                     "(parse_failure)")
    return {
        "method": config.method, "backend": backend, "modes_ran": modes_ran,
        "modes_skipped": {m: v for m, v in skipped_modes.items() if m not in modes_ran},
        "skips": skipped_modes, "rows": len(status), "by_status": dict(sorted(by_status.items())),
        # Failures have no score; low_mass judgements do (flagged), so they are counted apart.
        "failure_rate": sum(by_status.get(k, 0) for k in FAILURES) / max(1, judged),
        "low_mass_rate": by_status.get("low_mass", 0) / max(1, judged),
        "requests": stats.requests, "model_calls": stats.calls,
        "cache_hits": stats.cache_hits, "retries": stats.retries,
        "cache_write_failures": stats.cache_write_failures,
        "prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.completion_tokens,
        "cost_usd": round(sum(costs), 6) if costs else None,
        "templates": templates, "settings": settings, "seconds": round(seconds, 2),
        "text_only_rate": by_status.get("text_only", 0) / max(1, judged),
        "reasoning_cut": cut, "notes": notes,
        "by_confirmation": dict(sorted(confirmations.items())),
    }


def write_summary(out_dir: str | Path, summary: JudgeSummary) -> None:
    """Write summary.json."""
    write_json(summary_file(out_dir), summary)


def check_writable_dir(out_dir: str | Path) -> Path:
    """Create ``out_dir`` if needed and prove a file can be written in it.

    Raises:
        ValueError: it exists and is not a folder, or cannot be created or written (the
            message names it).
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: output exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        from capjudge.util.atomic import temp_path

        probe = temp_path(out / "write-probe")
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ValueError(f"{out}: output folder cannot be written ({exc.strerror or exc})"
                         ) from None
    return out


def write_outputs(out_dir: str | Path, table: pa.Table, summary: JudgeSummary, *,
                  complete: bool = True) -> None:
    """The judgements and summary as one set (each file renamed into place whole).

    The folder is marked incomplete in between; a run stopped by a signal writes what it
    has and leaves the mark (``complete=False``): later stages refuse the folder until a run
    finishes it.

    Raises:
        OutputWriteError: the disk is full or the folder cannot be written.
    """
    try:
        with stage_outputs(out_dir) as out:
            with atomic_path(judgements_file(out)) as tmp:
                pq.write_table(table, tmp)
            write_summary(out, summary)
        if not complete:
            write_text(Path(out_dir) / INCOMPLETE_MARKER, "stopped by a signal\n")
    except OSError as exc:
        raise OutputWriteError.of(out_dir, exc, table.nbytes, what="the judgements",
                                  then="nothing paid for is lost: the answers are in the "
                                       "request cache, run again once there is room") from None
