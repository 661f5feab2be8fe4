"""The ingest stage: validate a manifest, hash and check every media file, sample video frames.

Outputs (in ``out_dir``):

- ``items.parquet``: one row per valid item (see :data:`ITEMS_SCHEMA`).
- ``quarantine.parquet``: ``id``, ``line``, ``reason``, ``raw`` for every rejected row.
- ``capjudge.duckdb``: both tables, for later stages to join against.
- ``tiles/``: labelled frame/view tiles, named by content hash and policy.
- ``judge_images/``: normalised copies of images a vision API would not take as they are
  (CMYK, 16-bit, animated, palette, EXIF-rotated, ...), named by their own content hash.
- ``summary.json``: counts (items by kind, quarantined by reason).

A bad row never stops the stage and is never dropped silently: it is quarantined with a
readable reason. Only a manifest that cannot be read at all raises :class:`ManifestError`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypedDict, cast

import pyarrow.parquet as pq

from capjudge.manifest import (
    FieldLimits,
    ManifestError,
    ValidRow,
    read_dataset_card,
    read_rows,
    safe_text,
    validate_fields,
)
from capjudge.media import (
    ImageInfo,
    JudgeImage,
    MediaError,
    SampledTile,
    check_image,
    frame_file,
    frame_indices,
    prepare_judge_image,
    sample_video_tile_isolated,
    sha256_file,
    sha256_text,
    tile_views,
)
from capjudge.records import ItemRow, QuarantineRow
from capjudge.stage_files import QUARANTINE, items_file, summary_file
from capjudge.util.atomic import (
    OUTPUT_ERRNOS,
    OutputWriteError,
    atomic_path,
    clean_orphans,
    stage_outputs,
    write_json,
    write_text,
)
from capjudge.util.unicode_text import look_alike_key

log = logging.getLogger(__name__)

ITEMS_SCHEMA = ItemRow.schema()
"""The columns of ``items.parquet`` (:class:`capjudge.records.ItemRow`)."""

# Rows per row group of items.parquet (about 1 MB of items).
ITEMS_ROW_GROUP = 1024


_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
# Checked before _URL, which would otherwise call C:\images\a.jpg a URL with scheme "C".
_WINDOWS_DRIVE = re.compile(r"^[a-zA-Z]:")
_WINDOWS_UNC = re.compile(r"^\\\\[^\\]")


# The most frames a uniform tile may hold: the tile is one picture sent to a judge, and the
# decoder holds every sampled frame (100,000 frames asked of a 24-frame clip grew it to 23 GB).
MAX_FRAMES = 64


@dataclass(frozen=True)
class IngestConfig:
    """Ingest settings (``params.yaml: ingest``)."""

    frame_policy: str = "first_middle_last"
    uniform_frames: int = 3
    decode_timeout_s: float = 60.0
    # The longest candidate accepted, in characters (None: no limit). A candidate of megabytes
    # would be sent whole in one prompt (cost, context overflow); it is quarantined, never cut.
    max_candidate_chars: int | None = 20_000
    # The same for references, which are sent in the prompt too: the longest reference, and
    # how many references a row may have (None: no limit).
    max_reference_chars: int | None = 20_000
    max_references: int | None = 100
    # Declared label scales ({"overall": [1, 5]}): a label outside its scale is quarantined;
    # labels without one must lie within +-1e6 (manifest.MAX_ABS_LABEL).
    label_scales: dict[str, list[float]] | None = None

    def __post_init__(self) -> None:
        """Refuse settings out of range (one-line messages; the CLI exits 2 on them).

        Raises:
            ValueError: an unknown frame policy, frames outside 1..:data:`MAX_FRAMES`, a
                decode timeout that is not a positive number, or a limit below 1.
        """
        from capjudge.media import FRAME_POLICIES

        if self.frame_policy not in FRAME_POLICIES:
            raise ValueError(f"frame_policy must be one of {', '.join(FRAME_POLICIES)}, got "
                             f"{self.frame_policy!r}")
        frames = self.uniform_frames
        if isinstance(frames, bool) or not isinstance(frames, int) \
                or not 1 <= frames <= MAX_FRAMES:
            raise ValueError(f"uniform_frames (--frames) must be an integer in 1..{MAX_FRAMES}, "
                             f"got {frames!r}")
        timeout = self.decode_timeout_s
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
                or not math.isfinite(timeout) or timeout <= 0:
            raise ValueError("decode_timeout_s (--decode-timeout) must be a number > 0, got "
                             f"{timeout!r}")
        for name in ("max_candidate_chars", "max_reference_chars", "max_references"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ValueError(f"{name} must be an integer >= 1 (or null: no limit), got "
                                 f"{value!r}")
        self.limits()  # a malformed label_scales fails here

    def limits(self) -> FieldLimits:
        """The manifest caps of these settings.

        Raises:
            ValueError: ``label_scales`` is not a mapping of name -> [low, high].
        """
        scales: dict[str, tuple[float, float]] = {}
        for name, scale in (self.label_scales or {}).items():
            try:
                low, high = (float(v) for v in scale)
            except (TypeError, ValueError):
                raise ValueError(f"label_scales.{name} must be [low, high], got {scale!r}"
                                 ) from None
            if not (math.isfinite(low) and math.isfinite(high) and low <= high):
                raise ValueError(f"label_scales.{name} must be finite with low <= high, got "
                                 f"{scale!r}")
            scales[str(name)] = (low, high)
        return FieldLimits(self.max_reference_chars, self.max_references, scales)


@dataclass
class IngestResult:
    """Counts returned to the CLI / flow."""

    n_rows: int
    n_items: int
    n_quarantined: int
    by_kind: dict[str, int]
    reasons: dict[str, int]
    out_dir: str


def nothing_ingested(result: IngestResult, media_root: str | Path) -> str | None:
    """Why a run must stop after ingest, or None: every row of a manifest was quarantined.

    Judging nothing and reporting an empty evaluation would pass for a run that worked (a
    wrong media root quarantines every row as "file not found"); the message names the most
    frequent reasons, where media paths were looked for, and the quarantine table.
    """
    if result.n_rows == 0 or result.n_items > 0:
        return None
    reasons = sorted(result.reasons.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = "; ".join(f"{n} x {why}" for why, n in reasons[:3])
    more = f"; and {len(reasons) - 3} other reason(s)" if len(reasons) > 3 else ""
    hint = ""
    if any(why.startswith("file not found") for why, _ in reasons):
        hint = (f". Media paths resolve under the media root {str(media_root)!r} "
                "(params.yaml ingest.media_root; capjudge init --media-root)")
    return (f"every one of the {result.n_rows} manifest rows was quarantined, nothing to "
            f"judge ({shown}{more}){hint}. Each row's reason: "
            f"{Path(result.out_dir) / QUARANTINE}")


def _look_alike_file(full: Path) -> str:
    """A hint naming a file in the same folder whose name differs only in its Unicode form."""
    try:
        siblings = list(full.parent.iterdir()) if full.parent.is_dir() else []
    except OSError:
        return ""
    wanted = look_alike_key(full.name)
    same = [p.name for p in siblings if p.name != full.name and look_alike_key(p.name) == wanted]
    if not same:
        return ""
    return (f" (a file named {same[0]!r} is there: the same name in another Unicode form "
            f"or with invisible characters, {ascii(same[0])} on disk; write the name as it "
            "is on disk)")


def resolve_media(media_root: Path, value: str) -> Path:
    """Resolve a manifest path under the media root, refusing anything that escapes it.

    Symlinks are resolved before the check, so a link pointing outside the root is refused too.

    Raises:
        MediaError: URL, Windows path on another system, escape from the root, missing or
            non-regular file.
    """
    if os.name != "nt":
        # A manifest written on Windows: say so rather than "URL" or "file not found".
        if _WINDOWS_DRIVE.match(value):
            raise MediaError(f"absolute Windows path, not resolvable here: {value!r} "
                             "(use a path relative to the media root)")
        if _WINDOWS_UNC.match(value):
            raise MediaError(f"Windows network (UNC) path, not resolvable here: {value!r} "
                             "(use a path relative to the media root)")
    if _URL.match(value) and not (_WINDOWS_DRIVE.match(value) and os.name == "nt"):
        raise MediaError(f"URLs are not allowed as media paths: {value!r}")
    root = media_root.resolve()
    candidate = Path(value)
    try:
        full = (candidate if candidate.is_absolute() else root / candidate).resolve()
    except (RuntimeError, OSError) as exc:
        # Python raises RuntimeError("Symlink loop ...") (OSError ELOOP in newer versions):
        # that row is quarantined with the reason; the stage goes on.
        raise MediaError(f"symlink loop or unresolvable path: {value!r} "
                         f"({type(exc).__name__})") from None
    if full != root and root not in full.parents:
        raise MediaError(f"path escapes the media root: {value!r}")
    if not full.exists():
        hint = " (backslashes are not path separators here; use '/')" \
            if "\\" in value and os.sep != "\\" else _look_alike_file(full)
        raise MediaError(f"file not found: {value!r}{hint}")
    if not full.is_file():
        raise MediaError(f"not a regular file: {value!r}")
    if full.stat().st_size == 0:
        raise MediaError(f"zero-byte file: {value!r}")
    return full


class VideoTile(TypedDict):
    """A video's frame tile and its facts (the tile's JSON sidecar in ``tiles/``)."""

    tile_path: str
    tile_sha256: str
    policy: str
    """The frame policy, ``uniform<N>`` for the uniform one."""
    indices: list[int]
    timestamps_s: list[float]
    width: int
    height: int
    n_frames: int
    fps: float
    duration_s: float
    codec: str
    frame_paths: list[str]
    """Each sampled frame on its own, beside the tile (:func:`capjudge.media.frame_file`)."""
    frame_sha256: list[str]


class TileCache:
    """Frame and view tiles keyed by (content hash, policy), shared by ingest and `capjudge score`.

    Tiles are files named by the media's content hash and the policy, never by file name, so two
    clips called `clip.mp4` in different folders never share a tile; sampled video tiles are also
    remembered in memory for repeated media within one run.
    """

    def __init__(self, tiles_dir: Path, config: IngestConfig,
                 judge_dir: Path | None = None,
                 video_failures: dict[str, str] | None = None) -> None:
        self.dir = tiles_dir
        self.config = config
        self.judge_dir = judge_dir or tiles_dir.parent / "judge_images"
        self.videos: dict[tuple[str, str], VideoTile] = {}
        self.judge_images: dict[str, JudgeImage] = {}
        # Videos (by content hash) whose sampling already failed in this run, e.g. in the
        # parallel pre-pass of the ingest flow: their reason is reused rather than paying the
        # decode timeout twice.
        self.video_failures = dict(video_failures or {})

    def judge_image(self, path: Path, sha: str, info: ImageInfo) -> JudgeImage:
        """The file to send to a judge for an image: itself, or its normalised copy.

        Args:
            path: the checked image file.
            sha: its content hash (copies are remembered by it within a run).
            info: its :func:`check_image` result.
        """
        if sha not in self.judge_images:
            self.judge_images[sha] = prepare_judge_image(path, sha, self.judge_dir, info)
        return self.judge_images[sha]

    def video(self, path: Path, sha: str) -> VideoTile:
        """The frame tile of a video under the configured policy, made or reused.

        Args:
            path: the video file.
            sha: its content hash (tiles are named and remembered by it and the policy).

        Returns:
            The tile's metadata (path, hash, policy, frame indices and timestamps, ...).

        Raises:
            MediaError: the video's sampling failed (also in an earlier pass of this run).
        """
        policy = self.config.frame_policy
        if policy == "uniform":
            policy = f"uniform{self.config.uniform_frames}"
        key = (sha, policy)
        if key in self.videos:
            return self.videos[key]
        if sha in self.video_failures:
            raise MediaError(self.video_failures[sha])
        tile = self.dir / f"{sha}-{policy}.png"
        sidecar = tile.with_suffix(".json")
        if tile.is_file() and sidecar.is_file():
            cached = self._reuse(tile, sidecar)
            if cached is not None:
                self.videos[key] = cached
                return cached
        result: SampledTile = sample_video_tile_isolated(
            str(path), str(tile), self.config.frame_policy, self.config.uniform_frames,
            self.config.decode_timeout_s,
        )
        info = result.info
        meta: VideoTile = {
            "tile_path": str(tile), "tile_sha256": result.tile_sha256, "policy": policy,
            "indices": result.indices, "timestamps_s": result.timestamps_s,
            "width": info.width, "height": info.height, "n_frames": info.n_frames,
            "fps": info.fps, "duration_s": info.duration_s, "codec": info.codec,
            "frame_paths": result.frame_paths, "frame_sha256": result.frame_sha256,
        }
        write_text(sidecar, json.dumps(meta, indent=1))
        self.videos[key] = meta
        return meta

    def _reuse(self, tile: Path, sidecar: Path) -> VideoTile | None:
        """A made tile's metadata if its sidecar is whole and matches it, else None (remake).

        A sidecar half-written by a killed run of an earlier version (or damaged since) is
        treated as absent: the tile is made again and the sidecar replaced.
        """
        try:
            data = json.loads(sidecar.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not an object")
            # The tile's path as seen now (the sidecar may have been written from another
            # working directory).
            # The sidecar is what video() wrote (checked against the tile below).
            meta = cast(VideoTile, {**data, "tile_path": str(tile)})
            # The frames as seen now too; a sidecar from before frames were kept has none
            # (its tile is made again, with them).
            shas = meta.get("frame_sha256")
            if not isinstance(shas, list) or len(shas) != len(meta.get("indices", [])):
                log.info("tile %s was made before its frames were kept; making it again", tile)
                return None
            meta["frame_paths"] = [str(frame_file(tile, k)) for k in range(len(shas))]
            same_shown = all(Path(f).is_file() and sha256_file(f) == h
                             for f, h in zip(meta["frame_paths"], shas, strict=True))
            # A tile made under an earlier index rule (gveval_code was [0, n//3, 2n//3]
            # before it followed the repository's linspace) is made again, not reused.
            same_frames = bool(meta.get("n_frames")) and meta.get("indices") == frame_indices(
                int(meta["n_frames"]), self.config.frame_policy, self.config.uniform_frames)
            if meta.get("tile_sha256") == sha256_file(tile) and same_frames and same_shown:
                return meta
        except (ValueError, TypeError, KeyError, OSError) as exc:
            log.warning("tile sidecar %s is unreadable (%s); making the tile again", sidecar,
                        exc)
        return None

    def views(self, paths: list[Path], sha: str) -> tuple[str, str]:
        """The tile of an object's views, made or reused: (tile path, tile content hash).

        Args:
            paths: the view images (each is checked before tiling).
            sha: the views' combined content hash (the tile is named by it).
        """
        # "-v2": views are now decoded upright (EXIF) and deep/CMYK views converted properly;
        # a tile cached by an earlier version (e.g. in the score CLI's cache) may be sideways.
        tile = self.dir / f"{sha}-views-v2.png"
        if tile.is_file():
            return str(tile), sha256_file(tile)
        for p in paths:
            check_image(p)
        return tile_views([str(p) for p in paths], str(tile))


def _with_media(item: ItemRow, row: ValidRow, media_root: Path, tiles: TileCache,
                hashes: dict[Path, str]) -> ItemRow:
    """``item`` with its media columns: hashes, size, tile and the picture a judge sees.

    Raises:
        MediaError: the row's media cannot be used (the row is quarantined for it).
        OSError: reading the media failed (the row is quarantined for it).
        capjudge.util.atomic.OutputWriteError: the output's disk is full (or read-only): not the
            row's fault, so the ingest stops, naming the path, instead of quarantining every
            row after it.
    """
    try:
        return _media_columns(item, row, media_root, tiles, hashes)
    except OSError as exc:
        if exc.errno in OUTPUT_ERRNOS:
            raise _write_error(tiles.dir.parent, exc) from None
        raise


def _write_error(out: Path, exc: OSError) -> OutputWriteError:
    """Ingest's one-line error for a write the output's disk refused."""
    return OutputWriteError.of(out, exc, what="the items", then="free some space (or choose "
                               "another --out / ingest.out) and run ingest again")


def _media_columns(item: ItemRow, row: ValidRow, media_root: Path, tiles: TileCache,
                   hashes: dict[Path, str]) -> ItemRow:
    """:func:`_with_media`'s work: the media columns, the tiles made or reused."""
    def hashed(p: Path) -> str:
        if p not in hashes:
            hashes[p] = sha256_file(p)
        return hashes[p]

    paths = [resolve_media(media_root, m) for m in row.media]
    item = replace(item, media_path=row.media[0])
    if row.media_kind == "image":
        info = check_image(paths[0])
        sha = hashed(paths[0])
        judge = tiles.judge_image(paths[0], sha, info)
        # An unchanged original is named the way item_image() names it (media_root/media_path)
        # rather than by its resolved absolute path, so items.parquet stays machine-independent.
        judge_path = judge.path if judge.note else str(media_root / row.media[0])
        return replace(item, media_sha256=sha, width=judge.width, height=judge.height,
                       judge_path=judge_path, judge_sha256=judge.sha256, judge_note=judge.note)
    if row.media_kind == "video":
        sha = hashed(paths[0])
        meta = tiles.video(paths[0], sha)
        return replace(
            item, media_sha256=sha, width=meta["width"], height=meta["height"],
            n_frames=meta["n_frames"], fps=meta["fps"], duration_s=meta["duration_s"],
            tile_path=meta["tile_path"], tile_sha256=meta["tile_sha256"],
            frame_policy=meta["policy"], frame_indices=tuple(meta["indices"]),
            frame_timestamps_s=tuple(meta["timestamps_s"]),
            judge_path=meta["tile_path"], judge_sha256=meta["tile_sha256"],
            frame_paths=tuple(meta["frame_paths"]), frame_sha256=tuple(meta["frame_sha256"]),
        )
    if len(paths) < 1:
        raise MediaError("'views' is empty")
    view_shas = [hashed(p) for p in paths]
    sha = sha256_text(*view_shas)
    tile_path, tile_sha = tiles.views(paths, sha)
    return replace(item, media_sha256=sha, view_paths=tuple(row.media),
                   view_sha256=tuple(view_shas), tile_path=tile_path, tile_sha256=tile_sha,
                   frame_policy="views", judge_path=tile_path, judge_sha256=tile_sha)


