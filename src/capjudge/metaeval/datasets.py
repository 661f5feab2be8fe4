"""Loaders for the public human-judgment datasets of caption evaluation.

Every loader returns a :class:`MetaDataset`: candidates with their references and per-annotator
ratings (per criterion), or caption pairs with the human preference. The files themselves are
not shipped (their licences do not allow it); point ``--path`` at your copy.

=================  ============================================================================
name               expected file
=================  ============================================================================
flickr8k-expert    CLIPScore ``flickr8k.json``: {image: {ground_truth, human_judgement: [...]}}
flickr8k-cf        the same format for the CrowdFlower judgments (``flickr8k_cf.json``)
composite          the same format (FLEUR/EXPERT ``composite.json``)
thumb              ``mscoco_THumB-1.0.jsonl`` (+ ``mscoco_references.json`` beside it)
pascal50s          ``pascal_50s.json``: {HC|HI|HM|MM: [{captions: [a, b], label, references}]}
foil               JSON list of {image, caption, foil, references} (correct vs foiled caption)
vatex-eval         ``vid_cans_score_dict.json``: {vid: {cands, refs, scores}} (3 annotators)
msvd-eval          ``MSVD-Eval.json``: {vid: {ref, candidate, human_score: [[A,C,C,R,Avg] x 2]}}
polaris            CSV/JSONL with columns ``mt``, ``refs``, ``score`` (``img`` optional)
mmhe               JSONL of {id, task, image, question, candidate, group, scores: {crit: [..]}}
=================  ============================================================================
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Candidate:
    """One judged text with its references and human ratings (one value per annotator)."""

    key: str
    candidate: str
    references: list[str]
    ratings: dict[str, list[float]]
    image: str | None = None
    system: str | None = None
    group: str | None = None  # what candidates compete within (best-of-N)
    question: str | None = None


@dataclass
class Pair:
    """Two candidates for the same input and which one humans preferred."""

    key: str
    a: str
    b: str
    references: list[str]
    prefers_a: bool
    category: str = "all"
    image: str | None = None


@dataclass
class MetaDataset:
    """A loaded human-judgment dataset."""

    name: str
    candidates: list[Candidate] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    notes: str = ""


class DatasetError(ValueError):
    """The file is not in the expected format (the message names the file)."""


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: {exc}") from exc


def _jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{n}: {exc}") from exc
    return rows


def _norm(text: str) -> str:
    return " ".join(str(text).split())


def load_clipscore_json(path: Path, name: str) -> MetaDataset:
    """CLIPScore's flickr8k.json format. Consecutive rows of the same (image, caption) are one
    candidate's ratings by different annotators (Flickr8k-Expert has 3 per caption)."""
    data = _json(path)
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: expected an object keyed by image id")
    out = MetaDataset(name)
    for image_id, entry in data.items():
        refs = [_norm(r) for r in entry.get("ground_truth", [])]
        current: Candidate | None = None
        for row in entry.get("human_judgement", []):
            rating = row.get("rating")
            if rating is None or (isinstance(rating, float) and math.isnan(rating)):
                continue
            caption = _norm(row["caption"])
            if current is None or current.candidate != caption:
                current = Candidate(key=f"{image_id}#{len(out.candidates)}", candidate=caption,
                                    references=refs, ratings={"overall": []},
                                    image=row.get("image_path") or image_id, group=image_id)
                out.candidates.append(current)
            current.ratings["overall"].append(float(rating))
    return out


def load_thumb(path: Path) -> MetaDataset:
    """THumB 1.0 (MSCOCO): P, R, penalties and total per caption (one annotation each)."""
    rows = _jsonl(path)
    ref_path = path.with_name(path.name.replace("THumB-1.0.jsonl", "references.json"))
    refs: dict[str, list[str]] = {}
    if ref_path.is_file():
        refs = {str(r["seg_id"]): [_norm(x) for x in r["refs"]] for r in _jsonl(ref_path)}
    out = MetaDataset("thumb", notes="" if refs else f"no references file at {ref_path}")
    for r in rows:
        seg = str(r["seg_id"])
        out.candidates.append(Candidate(
            key=f"{seg}:{r['SYS']}", candidate=_norm(r["hyp"]), references=refs.get(seg, []),
            ratings={"overall": [float(r["human_score"])], "precision": [float(r["P"])],
                     "recall": [float(r["R"])]},
            image=r.get("image"), system=r["SYS"], group=seg))
    return out


