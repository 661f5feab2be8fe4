"""Loaders for the public human-judgment datasets of caption evaluation, and their registry.

Every loader returns a :class:`MetaDataset`: candidates with their references and per-annotator
ratings (per criterion), or caption pairs with the human preference. The files themselves are
not shipped (their licences do not allow it); point ``--path`` at your copy. Each loader reads
the file as its authors published it; anything else (a malformed file, a missing key, a score
string that does not parse, wrong counts) is a :class:`DatasetError` naming the file and the
entry.

=================  ============================================================================
name               expected file (the published form)
=================  ============================================================================
flickr8k-expert    CLIPScore ``flickr8k.json``: {image: {ground_truth, human_judgement: [...]}}
flickr8k-cf        the same format for the CrowdFlower judgments (``crowdflower_flickr8k.json``)
composite          FLEUR/EXPERT ``composite.json``: {flickr8k|flickr30k|coco: [{image, caption,
                   human}]} (no references), or a conversion to the CLIPScore format
thumb              ``mscoco_THumB-1.0.jsonl`` (+ ``mscoco_references.json`` beside it)
pascal50s          ``pascal_50s.json``: {HC|HI|HM|MM: [{captions: [a, b], label, references}]}
foil               ``foilv1.0_test_2017.json`` (COCO style: {images, annotations: [{id, image_id,
                   caption, foil}]}) + COCO ``captions_val2014.json`` beside it for references;
                   or a JSON list of {image, caption, foil, references}
vatex-eval         ``vid_cans_score_dict.json``: {vid: {vid, cands: [6], refs: [[9]], scores:
                   "[[a1, a2, a3] x 6]"}} (``scores`` a string; 3 annotators, ratings 1-5)
msvd-eval          ``MSVD-Eval.json``: {vid: {ref, candidate, human_score: [[A,C,C,R,Avg] x 2]}}
polaris            Polos ``polaris_test.csv``: imgid, mt, refs (a list literal), score; one row
                   per annotator, rows of the same (imgid, mt) become one candidate
polaris-json       EXPERT ``polaris_test.json``: [{id, imgid, mt, score, count}] (the mean of
                   ``count`` ratings; no references: reference-free metrics only)
nebula             ``nebula_test.json``: [{imgid, mt, refs: [5], score}] (score: mean rating 0-1)
mmhe               JSONL of {id, task, image, question, candidate, group, scores: {crit: [..]}}
=================  ============================================================================

The registry maps each name to its loader and declares the dataset's default protocol, whether
its published file carries references and whether it is pairwise. :func:`dataset_names` lists
the names (the CLI's ``--dataset`` choices); :func:`register_dataset` adds one from outside,
either as a decorator or lazily as ``"package.module:function"`` (imported on first load)::

    @register_dataset("my-set", default_protocol="my-set-rows")
    def load_my_set(path: Path) -> MetaDataset: ...
"""

from __future__ import annotations

import ast
import csv
import importlib
import io
import json
import math
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload


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

    @property
    def has_references(self) -> bool:
        """Whether every candidate (or pair) has at least one reference."""
        items: list[Candidate] | list[Pair] = self.pairs or self.candidates
        return bool(items) and all(item.references for item in items)


class DatasetError(ValueError):
    """The file is not in the expected format (the message names the file and the entry)."""


# --------------------------------------------------------------------------------------------
# Registry

Loader = Callable[[Path], MetaDataset]


@dataclass(frozen=True)
class DatasetSpec:
    """What the registry knows about a dataset without importing its loader.

    Attributes:
        name: the ``--dataset`` name.
        loader: the loader, or ``"package.module:function"`` imported on first use.
        default_protocol: the protocol used when none is named (see ``protocols``).
        has_references: whether the published file carries references (a loaded file may
            still lack them, see :attr:`MetaDataset.has_references`).
        pairwise: whether the dataset holds caption pairs (accuracy) rather than ratings.
        file: the published file the loader reads (for messages and listings).
        description: one line on the dataset.
    """

    name: str
    loader: Loader | str
    default_protocol: str
    has_references: bool = True
    pairwise: bool = False
    file: str = ""
    description: str = ""

    def get_loader(self) -> Loader:
        """The loader, importing its module first when it was registered by path.

        Raises:
            DatasetError: the module or the function does not exist.
        """
        if not isinstance(self.loader, str):
            return self.loader
        module, _, attribute = self.loader.partition(":")
        try:
            loader: Loader = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError) as exc:
            raise DatasetError(f"dataset {self.name!r}: cannot import its loader "
                               f"{self.loader!r} ({exc})") from exc
        return loader


_DATASETS: dict[str, DatasetSpec] = {}
_LOCK = threading.Lock()


@overload
def register_dataset(name: str, loader: None = None, *, default_protocol: str | None = ...,
                     has_references: bool = ..., pairwise: bool = ..., file: str = ...,
                     description: str = ..., replace: bool = ...
                     ) -> Callable[[Loader], Loader]: ...