def stored_path(value: str | None, out: Path, relative: bool) -> str | None:
    """A path as ``items.parquet`` stores it.

    With ``relative`` (the stage was given a relative media root and output folder, as the DVC
    pipeline does) the path is relative to the items file's folder: the project tree moves as
    one (another checkout, another machine, ``dvc checkout``), so the table stays the same bytes
    and resolves from any working directory (:meth:`capjudge.item.Item.resolve`). Otherwise it
    is absolute. Never relative to the working directory, which a later stage cannot know.
    """
    if value is None:
        return None
    full = os.path.abspath(value)
    return os.path.relpath(full, os.path.abspath(out)) if relative else full


def _stored_paths(item: ItemRow, out: Path, relative: bool) -> ItemRow:
    """``item`` with the files ingest made (tile, judge copy, frames) as :func:`stored_path`."""
    frames = tuple(str(stored_path(f, out, relative)) for f in item.frame_paths or ())
    return replace(item, tile_path=stored_path(item.tile_path, out, relative),
                   judge_path=stored_path(item.judge_path, out, relative),
                   frame_paths=frames or None)


def _reason_kind(reason: str) -> str:
    """A short bucket for the summary counts ("file not found: 'x'" -> "file not found")."""
    return re.split(r"[:(]", reason, maxsplit=1)[0].strip()


