"""Backend fingerprints and the watch state: has a judge's model changed since last time?

A fingerprint says which model a backend is serving *now*:

- ``openai/...`` (and OpenAI-compatible servers): the ``/v1/models`` answer and a one-token probe
  request's ``model`` and ``system_fingerprint`` (the probe costs a few tokens; turn it off with
  ``probe=False`` to rely on the model list alone);
- ``hf/...`` and ``embedded/...``: the sha256 of the local weights;
- ``fake/...``: its scripted snapshot.

An unreachable backend is an ``error`` entry with the reason: recorded and reported by the watch
flow, never a crash and never a silent skip. The state file keeps the last fingerprint per judge;
events are appended to ``watch_events.jsonl`` beside it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import NotRequired, TypedDict

from capjudge.records import JSONValue
from capjudge.util.atomic import write_json

Fingerprint = dict[str, JSONValue]
"""A judge's fingerprint entry: ``judge``, ``backend``, ``time``, what the backend says about
its model (:meth:`~capjudge.backends.base.Backend.fingerprint_facts`: its keys are the
backend's own) and ``fingerprint`` (their hash), or ``error`` with the reason. Stored as JSON
in ``watch.json`` and the event log."""


def fingerprint(judge: str, backend_id: str, backend_options: Mapping[str, object],
                probe: bool = True) -> Fingerprint:
    """The backend's current fingerprint (or an ``error`` with the reason).

    What identifies the model is the backend's own business
    (:meth:`~capjudge.backends.base.Backend.fingerprint_facts`); this hashes what it says.
    """
    from capjudge.backends import create_backend

    entry: Fingerprint = {"judge": judge, "backend": backend_id,
                          "time": datetime.now(UTC).isoformat(timespec="seconds")}
    try:
        backend = create_backend(backend_id, **backend_options)
        facts = backend.fingerprint_facts(probe)
        identity = {k: v for k, v in facts.items() if k not in ("models", "note")}
        entry.update(facts)
        entry["fingerprint"] = hashlib.sha256(
            json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]
    except Exception as exc:  # noqa: BLE001 - any failure to reach a backend is reported
        entry["error"] = f"{type(exc).__name__}: {exc}"
    return entry


class WatchAlert(Exception):
    """A re-evaluated judge got worse past the alert limits; the message carries the figures.

    Raised by the watch flow after recording everything, so the flow run ends ``Failed``
    with this message (what a Prefect automation matches) and ``capjudge watch --once``
    exits 4.
    """


class WatchState:
    """Last fingerprint per judge, and the event log."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / "watch.json"
        self.events = self.folder / "watch_events.jsonl"

    def load(self) -> dict[str, Fingerprint]:
        """The saved state from ``watch.json``: judge -> its last fingerprint (or empty)."""
        if not self.path.is_file():
            return {}
        data: dict[str, Fingerprint] = json.loads(self.path.read_text())
        return data

    def save(self, state: Mapping[str, Fingerprint]) -> None:
        """Write ``state`` to ``watch.json`` atomically (through a temporary file)."""
        # A per-process temporary name: two watchers saving at once cannot clash.
        write_json(self.path, state)

    def record(self, event: Mapping[str, object]) -> None:
        """Append ``event``, stamped with the current UTC time, to the event log."""
        self.folder.mkdir(parents=True, exist_ok=True)
        event = {"time": datetime.now(UTC).isoformat(timespec="seconds"), **event}
        with self.events.open("a") as handle:
            handle.write(json.dumps(event, sort_keys=True) + "\n")

    def history(self) -> list[dict[str, JSONValue]]:
        """Every recorded event, oldest first (empty when there is no log)."""
        if not self.events.is_file():
            return []
        events: list[dict[str, JSONValue]] = [
            json.loads(line) for line in self.events.read_text().splitlines() if line]
        return events


class WatchLimits(TypedDict):
    """The watch's alert thresholds (params.yaml: ``watch``, ``validate``)."""

    alert_drop: float
    """Alert when a paired delta tau-b's whole 95 % CI lies below ``-alert_drop``."""
    max_failure_rate: float | None
    max_low_mass_rate: float | None


class WatchSummary(TypedDict):
    """What one watch run found and did (the watch flow's result)."""

    checked: list[str]
    changed: list[str]
    unchanged: list[str]
    new: list[str]
    unreachable: list[str]
    unwatchable: list[str]
    comparison: NotRequired[str | None]
    """The comparison report against the previous run (None: no previous run)."""
    previous_run: NotRequired[str | None]
    run: NotRequired[str | None]
    """The re-evaluation's run id in the registry (None: none was registered)."""
    alerts: NotRequired[list[str]]


def classify(current: Mapping[str, Fingerprint], previous: Mapping[str, Fingerprint]
             ) -> dict[str, list[str]]:
    """Judges by outcome: changed, unchanged, new, unreachable, unwatchable.

    New: no previous fingerprint. Unwatchable: its backend reports nothing that would show a
    weight change (``watchable: false``, the reason in ``unwatchable``).
    """
    out: dict[str, list[str]] = {"changed": [], "unchanged": [], "new": [], "unreachable": [],
                                 "unwatchable": []}
    for judge, entry in current.items():
        if "error" in entry:
            out["unreachable"].append(judge)
        elif entry.get("watchable") is False:
            out["unwatchable"].append(judge)
        elif judge not in previous:
            out["new"].append(judge)
        elif previous[judge].get("fingerprint") != entry["fingerprint"]:
            out["changed"].append(judge)
        else:
            out["unchanged"].append(judge)
    return {k: sorted(v) for k, v in out.items()}
