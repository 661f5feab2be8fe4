"""What the report says about the data it measured: the protocol line and the label-key check.

The protocol line states what the data is (the manifest, its items, systems and labels, the
human criterion compared with) and where its labels come from only when the data says so: a
dataset card beside the manifest (:func:`capjudge.manifest.read_dataset_card`; the bundled
sample writes one), kept by ingest in its ``summary.json``. Without a card the labels are
described as what they are, the manifest's numbers, never with another data set's provenance.

The label-key check turns "no judge scored at least 3 items with human labels" into its cause
when the configured human criterion names no label the items carry.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from capjudge.records import ItemRow
from capjudge.stage_files import summary_file

GENERIC_PROTOCOL = "manifest-labels"
"""The protocol id of data without a dataset card: the manifest's labels, annotators averaged."""


@dataclass(frozen=True)
class DataDescription:
    """What the report states about its data."""

    protocol: str
    """The protocol's id, recorded with every agreement figure (and in the run history)."""
    line: str
    """The report's protocol line: the protocol, then what the data is."""
    label_note: str | None
    """Why no item has a human label for the criterion, when none has (else None)."""


def label_keys(items: Sequence[ItemRow]) -> list[str]:
    """The label names (criteria) the items carry, sorted."""
    keys: set[str] = set()
    for item in items:
        keys.update(json.loads(item.labels or "{}"))
    return sorted(keys)


def label_key_note(criterion: str, found: Sequence[str]) -> str | None:
    """One line saying why no item has a label named ``criterion``; None when some has.

    Args:
        criterion: the human criterion asked for (``report.human_criterion``).
        found: the label names the items carry.
    """
    if criterion in found:
        return None
    if not found:
        return ("The items carry no human labels (the manifest's `labels` key), so agreement "
                "with humans cannot be measured.")
    close = difflib.get_close_matches(criterion, found, n=1, cutoff=0.6) or [
        k for k in found if k.lower() == criterion.lower()]
    hint = f" Did you mean '{close[0]}'?" if close else ""
    return (f"No label is named '{criterion}' (report.human_criterion); the items' label keys "
            f"are: {', '.join(found)}.{hint} Set report.human_criterion (or capjudge report "
            "--human-criterion) to the label to compare with.")


def _ingest_summary(ingest: Path) -> dict[str, object]:
    """The ingest stage's ``summary.json`` (empty when absent or unreadable: older outputs)."""
    try:
        data = json.loads(summary_file(ingest).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def describe_data(ingest: Path, items: Sequence[ItemRow], criterion: str) -> DataDescription:
    """The protocol line and label-key note for the ingested items.

    Args:
        ingest: the ingest folder (its ``summary.json`` names the manifest and holds the
            manifest's dataset card, if it had one).
        items: the ingested items.
        criterion: the human criterion the report compares with.
    """
    summary = _ingest_summary(ingest)
    raw_card = summary.get("dataset")
    card = {k: str(v) for k, v in raw_card.items()} if isinstance(raw_card, dict) else {}
    protocol = card.get("protocol") or GENERIC_PROTOCOL
    if card.get("description"):
        how = card["description"]
    else:
        how = (f"one row per item, the human label is the mean over annotators of the "
               f"manifest's `{criterion}` labels (no dataset card says where they come from)")
    keys = label_keys(items)
    labelled = sum(criterion in json.loads(i.labels or "{}") for i in items)
    systems = len({i.system for i in items if i.system})
    source = summary.get("manifest") or str(ingest)
    name = f"{card['name']}, " if card.get("name") else ""
    quarantined = summary.get("quarantined")
    data = (f"Data: {name}{source}: {len(items)} items"
            + (f" ({quarantined} quarantined)" if quarantined else "")
            + f", {systems} systems, {labelled} labelled `{criterion}`; label keys: "
            + (", ".join(keys) or "none"))
    return DataDescription(protocol=protocol, line=f"{protocol}: {how}. {data}",
                           label_note=label_key_note(criterion, keys))


__all__ = ["GENERIC_PROTOCOL", "DataDescription", "describe_data", "label_key_note",
           "label_keys"]