def ingest(manifest: str | Path, media_root: str | Path, out_dir: str | Path,
           config: IngestConfig | None = None,
           progress: Callable[[int, int | None], None] | None = None,
           video_failures: dict[str, str] | None = None) -> IngestResult:
    """Validate a manifest and write the items/quarantine tables, tiles and DuckDB database.

    Args:
        manifest: JSONL (reference), CSV or Parquet manifest.
        media_root: directory that relative media paths resolve under; nothing outside it is
            ever read.
        out_dir: output directory (created).
        config: frame sampling and decoding settings.
        progress: called with (rows read, None) as rows are processed.
        video_failures: videos (content hash -> reason) whose frame sampling already failed
            in this run (:func:`sample_tiles`); their rows are quarantined with that reason.

    Raises:
        ManifestError: the manifest cannot be read at all.
    """
    config = config or IngestConfig()
    manifest, media_root = Path(manifest), Path(media_root)
    card = read_dataset_card(manifest)  # a broken card fails before any media is read
    if not media_root.is_dir():
        raise ManifestError(f"{media_root}: media root is not a directory")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ManifestError(f"{out}: the output exists and is not a folder")
    relative_paths = not media_root.is_absolute() and not out.is_absolute()
    try:
        (out / "tiles").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ManifestError(f"{out}: cannot create the output folder ({exc.strerror or exc})"
                            ) from None
    clean_orphans(out / "tiles")
    clean_orphans(out / "judge_images")
    tiles = TileCache(out / "tiles", config, video_failures=video_failures)
    hashes: dict[Path, str] = {}
    limits = config.limits()

    items: list[ItemRow] = []
    quarantine: list[QuarantineRow] = []
    first_key: dict[str, tuple[str, int]] = {}  # look-alike key -> (id, line)
    n_rows = 0
    for raw in read_rows(manifest):
        n_rows += 1
        if progress is not None:
            progress(n_rows, None)
        row, reasons = validate_fields(raw, config.max_candidate_chars, limits)
        raw_id = raw.data.get("id") if raw.data else None
        # safe_text: an id with a lone surrogate is quarantined for it, and must still be
        # writable to the (UTF-8) quarantine table.
        qid = safe_text(raw_id) if isinstance(raw_id, str) else None
        if row is not None and (key := look_alike_key(row.id)) in first_key:
            first, line = first_key[key]
            reasons = [f"duplicate id {row.id!r} (first at line {line})" if first == row.id
                       else f"id {row.id!r} looks the same as id {first!r} at line {line} "
                            f"(written {ascii(row.id)} and {ascii(first)}: equal once "
                            "Unicode-normalised, invisible characters and outer spaces "
                            "removed): rename one"]
            row = None
        if row is None:
            quarantine.append(QuarantineRow(id=qid, line=raw.line,
                                            reason=safe_text("; ".join(reasons)),
                                            raw=safe_text(raw.raw)))
            continue
        item = _item_row(row, media_root, out, relative_paths)
        try:
            item = _with_media(item, row, media_root, tiles, hashes)
        except (MediaError, OSError) as exc:
            quarantine.append(QuarantineRow(id=row.id, line=raw.line,
                                            reason=safe_text(str(exc)), raw=safe_text(raw.raw)))
            continue
        first_key[look_alike_key(row.id)] = (row.id, raw.line)
        items.append(_stored_paths(item, out, relative_paths))
        if n_rows % 50 == 0:
            log.info("ingest: %d rows read, %d items, %d quarantined", n_rows, len(items),
                     len(quarantine))

    return _write_outputs(manifest, out, items, quarantine, n_rows, config, card)