@overload
def register_dataset(name: str, loader: Loader | str, *, default_protocol: str | None = ...,
                     has_references: bool = ..., pairwise: bool = ..., file: str = ...,
                     description: str = ..., replace: bool = ...) -> Loader | str: ...


def register_dataset(name: str, loader: Loader | str | None = None, *,
                     default_protocol: str | None = None, has_references: bool = True,
                     pairwise: bool = False, file: str = "", description: str = "",
                     replace: bool = False) -> Callable[[Loader], Loader] | Loader | str:
    """Register a meta-evaluation dataset (as a decorator, or directly with ``loader``).

    Args:
        name: the ``--dataset`` name.
        loader: the loader, or ``"package.module:function"`` to import it only when the dataset
            is loaded; omit it to use this as a decorator.
        default_protocol: the protocol used when none is named (default: ``name``); register
            new protocols with :func:`capjudge.metaeval.protocols.register_protocol`.
        has_references: whether the published file carries references.
        pairwise: whether the dataset holds caption pairs rather than ratings.
        file: the published file the loader reads.
        description: one line on the dataset.
        replace: allow replacing a dataset of the same name.

    Returns:
        The decorator, or ``loader`` itself.

    Raises:
        ValueError: the name is taken (and ``replace`` is false) or the path is not
            ``module:function``.
    """
    def add(component: Loader | str) -> None:
        if isinstance(component, str) and ":" not in component:
            raise ValueError(f"a lazy loader must be 'module:function', got {component!r}")
        spec = DatasetSpec(name=name, loader=component,
                           default_protocol=default_protocol or name,
                           has_references=has_references, pairwise=pairwise, file=file,
                           description=description)
        with _LOCK:
            if name in _DATASETS and not replace:
                raise ValueError(f"dataset {name!r} is already registered")
            _DATASETS[name] = spec

    if loader is None:
        def decorator(function: Loader) -> Loader:
            add(function)
            return function

        return decorator
    add(loader)
    return loader


def unregister_dataset(name: str) -> None:
    """Forget a dataset (tests that register toys clean up with this)."""
    with _LOCK:
        _DATASETS.pop(name, None)


def dataset_names() -> list[str]:
    """Every registered dataset name, sorted (imports no loader): the CLI's choices."""
    with _LOCK:
        return sorted(_DATASETS)


def get_dataset(name: str) -> DatasetSpec:
    """The registered dataset ``name``.

    Raises:
        DatasetError: no such dataset; the message lists the registered ones.
    """
    with _LOCK:
        spec = _DATASETS.get(name)
    if spec is None:
        raise DatasetError(f"unknown dataset {name!r}; known: {', '.join(dataset_names())}")
    return spec


class _LoaderView(Mapping[str, Loader]):
    """``LOADERS[name]``: the registry seen as the name -> loader mapping it replaced."""

    def __getitem__(self, name: str) -> Loader:
        with _LOCK:
            spec = _DATASETS.get(name)
        if spec is None:
            raise KeyError(name)
        return spec.get_loader()

    def __iter__(self) -> Iterator[str]:
        return iter(dataset_names())

    def __len__(self) -> int:
        return len(dataset_names())


LOADERS: Mapping[str, Loader] = _LoaderView()


def load(name: str, path: str | Path) -> MetaDataset:
    """Load a registered dataset from its file.

    Raises:
        DatasetError: unknown name, missing file, or a file not in the dataset's format (the
            message names the file and, where there is one, the entry).
    """
    spec = get_dataset(name)
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"{p}: dataset file not found")
    loader = spec.get_loader()
    try:
        data = loader(p)
    except DatasetError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # A safety net for loaders registered from outside; the built-in ones validate.
        raise DatasetError(f"{p}: not in the {name} format ({type(exc).__name__}: {exc})"
                           ) from exc
    if not data.candidates and not data.pairs:
        expected = f" (expected {spec.file})" if spec.file else ""
        raise DatasetError(f"{p}: no {name} entries found{expected}")
    return data


# --------------------------------------------------------------------------------------------
# Reading and checking


def _err(path: Path, where: str, message: str) -> DatasetError:
    return DatasetError(f"{path}: {where}: {message}" if where else f"{path}: {message}")


def _shape_error(path: Path, name: str, expected: str) -> DatasetError:
    return DatasetError(f"{path}: not in the {name} format: expected {expected}")


def _preview(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _read_text(path: Path) -> str:
    try:
        # utf-8-sig: a byte-order mark (CSV exported from spreadsheets) is not part of the data.
        return path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read ({exc})") from exc


def _json(path: Path) -> Any:
    try:
        return json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc})") from exc