def load_pascal50s(path: Path) -> MetaDataset:
    data = _json(path)
    out = MetaDataset("pascal50s")
    for category, entries in data.items():
        for i, e in enumerate(entries):
            a, b = (_norm(c) for c in e["captions"])
            out.pairs.append(Pair(key=f"{category}-{i}", a=a, b=b,
                                  references=[_norm(r) for r in e["references"]],
                                  prefers_a=int(e["label"]) == 0, category=category,
                                  image=e.get("image")))
    return out


def load_foil(path: Path) -> MetaDataset:
    data = _json(path)
    out = MetaDataset("foil", notes="pairs: the correct caption vs its foiled version")
    for i, e in enumerate(data):
        out.pairs.append(Pair(key=str(e.get("id", i)), a=_norm(e["caption"]),
                              b=_norm(e["foil"]), references=[_norm(r) for r in e["references"]],
                              prefers_a=True, image=e.get("image")))
    return out


def load_vatex_eval(path: Path) -> MetaDataset:
    data = _json(path)
    out = MetaDataset("vatex-eval")
    for vid, e in data.items():
        refs = [_norm(r) for r in e["refs"]]
        for j, (cand, scores) in enumerate(zip(e["cands"], e["scores"], strict=True)):
            out.candidates.append(Candidate(key=f"{vid}#{j}", candidate=_norm(cand),
                                            references=refs,
                                            ratings={"overall": [float(s) for s in scores]},
                                            image=vid, group=vid))
    return out


def load_msvd_eval(path: Path) -> MetaDataset:
    data = _json(path)
    out = MetaDataset("msvd-eval")
    names = ("accuracy", "completeness", "conciseness", "relevance", "overall")
    for vid, e in data.items():
        ratings: dict[str, list[float]] = {n: [] for n in names}
        for annotator in e["human_score"]:
            for n, v in zip(names, annotator, strict=True):
                ratings[n].append(float(v))
        out.candidates.append(Candidate(key=vid, candidate=_norm(e["candidate"]),
                                        references=[_norm(r) for r in e["ref"]],
                                        ratings=ratings, image=e.get("vname"), group=vid))
    return out


def load_polaris(path: Path) -> MetaDataset:
    if path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    else:
        rows = _jsonl(path)
    out = MetaDataset("polaris")
    for i, r in enumerate(rows):
        refs = r["refs"]
        if isinstance(refs, str):
            try:
                refs = json.loads(refs)
            except json.JSONDecodeError:
                import ast

                refs = ast.literal_eval(refs)
        out.candidates.append(Candidate(key=str(i), candidate=_norm(r["mt"]),
                                        references=[_norm(x) for x in refs],
                                        ratings={"overall": [float(r["score"])]},
                                        image=r.get("img")))
    return out


def load_mmhe(path: Path) -> MetaDataset:
    out = MetaDataset("mmhe")
    for r in _jsonl(path):
        out.candidates.append(Candidate(
            key=str(r["id"]), candidate=_norm(r["candidate"]),
            references=[_norm(x) for x in r.get("references", [])],
            ratings={k: [float(x) for x in v] for k, v in r["scores"].items()},
            image=r.get("image"), system=r.get("system"), group=r.get("group"),
            question=r.get("question")))
    return out


LOADERS: dict[str, Callable[[Path], MetaDataset]] = {
    "flickr8k-expert": lambda p: load_clipscore_json(p, "flickr8k-expert"),
    "flickr8k-cf": lambda p: load_clipscore_json(p, "flickr8k-cf"),
    "composite": lambda p: load_clipscore_json(p, "composite"),
    "thumb": load_thumb,
    "pascal50s": load_pascal50s,
    "foil": load_foil,
    "vatex-eval": load_vatex_eval,
    "msvd-eval": load_msvd_eval,
    "polaris": load_polaris,
    "mmhe": load_mmhe,
}


def load(name: str, path: str | Path) -> MetaDataset:
    """Load a dataset by name (see the module table).

    Raises:
        DatasetError: unknown name, missing file, or a file in another format.
    """
    if name not in LOADERS:
        raise DatasetError(f"unknown dataset {name!r}; known: {', '.join(LOADERS)}")
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"{p}: dataset file not found")
    try:
        return LOADERS[name](p)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        if isinstance(exc, DatasetError):
            raise
        raise DatasetError(f"{p}: not in the {name} format ({type(exc).__name__}: {exc})"
                           ) from exc