def _item_row(row: ValidRow, media_root: Path, out: Path, relative_paths: bool) -> ItemRow:
    """A valid row as a row of the items table, before its media columns (:func:`_with_media`)."""
    return ItemRow(
        id=row.id, line=row.line, task=row.task, media_kind=row.media_kind,
        media_root=stored_path(str(media_root), out, relative_paths),
        candidate=row.candidate, references=tuple(row.references),
        question=row.question, system=row.system,
        labels=json.dumps(row.labels, sort_keys=True),
        # allow_nan=False: validate_fields already encoded what JSON cannot hold; a NaN
        # here would be a bug, not a bad row.
        extra=json.dumps(row.extra, sort_keys=True, ensure_ascii=False, allow_nan=False))


def _write_outputs(manifest: Path, out: Path, items: Sequence[ItemRow],
                   quarantine: Sequence[QuarantineRow], n_rows: int, config: IngestConfig,
                   card: dict[str, str] | None = None) -> IngestResult:
    """Write the items and quarantine tables and the summary; the counts.

    The manifest's dataset card (``card``), when it has one, is kept in the summary as
    ``dataset``: the report describes the data from it.

    Raises:
        ManifestError: the manifest held no rows.
        capjudge.util.atomic.OutputWriteError: a file could not be written (a full disk, a
            read-only folder); the message names it, in one line.
    """
    if n_rows == 0:
        # Nothing to judge is a mistake (a wrong file, an empty export), not a success.
        raise ManifestError(f"{manifest}: the manifest holds no rows")
    by_kind = dict(Counter(i.media_kind for i in items))
    reason_counts = dict(Counter(_reason_kind(q.reason) for q in quarantine))
    summary = {"manifest": str(manifest), "rows": n_rows, "items": len(items),
               "quarantined": len(quarantine), "items_by_kind": by_kind,
               "quarantined_by_reason": reason_counts, "frame_policy": config.frame_policy}
    if card:
        summary["dataset"] = card
    # The four files are one set: each is renamed into place whole, and the folder is marked
    # incomplete until the last one is (readers refuse it meanwhile: capjudge.util.atomic).
    try:
        with stage_outputs(out):
            write_tables(out, items, quarantine)
            write_json(summary_file(out), summary)
    except OSError as exc:
        raise _write_error(out, exc) from None
    for q in quarantine:
        log.warning("quarantined line %s (id=%s): %s", q.line, q.id, q.reason)
    return IngestResult(n_rows=n_rows, n_items=len(items), n_quarantined=len(quarantine),
                        by_kind=by_kind, reasons=reason_counts, out_dir=str(out))