def _jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line."""
    rows = []
    for n, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}: line {n}: not valid JSON ({exc})") from exc
        if not isinstance(row, dict):
            raise DatasetError(f"{path}: line {n}: expected a JSON object, got "
                               f"{type(row).__name__}")
        rows.append((n, row))
    return rows


def _csv(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) of a CSV file with a header; ``required`` columns must exist."""
    # StringIO, not splitlines(): a quoted cell may hold a newline.
    reader = csv.DictReader(io.StringIO(_read_text(path), newline=""))
    try:
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        if missing:
            raise DatasetError(f"{path}: CSV header {header} lacks column(s) {missing}")
        rows = []
        for row in reader:
            rows.append((reader.line_num, dict(row)))
    except csv.Error as exc:
        raise DatasetError(f"{path}: line {reader.line_num}: malformed CSV ({exc})") from exc
    return rows


def _norm(text: str) -> str:
    return " ".join(str(text).split())


def _field(path: Path, where: str, entry: Any, *names: str, required: bool = True) -> Any:
    """The first of ``names`` present in the object ``entry`` (aliases of one field)."""
    if not isinstance(entry, dict):
        raise _err(path, where, f"expected an object, got {type(entry).__name__}")
    for name in names:
        if name in entry:
            return entry[name]
    if required:
        alias = f" (or {', '.join(repr(n) for n in names[1:])})" if len(names) > 1 else ""
        raise _err(path, where, f"missing key {names[0]!r}{alias}")
    return None


