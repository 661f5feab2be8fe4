"""``foil``: FOIL-COCO: a correct caption vs its foiled version.

Its loader, what the registry knows about it and its scoring protocols.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from capjudge.metaeval.datasets import DatasetSpec, MetaDataset, Pair, Protocol
from capjudge.metaeval.datasets.reading import (
    error_at,
    field,
    mapping,
    preview,
    read_json,
    shape_error,
    text,
    texts,
)


def _coco_references(path: Path) -> tuple[dict[Any, list[str]], Path | None]:
    """COCO captions per image id from ``captions_val2014.json`` near the FOIL file."""
    for candidate in (path.with_name("captions_val2014.json"),
                      path.parent / "annotations" / "captions_val2014.json",
                      path.parent.parent / "annotations" / "captions_val2014.json"):
        if candidate.is_file():
            data = mapping(candidate, read_json(candidate), "COCO captions",
                           "{annotations: [{image_id, caption}]}")
            annotations = field(candidate, "", data, "annotations")
            if not isinstance(annotations, list):
                raise error_at(candidate, "annotations", "expected a list")
            refs: dict[Any, list[str]] = {}
            for n, ann in enumerate(annotations):
                where = f"annotation {n}"
                image_id = field(candidate, where, ann, "image_id")
                caption = text(candidate, where, field(candidate, where, ann, "caption"),
                               "caption")
                refs.setdefault(image_id, []).append(caption)
            return refs, candidate
    return {}, None


def _foil_list(path: Path, data: list[Any]) -> MetaDataset:
    out = MetaDataset("foil", notes="pairs: the correct caption vs its foiled version")
    for i, e in enumerate(data):
        where = f"entry {i}"
        out.pairs.append(Pair(
            key=str(e.get("id", i)) if isinstance(e, dict) else str(i),
            a=text(path, where, field(path, where, e, "caption"), "caption"),
            b=text(path, where, field(path, where, e, "foil"), "foil"),
            references=texts(path, where, field(path, where, e, "references"), "references",
                             min_len=0),
            prefers_a=True, image=e.get("image")))
    return out


def load_foil(path: Path) -> MetaDataset:
    """FOIL-COCO: pairs (correct caption, foiled caption), the correct one preferred.

    Reads the published COCO-style file (annotations sharing an ``id`` are one original and its
    foils). References are the image's COCO captions without the original one, as DENEB and
    PAC-S do, from ``captions_val2014.json`` beside the file; without it the pairs have no
    references. A JSON list of {image, caption, foil, references} is read too.
    """
    data = read_json(path)
    expected = ("the COCO-style FOIL file {images, annotations: [{id, image_id, caption, "
                "foil}]} or a list of {caption, foil, references}")
    if isinstance(data, list):
        return _foil_list(path, data)
    if not isinstance(data, dict) or "annotations" not in data:
        raise shape_error(path, "foil", expected)
    annotations = data["annotations"]
    if not isinstance(annotations, list):
        raise error_at(path, "annotations", "expected a list")
    files = {}
    for img in data.get("images") or []:
        if isinstance(img, dict) and "id" in img:
            files[img["id"]] = img.get("file_name")
    coco, coco_path = _coco_references(path)
    groups: dict[Any, dict[str, list[tuple[Any, str]]]] = {}
    for n, ann in enumerate(annotations):
        where = f"annotation {n}"
        ann_id = field(path, where, ann, "id")
        where = f"annotation {n} (id {ann_id!r})"
        image_id = field(path, where, ann, "image_id")
        caption = text(path, where, field(path, where, ann, "caption"), "caption")
        is_foil = field(path, where, ann, "foil")
        if not isinstance(is_foil, bool):
            raise error_at(path, where, f"foil must be true or false, got {preview(is_foil)}")
        group = groups.setdefault(ann_id, {"orig": [], "foil": []})
        group["foil" if is_foil else "orig"].append((image_id, caption))
    out = MetaDataset("foil", notes="pairs: the correct caption vs its foiled version")
    if coco_path is None:
        out.notes += ("; no COCO captions_val2014.json beside the file, so no references: "
                      "reference-free metrics only")
    for ann_id, group in groups.items():
        if len(group["orig"]) != 1:
            raise error_at(path, f"annotation id {ann_id!r}",
                           f"{len(group['orig'])} original captions, expected 1")
        image_id, original = group["orig"][0]
        # The original caption is one of the image's COCO captions: leave it out of the refs.
        refs = [r for r in coco.get(image_id, []) if r != original]
        for j, (_, foiled) in enumerate(group["foil"]):
            out.pairs.append(Pair(key=f"{ann_id}-{j}", a=original, b=foiled, references=refs,
                                  prefers_a=True, image=files.get(image_id) or str(image_id)))
    return out


SPEC = DatasetSpec(
    name="foil",
    loader=load_foil,
    default_protocol="foil",
    pairwise=True,
    file="foilv1.0_test_2017.json (+ COCO captions_val2014.json beside it)",
    description="FOIL-COCO: a correct caption vs its foiled version",
    protocols=(
        Protocol("foil", "foil", "pairs", headline="accuracy", pairwise=True,
                 description="accuracy of preferring the correct caption over its foil (ties "
                             "wrong), all references (COCO captions without the original)"),
        Protocol("foil-1ref", "foil", "pairs", headline="accuracy", pairwise=True, refs=1,
                 description="as foil with the first reference only (PAC-S, DENEB one-ref)"),
        Protocol("foil-4refs", "foil", "pairs", headline="accuracy", pairwise=True, refs=4,
                 description="as foil with 4 references (PAC-S, DENEB four-ref)"),
    ),
)