def video_jobs(manifest: str | Path, media_root: str | Path,
               config: IngestConfig | None = None) -> list[str]:
    """The distinct video files of a manifest that ingest would sample frames from, in order.

    These are what the ingest flow hands to parallel workers (:func:`sample_tiles`) before
    the ordered pass of :func:`ingest` finds their tiles made.

    Rows that ingest would quarantine are left out (ingest records them with the reason).
    Files are told apart by resolved path, not content: hashing is left to the workers.

    Raises:
        ManifestError: the manifest cannot be read at all.
    """
    config = config or IngestConfig()
    root = Path(media_root)
    seen: set[Path] = set()
    jobs: list[str] = []
    for raw in read_rows(Path(manifest)):
        row, _ = validate_fields(raw, config.max_candidate_chars, config.limits())
        if row is None or row.media_kind != "video":
            continue
        try:
            path = resolve_media(root, row.media[0])
        except MediaError:
            continue
        if path not in seen:
            seen.add(path)
            jobs.append(str(path))
    return jobs


def sample_tiles(videos: list[str], out_dir: str | Path, config: IngestConfig | None = None
                 ) -> dict[str, str]:
    """Make the frame tiles of ``videos`` in ``out_dir/tiles``, exactly as :func:`ingest` would.

    Same names, sidecars and checks, so that a following ingest into ``out_dir`` reuses them.
    Workers may run this on disjoint lists at once: each decode is its own child process, and
    a tile two workers both wrote (the same content under two paths) is checked against its
    sidecar's hash by ingest and made again if it does not match.

    Returns:
        content hash -> reason for every video whose sampling failed (pass them to
        :func:`ingest` as ``video_failures``, so the decode timeout is not paid twice).
    """
    tiles = TileCache(Path(out_dir) / "tiles", config or IngestConfig())
    tiles.dir.mkdir(parents=True, exist_ok=True)
    failures: dict[str, str] = {}
    for path in videos:
        try:
            sha = sha256_file(Path(path))
        except OSError:
            continue  # ingest quarantines it with the reason
        try:
            tiles.video(Path(path), sha)
        except (MediaError, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno in OUTPUT_ERRNOS:
                raise _write_error(tiles.dir.parent, exc) from None  # not the video's fault
            failures[sha] = str(exc)
    return failures


def write_tables(out: Path, items: Sequence[ItemRow], quarantine: Sequence[QuarantineRow]
                 ) -> None:
    """Write the Parquet tables and (re)build the DuckDB database from them."""
    import duckdb

    items_path = items_file(out)
    quarantine_path = out / QUARANTINE
    # Row groups of ITEMS_ROW_GROUP rows: a judge task reads only the groups of its chunk
    # (capjudge.item.load_items), not the whole table.
    with atomic_path(items_path) as tmp:
        pq.write_table(ItemRow.table(items), tmp,
                       row_group_size=ITEMS_ROW_GROUP)
    with atomic_path(quarantine_path) as tmp:
        pq.write_table(QuarantineRow.table(quarantine), tmp)
    db_path = out / "capjudge.duckdb"
    with atomic_path(db_path) as tmp:
        try:
            con = duckdb.connect(str(tmp))
            try:
                con.execute("CREATE TABLE items AS SELECT * FROM read_parquet(?)",
                            [str(items_path)])
                con.execute("CREATE TABLE quarantine AS SELECT * FROM read_parquet(?)",
                            [str(quarantine_path)])
            finally:
                con.close()
        except duckdb.Error as exc:
            Path(f"{tmp}.wal").unlink(missing_ok=True)  # its space back, on a full disk
            refused = _refused_write(exc, db_path)
            if refused is None:
                raise
            raise refused from None
        Path(f"{tmp}.wal").unlink(missing_ok=True)


def _refused_write(exc: Exception, path: Path) -> OSError | None:
    """DuckDB's error for a full (or read-only) disk as the OSError it stands for, else None.

    DuckDB raises its own exception types (``IOException``, or ``TransactionException`` when
    the commit's write fails) with the system's message inside; as an OSError it reaches the
    same one-line report as every other refused write.
    """
    for code in sorted(OUTPUT_ERRNOS):
        if os.strerror(code) in str(exc):
            return OSError(code, os.strerror(code), str(path))
    return None