def _text(path: Path, where: str, value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise _err(path, where, f"{name} must be a string, got {_preview(value)}")
    return _norm(value)


def _literal(path: Path, where: str, text: str, name: str) -> Any:
    """A JSON or Python literal held in a string (lists of references or scores)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        # Python literals, not JSON, in the published files (single quotes, e.g. Polaris refs;
        # EMScore-derived code reads VATEX-EVAL scores with eval/literal_eval).
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise _err(path, where, f"{name} does not parse ({type(exc).__name__}): "
                                f"{_preview(text)}") from exc


def _texts(path: Path, where: str, value: Any, name: str, *, min_len: int = 1) -> list[str]:
    """A list of strings (a string holding a list literal is parsed first, as in CSVs)."""
    if isinstance(value, str):
        value = _literal(path, where, value, name)
    if not isinstance(value, list | tuple) or not all(isinstance(x, str) for x in value):
        raise _err(path, where, f"{name} must be a list of strings, got {_preview(value)}")
    if len(value) < min_len:
        raise _err(path, where, f"{name} has {len(value)} entries, expected at least {min_len}")
    return [_norm(x) for x in value]


def _number(path: Path, where: str, value: Any, name: str, *, lo: float | None = None,
            hi: float | None = None, allow_nan: bool = False) -> float:
    """A finite number (numeric strings accepted: CSV cells), optionally in [lo, hi]."""
    if isinstance(value, bool):
        raise _err(path, where, f"{name} must be a number, got {value!r}")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise _err(path, where, f"{name} is not a number: {_preview(value)}") from None
    else:
        raise _err(path, where, f"{name} must be a number, got {_preview(value)}")
    if math.isnan(number):
        if allow_nan:
            return number
        raise _err(path, where, f"{name} is NaN")
    if math.isinf(number):
        raise _err(path, where, f"{name} is infinite")
    if (lo is not None and number < lo) or (hi is not None and number > hi):
        raise _err(path, where, f"{name} {number:g} is outside [{lo:g}, {hi:g}]"
                   if lo is not None and hi is not None else f"{name} {number:g} out of range")
    return number


_NUMPY_MATRIX = re.compile(r"[\s\[\].\deE+-]*")  # no commas: str(ndarray)


def _score_matrix(path: Path, where: str, value: Any, name: str) -> list[list[Any]]:
    """Rows of ratings: a list of lists, or a string holding one (VATEX-EVAL's ``scores``)."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = _literal(path, where, text, name)
        except DatasetError:
            # A numpy repr ("[[3 4 3]\n [2 2 1]]") has no commas; read its rows by brackets.
            rows = re.findall(r"\[([^\[\]]*)\]", text)
            if not (rows and _NUMPY_MATRIX.fullmatch(text) and text.startswith("[[")
                    and text.endswith("]]") and text.count("[") == text.count("]")):
                raise
            value = [[x for x in re.split(r"[\s,]+", row.strip()) if x] for row in rows]
    if not isinstance(value, list | tuple) or not all(isinstance(r, list | tuple) for r in value):
        raise _err(path, where, f"{name} must be a list of rating lists (one per candidate), "
                                f"got {_preview(value)}")
    return [list(r) for r in value]


def _mapping(path: Path, data: Any, name: str, expected: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise _shape_error(path, name, expected)
    return data


# --------------------------------------------------------------------------------------------
# Loaders


def load_clipscore_json(path: Path, name: str, rating_range: tuple[float, float] | None = None
                        ) -> MetaDataset:
    """CLIPScore's ``flickr8k.json`` format (also its ``crowdflower_flickr8k.json``).

    Consecutive rows of the same (image, caption) are one candidate's ratings by different
    annotators (Flickr8k-Expert has 3 per caption). NaN ratings are skipped, as CLIPScore does.
    """
    data = _mapping(path, _json(path), name,
                    "an object keyed by image id: {ground_truth, human_judgement: [...]}")
    out = MetaDataset(name)
    lo, hi = rating_range or (None, None)
    for image_id, entry in data.items():
        where = f"image {image_id!r}"
        refs = _texts(path, where, _field(path, where, entry, "ground_truth"), "ground_truth",
                      min_len=0)
        judgements = _field(path, where, entry, "human_judgement")
        if not isinstance(judgements, list):
            raise _err(path, where, f"human_judgement must be a list, got {_preview(judgements)}")
        current: Candidate | None = None
        for n, row in enumerate(judgements):
            row_where = f"{where}, human_judgement {n}"
            rating = _number(path, row_where, _field(path, row_where, row, "rating"), "rating",
                             lo=lo, hi=hi, allow_nan=True)
            if math.isnan(rating):
                continue
            caption = _text(path, row_where, _field(path, row_where, row, "caption"), "caption")
            if current is None or current.candidate != caption:
                current = Candidate(key=f"{image_id}#{len(out.candidates)}", candidate=caption,
                                    references=refs, ratings={"overall": []},
                                    image=row.get("image_path") or image_id, group=image_id)
                out.candidates.append(current)
            current.ratings["overall"].append(rating)
    if not out.has_references:
        out.notes = "some captions have no references: reference-free metrics only"
    return out


@register_dataset("flickr8k-expert", default_protocol="flickr8k-expert-rows",
                  file="flickr8k.json (CLIPScore)",
                  description="Flickr8k-Expert: 5,664 captions x 3 expert ratings (1-4)")
def load_flickr8k_expert(path: Path) -> MetaDataset:
    """Flickr8k-Expert in CLIPScore's ``flickr8k.json`` (ratings 1-4)."""
    return load_clipscore_json(path, "flickr8k-expert", (1.0, 4.0))


@register_dataset("flickr8k-cf", default_protocol="flickr8k-cf-rows",
                  file="crowdflower_flickr8k.json (CLIPScore)",
                  description="Flickr8k-CrowdFlower: share of yes votes per caption (0-1)")
def load_flickr8k_cf(path: Path) -> MetaDataset:
    """Flickr8k-CF in CLIPScore's ``crowdflower_flickr8k.json`` (rating: share of yes, 0-1)."""
    return load_clipscore_json(path, "flickr8k-cf", (0.0, 1.0))


@register_dataset("composite", default_protocol="composite-rows", has_references=False,
                  file="composite.json (FLEUR/EXPERT)",
                  description="Composite (Flickr8k/30k, COCO): one rating per row")
def load_composite(path: Path) -> MetaDataset:
    """Composite: FLEUR/EXPERT's ``composite.json`` or a CLIPScore-format conversion.

    The FLEUR/EXPERT file is ``{"flickr8k"|"flickr30k"|"coco": [{image, caption, human}]}`` and
    carries no references, so only reference-free metrics apply to it. Consecutive rows of the
    same (image, caption) become one candidate with several ratings.
    """
    data = _mapping(path, _json(path), "composite",
                    '{"flickr8k"|"flickr30k"|"coco": [{image, caption, human}]} or the '
                    "CLIPScore format")
    if not data or not all(isinstance(v, list) for v in data.values()):
        return load_clipscore_json(path, "composite")
    out = MetaDataset("composite", notes="FLEUR/EXPERT composite.json carries no references: "
                                         "reference-free metrics only")
    for source, rows in data.items():
        current: Candidate | None = None
        for n, row in enumerate(rows):
            where = f"{source!r} row {n}"
            image = _text(path, where, _field(path, where, row, "image"), "image")
            caption = _text(path, where, _field(path, where, row, "caption"), "caption")
            rating = _number(path, where, _field(path, where, row, "human"), "human")
            if current is None or (current.image, current.candidate) != (image, caption):
                current = Candidate(key=f"{source}:{n}", candidate=caption, references=[],
                                    ratings={"overall": []}, image=image, system=source,
                                    group=f"{source}:{image}")
                out.candidates.append(current)
            current.ratings["overall"].append(rating)
    return out


@register_dataset("thumb", default_protocol="thumb-with-human",
                  file="mscoco_THumB-1.0.jsonl (+ mscoco_references.json beside it)",
                  description="THumB 1.0 (MSCOCO): P, R, penalties and total per caption")
def load_thumb(path: Path) -> MetaDataset:
    """THumB 1.0 (MSCOCO): P, R, penalties and total per caption (one annotation each)."""
    rows = _jsonl(path)
    ref_path = path.with_name(path.name.replace("THumB-1.0.jsonl", "references.json"))
    refs: dict[str, list[str]] = {}
    if ref_path != path and ref_path.is_file():
        for n, r in _jsonl(ref_path):
            where = f"line {n}"
            seg = str(_field(ref_path, where, r, "seg_id"))
            refs[seg] = _texts(ref_path, where, _field(ref_path, where, r, "refs"), "refs")
    out = MetaDataset("thumb", notes="" if refs else
                      f"no references file at {ref_path}: reference-free metrics only")
    for n, r in rows:
        where = f"line {n}"
        seg = str(_field(path, where, r, "seg_id"))
        system = _text(path, where, _field(path, where, r, "SYS"), "SYS")
        out.candidates.append(Candidate(
            key=f"{seg}:{system}", candidate=_text(path, where, _field(path, where, r, "hyp"),
                                                   "hyp"),
            references=refs.get(seg, []),
            ratings={"overall": [_number(path, where, _field(path, where, r, "human_score"),
                                         "human_score")],
                     "precision": [_number(path, where, _field(path, where, r, "P"), "P")],
                     "recall": [_number(path, where, _field(path, where, r, "R"), "R")]},
            image=r.get("image"), system=system, group=seg))
    if refs and not out.has_references:
        missing = sum(not c.references for c in out.candidates)
        out.notes = f"{missing} captions have no references in {ref_path.name}"
    return out


@register_dataset("pascal50s", default_protocol="pascal50s", pairwise=True,
                  file="pascal_50s.json (FLEUR/EXPERT)",
                  description="Pascal-50S: 4,000 caption pairs (HC/HI/HM/MM), 5 references")
def load_pascal50s(path: Path) -> MetaDataset:
    """Pascal-50S as FLEUR/EXPERT publish it (``label``: index of the preferred caption)."""
    data = _mapping(path, _json(path), "pascal50s",
                    "{HC|HI|HM|MM: [{captions: [a, b], label, references}]}")
    out = MetaDataset("pascal50s")
    for category, entries in data.items():
        if not isinstance(entries, list):
            raise _err(path, f"category {category!r}", "expected a list of pairs")
        for i, e in enumerate(entries):
            where = f"{category} entry {i}"
            captions = _texts(path, where, _field(path, where, e, "captions"), "captions")
            if len(captions) != 2:
                raise _err(path, where, f"captions has {len(captions)} entries, expected 2")
            label = _number(path, where, _field(path, where, e, "label"), "label")
            if label not in (0.0, 1.0):
                raise _err(path, where, f"label must be 0 or 1, got {label:g}")
            out.pairs.append(Pair(key=f"{category}-{i}", a=captions[0], b=captions[1],
                                  references=_texts(path, where,
                                                    _field(path, where, e, "references"),
                                                    "references"),
                                  prefers_a=label == 0.0, category=category,
                                  image=e.get("image")))
    return out


def _coco_references(path: Path) -> tuple[dict[Any, list[str]], Path | None]:
    """COCO captions per image id from ``captions_val2014.json`` near the FOIL file."""
    for candidate in (path.with_name("captions_val2014.json"),
                      path.parent / "annotations" / "captions_val2014.json",
                      path.parent.parent / "annotations" / "captions_val2014.json"):
        if candidate.is_file():
            data = _mapping(candidate, _json(candidate), "COCO captions",
                            "{annotations: [{image_id, caption}]}")
            annotations = _field(candidate, "", data, "annotations")
            if not isinstance(annotations, list):
                raise _err(candidate, "annotations", "expected a list")
            refs: dict[Any, list[str]] = {}
            for n, ann in enumerate(annotations):
                where = f"annotation {n}"
                image_id = _field(candidate, where, ann, "image_id")
                caption = _text(candidate, where, _field(candidate, where, ann, "caption"),
                                "caption")
                refs.setdefault(image_id, []).append(caption)
            return refs, candidate
    return {}, None


@register_dataset("foil", default_protocol="foil", pairwise=True,
                  file="foilv1.0_test_2017.json (+ COCO captions_val2014.json beside it)",
                  description="FOIL-COCO: a correct caption vs its foiled version")
def load_foil(path: Path) -> MetaDataset:
    """FOIL-COCO: pairs (correct caption, foiled caption), the correct one preferred.

    Reads the published COCO-style file (annotations sharing an ``id`` are one original and its
    foils). References are the image's COCO captions without the original one, as DENEB and
    PAC-S do, from ``captions_val2014.json`` beside the file; without it the pairs have no
    references. A JSON list of {image, caption, foil, references} is read too.
    """
    data = _json(path)
    expected = ("the COCO-style FOIL file {images, annotations: [{id, image_id, caption, "
                "foil}]} or a list of {caption, foil, references}")
    if isinstance(data, list):
        return _foil_list(path, data)
    if not isinstance(data, dict) or "annotations" not in data:
        raise _shape_error(path, "foil", expected)
    annotations = data["annotations"]
    if not isinstance(annotations, list):
        raise _err(path, "annotations", "expected a list")
    files = {}
    for img in data.get("images") or []:
        if isinstance(img, dict) and "id" in img:
            files[img["id"]] = img.get("file_name")
    coco, coco_path = _coco_references(path)
    groups: dict[Any, dict[str, list[tuple[Any, str]]]] = {}
    for n, ann in enumerate(annotations):
        where = f"annotation {n}"
        ann_id = _field(path, where, ann, "id")
        where = f"annotation {n} (id {ann_id!r})"
        image_id = _field(path, where, ann, "image_id")
        caption = _text(path, where, _field(path, where, ann, "caption"), "caption")
        is_foil = _field(path, where, ann, "foil")
        if not isinstance(is_foil, bool):
            raise _err(path, where, f"foil must be true or false, got {_preview(is_foil)}")
        group = groups.setdefault(ann_id, {"orig": [], "foil": []})
        group["foil" if is_foil else "orig"].append((image_id, caption))
    out = MetaDataset("foil", notes="pairs: the correct caption vs its foiled version")
    if coco_path is None:
        out.notes += ("; no COCO captions_val2014.json beside the file, so no references: "
                      "reference-free metrics only")
    for ann_id, group in groups.items():
        if len(group["orig"]) != 1:
            raise _err(path, f"annotation id {ann_id!r}",
                       f"{len(group['orig'])} original captions, expected 1")
        image_id, original = group["orig"][0]
        # The original caption is one of the image's COCO captions: leave it out of the refs.
        refs = [r for r in coco.get(image_id, []) if r != original]
        for j, (_, foiled) in enumerate(group["foil"]):
            out.pairs.append(Pair(key=f"{ann_id}-{j}", a=original, b=foiled, references=refs,
                                  prefers_a=True, image=files.get(image_id) or str(image_id)))
    return out


def _foil_list(path: Path, data: list[Any]) -> MetaDataset:
    out = MetaDataset("foil", notes="pairs: the correct caption vs its foiled version")
    for i, e in enumerate(data):
        where = f"entry {i}"
        out.pairs.append(Pair(
            key=str(e.get("id", i)) if isinstance(e, dict) else str(i),
            a=_text(path, where, _field(path, where, e, "caption"), "caption"),
            b=_text(path, where, _field(path, where, e, "foil"), "foil"),
            references=_texts(path, where, _field(path, where, e, "references"), "references",
                              min_len=0),
            prefers_a=True, image=e.get("image")))
    return out


VATEX_ANNOTATORS = 3  # VATEX-EVAL: every candidate rated by the same 3 annotators


def _vatex_refs(path: Path, where: str, value: Any) -> list[str]:
    """``refs``: [[9 strings]] as published, or a plain list of strings."""
    if isinstance(value, str):
        value = _literal(path, where, value, "refs")
    if isinstance(value, list) and value and all(isinstance(r, list) for r in value):
        first = value[0]
        if any(r != first for r in value[1:]):
            raise _err(path, where, f"refs holds {len(value)} different reference lists, "
                                    "expected one")
        value = first
    return _texts(path, where, value, "refs")


@register_dataset("vatex-eval", default_protocol="vatex-eval-emscore",
                  file="vid_cans_score_dict.json (EMScore)",
                  description="VATEX-EVAL: 6 candidates per video x 3 ratings (1-5), 9 refs")
def load_vatex_eval(path: Path) -> MetaDataset:
    """VATEX-EVAL's ``vid_cans_score_dict.json`` (the file EMScore-derived code reads).

    Each video maps to ``{vid, cands, refs: [[...]], scores}`` where ``scores`` is a *string*
    holding one ``[a1, a2, a3]`` row per candidate (a list is accepted too). Rating ``k`` of every
    candidate is annotator ``k``'s, which the per-annotator protocol relies on.
    """
    data = _mapping(path, _json(path), "vatex-eval",
                    "an object keyed by video id: {cands, refs, scores}")
    out = MetaDataset("vatex-eval")
    for vid, e in data.items():
        where = f"video {vid!r}"
        cands = _texts(path, where, _field(path, where, e, "cands"), "cands")
        refs = _vatex_refs(path, where, _field(path, where, e, "refs"))
        scores = _score_matrix(path, where, _field(path, where, e, "scores"), "scores")
        if len(scores) != len(cands):
            raise _err(path, where, f"scores has {len(scores)} rows for {len(cands)} cands")
        for j, (cand, row) in enumerate(zip(cands, scores, strict=True)):
            row_where = f"{where}, candidate {j}"
            if len(row) != VATEX_ANNOTATORS:
                raise _err(path, row_where, f"{len(row)} ratings, expected {VATEX_ANNOTATORS} "
                                            "(one per annotator)")
            ratings = [_number(path, row_where, v, "rating", lo=1, hi=5) for v in row]
            out.candidates.append(Candidate(key=f"{vid}#{j}", candidate=cand, references=refs,
                                            ratings={"overall": ratings}, image=str(vid),
                                            group=str(vid)))
    return out


MSVD_CRITERIA = ("accuracy", "completeness", "conciseness", "relevance", "overall")


@register_dataset("msvd-eval", default_protocol="msvd-eval", file="MSVD-Eval.json (G-VEval)",
                  description="MSVD-Eval: ACCR ratings (1-5) from 2 annotators per video")
def load_msvd_eval(path: Path) -> MetaDataset:
    """G-VEval's ``MSVD-Eval.json``.

    Per annotator: [accuracy, completeness, conciseness, relevance, average].
    """
    data = _mapping(path, _json(path), "msvd-eval",
                    "an object keyed by video id: {ref, candidate, human_score}")
    out = MetaDataset("msvd-eval")
    for vid, e in data.items():
        where = f"video {vid!r}"
        human = _score_matrix(path, where, _field(path, where, e, "human_score"), "human_score")
        if not human:
            raise _err(path, where, "human_score is empty")
        ratings: dict[str, list[float]] = {n: [] for n in MSVD_CRITERIA}
        for k, annotator in enumerate(human):
            if len(annotator) != len(MSVD_CRITERIA):
                raise _err(path, f"{where}, annotator {k}",
                           f"{len(annotator)} values, expected {len(MSVD_CRITERIA)} "
                           "(accuracy, completeness, conciseness, relevance, average)")
            for n, v in zip(MSVD_CRITERIA, annotator, strict=True):
                ratings[n].append(_number(path, f"{where}, annotator {k}", v, n, lo=1, hi=5))
        out.candidates.append(Candidate(
            key=str(vid), candidate=_text(path, where, _field(path, where, e, "candidate"),
                                          "candidate"),
            references=_texts(path, where, _field(path, where, e, "ref"), "ref"),
            ratings=ratings, image=e.get("vname"), group=str(vid)))
    return out


def _caption_rows(path: Path, name: str) -> list[tuple[str, Any]]:
    """(where, row) of a CSV, JSON-list or JSONL file of caption rows (Polaris, Nebula)."""
    if path.suffix.lower() == ".csv":
        return [(f"line {n}", row) for n, row in _csv(path, ("mt",))]
    text = _read_text(path)
    if path.suffix.lower() != ".jsonl":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if text.lstrip().startswith("["):
                raise DatasetError(f"{path}: not valid JSON ({exc})") from exc
            data = None  # several objects, one a line: JSONL
        if isinstance(data, list):
            return [(f"entry {i}", row) for i, row in enumerate(data)]
        if data is not None and not (isinstance(data, dict) and len(text.strip().splitlines())
                                     == 1):
            raise _shape_error(path, name, "a JSON list of caption rows, a CSV or JSONL")
    return [(f"line {n}", row) for n, row in _jsonl(path)]


@register_dataset("polaris", default_protocol="polaris",
                  file="polaris_test.csv (Polos; one row per annotator)",
                  description="Polaris: 0-1 ratings of single annotators, 1-22 per caption")
def load_polaris(path: Path) -> MetaDataset:
    """Polaris as Polos publishes it: ``polaris_{train,val,test}.csv``.

    Columns ``imgid, mt, refs, score`` (``refs`` a Python list literal). Every row is one
    annotator's rating in [0, 1]; rows of the same (image, caption) become one candidate with
    several ratings. JSONL or a JSON list with the same fields (``img`` for ``imgid``, ``cand``
    for ``mt``, ``human_score`` for ``score``) is read too.
    """
    rows = _caption_rows(path, "polaris")
    out = MetaDataset("polaris")
    by_key: dict[tuple[Any, str], Candidate] = {}
    for i, (where, r) in enumerate(rows):
        refs_value = _field(path, where, r, "refs", required=False)
        if refs_value is None:
            if isinstance(r, dict) and "count" in r:
                raise _err(path, where, "no 'refs': this is the Polaris JSON form (EXPERT's "
                                        "polaris_test.json); load it as --dataset polaris-json")
            _field(path, where, r, "refs")  # raises: missing key 'refs'
        refs = _texts(path, where, refs_value, "refs")
        mt = _text(path, where, _field(path, where, r, "mt", "cand"), "mt")
        score = _number(path, where, _field(path, where, r, "score", "human_score"), "score",
                        lo=0, hi=1)
        image = _field(path, where, r, "imgid", "img", required=False)
        image = str(image) if image not in (None, "") else None
        # Without an image id, the references identify the image.
        key = (image if image is not None else tuple(refs), mt)
        current = by_key.get(key)
        if current is None:
            current = Candidate(key=str(i), candidate=mt, references=refs,
                                ratings={"overall": []}, image=image, group=image)
            by_key[key] = current
            out.candidates.append(current)
        current.ratings["overall"].append(score)
    return out


@register_dataset("polaris-json", default_protocol="polaris-json", has_references=False,
                  file="polaris_test.json (EXPERT; no references)",
                  description="Polaris, EXPERT's JSON: mean rating of `count` annotators, no refs")
def load_polaris_json(path: Path) -> MetaDataset:
    """Polaris in EXPERT's JSON form: ``[{id, imgid, mt, score, count, ...}]``.

    ``score`` is the mean of ``count`` annotators' ratings (0-1). The form carries no
    references, so reference-based metrics cannot be computed on it (references are kept if an
    entry happens to have them).
    """
    data = _json(path)
    if not isinstance(data, list):
        raise _shape_error(path, "polaris-json", "a JSON list of {id, imgid, mt, score, count}")
    out = MetaDataset("polaris-json", notes="the Polaris JSON form (EXPERT) carries no "
                                            "references: reference-free metrics only")
    for i, r in enumerate(data):
        where = f"entry {i}"
        key = _field(path, where, r, "id", required=False)
        where = f"entry {i} (id {key!r})" if key is not None else where
        count = _field(path, where, r, "count", required=False)
        if count is not None:
            n = _number(path, where, count, "count", lo=1)
            if n != int(n):
                raise _err(path, where, f"count must be a whole number, got {count!r}")
        refs_value = _field(path, where, r, "refs", required=False)
        image = _field(path, where, r, "imgid", required=False)
        out.candidates.append(Candidate(
            key=str(key if key is not None else i),
            candidate=_text(path, where, _field(path, where, r, "mt"), "mt"),
            references=[] if refs_value is None else _texts(path, where, refs_value, "refs"),
            ratings={"overall": [_number(path, where, _field(path, where, r, "score"), "score",
                                         lo=0, hi=1)]},
            image=None if image is None else str(image),
            group=None if image is None else str(image)))
    if out.has_references:
        out.notes = ""
    return out


@register_dataset("nebula", default_protocol="nebula", file="nebula_test.json (EXPERT)",
                  description="Nebula: mean human rating (0-1) per caption, 5 references")
def load_nebula(path: Path) -> MetaDataset:
    """Nebula: ``[{imgid, mt, refs: [5 strings], score}]`` (``score``: mean rating in [0, 1]).

    A CSV or JSONL with the same columns (``refs`` as a list literal) is read too. Some images
    have more than 5 references in the published file; all are kept.
    """
    out = MetaDataset("nebula")
    for i, (where, r) in enumerate(_caption_rows(path, "nebula")):
        image = _field(path, where, r, "imgid", "img", required=False)
        out.candidates.append(Candidate(
            key=str(i), candidate=_text(path, where, _field(path, where, r, "mt"), "mt"),
            references=_texts(path, where, _field(path, where, r, "refs"), "refs"),
            ratings={"overall": [_number(path, where,
                                         _field(path, where, r, "score", "human_score"),
                                         "score", lo=0, hi=1)]},
            image=None if image is None else str(image),
            group=None if image is None else str(image)))
    return out


@register_dataset("mmhe", default_protocol="mmhe", has_references=False,
                  file="MMHE JSONL (capjudge's layout; HarmonicEval's release format unknown)",
                  description="MMHE: 5 criteria x 3 expert ratings over 4 tasks")
def load_mmhe(path: Path) -> MetaDataset:
    """MMHE (HarmonicEval) as JSONL: {id, task, image, question, candidate, group, scores}."""
    out = MetaDataset("mmhe")
    for n, r in _jsonl(path):
        where = f"line {n}"
        scores = _field(path, where, r, "scores")
        if not isinstance(scores, dict) or not scores:
            raise _err(path, where, f"scores must be an object {{criterion: [ratings]}}, got "
                                    f"{_preview(scores)}")
        ratings = {}
        for crit, values in scores.items():
            if not isinstance(values, list) or not values:
                raise _err(path, where, f"scores[{crit!r}] must be a non-empty list")
            ratings[str(crit)] = [_number(path, where, v, f"scores[{crit!r}]") for v in values]
        refs = _field(path, where, r, "references", required=False)
        out.candidates.append(Candidate(
            key=str(_field(path, where, r, "id")),
            candidate=_text(path, where, _field(path, where, r, "candidate"), "candidate"),
            references=[] if refs is None else _texts(path, where, refs, "references",
                                                      min_len=0),
            ratings=ratings, image=r.get("image"), system=r.get("system"), group=r.get("group"),
            question=r.get("question")))
    return out
