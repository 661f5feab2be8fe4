"""Media handling: content hashes, safe image/video decoding, frame sampling and tiling.

Everything downstream is keyed by the sha256 of a file's bytes, never by its name, so two videos
called ``clip.mp4`` in different folders never share a tile or a cached judgement.

Images sent to a judge must be in a form an OpenAI-style vision API accepts (8-bit RGB/RGBA/L
JPEG, PNG or WebP, one frame, upright): anything else gets a normalised, content-addressed copy
(:func:`prepare_judge_image`); the original's hash stays the item's identity.

Video decoding uses PyAV (the FFmpeg libraries) with input seeking, restricted to local files
(``protocol_whitelist=file``) and to an allow-list of container formats, so a manifest cannot make
the pipeline fetch a URL or follow an HLS/concat playlist. Each decode runs in a child process
with a timeout (see :func:`sample_video_tile_isolated`): a hostile file can hang a decoder.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from PIL import Image, ImageDraw, ImageFont, ImageOps

from capjudge.records import JSONValue
from capjudge.util.atomic import atomic_path, write_bytes

PANEL = 512
"""Side of one square panel in a tile (G-VEval: three 512x512 frames make a 1536x512 image)."""
# A video frame kept on its own (G-VEval's visual_input: frames) is at most this many pixels
# on its long side: a 4K frame as a lossless PNG can pass vision APIs' per-image size limits,
# and local processors resize to far less anyway.
FRAME_MAX_SIDE = 1024

FramePolicy = Literal["first_middle_last", "gveval_code", "uniform"]
FRAME_POLICIES: tuple[str, ...] = ("first_middle_last", "gveval_code", "uniform")

# Container formats we are willing to demux. Playlist/indirection formats (hls, concat, dash,
# image2 patterns, tee, sdp, rtsp) are excluded on purpose: they open further files or URLs.
ALLOWED_VIDEO_FORMATS = frozenset(
    {"mov", "mp4", "m4a", "3gp", "3g2", "mj2", "matroska", "webm", "avi", "gif", "mpeg",
     "mpegts", "flv", "ogg", "h264", "hevc", "mjpeg", "mpegvideo", "asf", "ivf"}
)


class MediaError(ValueError):
    """A media file that cannot be used; the message is a user-readable quarantine reason."""


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Return the hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_text(*parts: str) -> str:
    """Hash several strings unambiguously (length-prefixed so ``("ab","c") != ("a","bc")``)."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# Images


@dataclass(frozen=True)
class ImageInfo:
    """What ingest records about an image.

    ``width`` and ``height`` are the stored pixel grid; an EXIF orientation of 5-8 means the
    picture is shown (and sent to a judge) turned by 90 degrees: see :attr:`display_size`.
    """

    width: int
    height: int
    format: str
    mode: str = "RGB"
    n_frames: int = 1  # > 1 for animated GIF/PNG/WebP and multi-picture files (MPO, TIFF)
    orientation: int = 1  # EXIF orientation tag (1 = upright, 2-8 = mirror/turn needed)
    bit_depth: int = 8  # bits per channel as stored (PNG can hold 16 that Pillow reduces)

    @property
    def display_size(self) -> tuple[int, int]:
        """(width, height) once the EXIF orientation is applied."""
        if self.orientation in (5, 6, 7, 8):
            return self.height, self.width
        return self.width, self.height


# Formats and modes a vision API takes as they are (OpenAI: PNG, JPEG, WebP, non-animated GIF;
# GIFs are palette images and are converted anyway). Anything else is normalised first.
JUDGE_FORMATS: dict[str, frozenset[str]] = {
    "JPEG": frozenset({"RGB", "L"}),
    "PNG": frozenset({"RGB", "RGBA", "L"}),
    "WEBP": frozenset({"RGB", "RGBA"}),
}


def _png_bit_depth(path: Path) -> int:
    """Bits per channel from a PNG's IHDR (Pillow silently reduces 16-bit RGB to 8)."""
    with open(path, "rb") as handle:
        head = handle.read(25)
    if len(head) == 25 and head[12:16] == b"IHDR":
        return head[24]
    return 8


def _orientation(img: Image.Image) -> int:
    try:
        value = img.getexif().get(0x0112, 1)
    except Exception:  # noqa: BLE001 - malformed EXIF is common; it only loses the orientation
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def check_image(path: str | Path) -> ImageInfo:
    """Fully decode an image to prove it is usable.

    Pillow's decompression-bomb limit stays on: an image over the limit raises
    ``DecompressionBombError`` (turned into :class:`MediaError`) instead of eating memory.

    Args:
        path: the image file.

    Returns:
        Its size, format, mode, frame count, EXIF orientation and bit depth.

    Raises:
        MediaError: empty, truncated, undecodable or oversized image.
    """
    p = Path(path)
    if p.stat().st_size == 0:
        raise MediaError("zero-byte file")
    try:
        with Image.open(p) as img:
            fmt = img.format or "unknown"
            img.load()  # decodes every byte: truncated files fail here, not later in a judge
            width, height = img.size
            mode = img.mode
            n_frames = int(getattr(img, "n_frames", 1) or 1)
            orientation = _orientation(img)
    except Image.DecompressionBombError as exc:
        raise MediaError(f"decompression bomb refused: {exc}") from exc
    except MemoryError as exc:
        raise MediaError("undecodable image: out of memory while decoding") from exc
    except Exception as exc:  # noqa: BLE001 - hostile files make decoders raise anything
        # (OSError, SyntaxError, ValueError, but also EOFError, struct.error, IndexError, ...);
        # every one of them means "this file cannot be used", never a crashed stage.
        raise MediaError(f"undecodable image: {exc or type(exc).__name__}") from exc
    if width < 1 or height < 1:
        raise MediaError(f"image has no pixels ({width}x{height})")
    bit_depth = _png_bit_depth(p) if fmt == "PNG" else 8
    return ImageInfo(width=width, height=height, format=fmt, mode=mode, n_frames=n_frames,
                     orientation=orientation, bit_depth=bit_depth)


def judge_form_problems(info: ImageInfo) -> list[str]:
    """Why an image cannot be sent to a judge as it is (empty when it can).

    Args:
        info: from :func:`check_image`.

    Returns:
        Readable notes such as ``"CMYK JPEG"``, ``"16-bit PNG"``, ``"animated GIF (12 frames)"``,
        ``"EXIF orientation 6"``.
    """
    problems: list[str] = []
    modes = JUDGE_FORMATS.get(info.format)
    if info.n_frames > 1:
        kind = "animated" if info.format in ("GIF", "PNG", "WEBP") else "multi-frame"
        problems.append(f"{kind} {info.format} ({info.n_frames} frames)")
    elif modes is None:
        problems.append(f"{info.format} format")
    if info.bit_depth != 8:
        problems.append(f"{info.bit_depth}-bit {info.format}")
    elif modes is not None and info.mode not in modes:
        problems.append(f"{info.mode} {info.format}")
    if info.orientation != 1:
        # Sent as is, the judge would see the picture sideways or mirrored: local backends
        # decode with Pillow, which ignores the tag, and APIs do not promise to honour it.
        problems.append(f"EXIF orientation {info.orientation}")
    return problems


def _to_8bit(img: Image.Image) -> Image.Image:
    """Convert any Pillow mode to 8-bit L, RGB or RGBA, scaling (not clipping) deep images."""
    mode = img.mode
    if mode in ("L", "RGB", "RGBA"):
        return img
    if mode.startswith("I;16"):
        # Pillow's convert("L") clips 16-bit values at 255 (a mid-grey becomes white).
        return img.convert("I").point(lambda v: v * (1 / 256)).convert("L")
    if mode in ("I", "F"):
        low, high = cast(tuple[float, float], img.getextrema())  # one band: (min, max)
        if mode == "I" and low >= 0 and high <= 255:
            return img.convert("L")
        if mode == "I" and low >= 0 and high <= 65535:
            return img.point(lambda v: v * (1 / 256)).convert("L")
        span = (high - low) or 1
        return img.point(lambda v: (v - low) * (255 / span)).convert("L")
    if mode == "CMYK":
        return _cmyk_to_rgb(img)
    if mode in ("P", "PA"):
        return img.convert("RGBA" if img.has_transparency_data else "RGB")
    if mode in ("LA", "La", "RGBa"):
        return img.convert("RGBA")
    if mode == "1":
        return img.convert("L")
    return img.convert("RGB")  # RGBX, YCbCr, LAB, HSV, ...


def _cmyk_to_rgb(img: Image.Image) -> Image.Image:
    """CMYK to sRGB through the embedded ICC profile when there is one, else naively.

    Print colours are far from Pillow's naive formula, so the naive conversion is only the
    fallback.
    """
    icc = img.info.get("icc_profile")
    if icc:
        try:
            from PIL import ImageCms

            converted = ImageCms.profileToProfile(
                img, ImageCms.ImageCmsProfile(io.BytesIO(icc)), ImageCms.createProfile("sRGB"),
                outputMode="RGB")
            if converted is not None:
                return converted
        except Exception:  # noqa: BLE001 - a broken profile falls back to the formula
            pass
    return img.convert("RGB")


def display_image(img: Image.Image) -> Image.Image:
    """The picture as a person sees it: first frame, EXIF orientation applied, 8-bit L/RGB/RGBA.

    Args:
        img: an opened image (animated images are read from their first frame).

    Returns:
        A new upright 8-bit image. A fully opaque alpha channel is dropped.
    """
    if getattr(img, "n_frames", 1) > 1:
        img.seek(0)
    try:
        upright = ImageOps.exif_transpose(img)
    except Exception:  # noqa: BLE001 - malformed EXIF: keep the stored orientation
        upright = img.copy()
    out = _to_8bit(upright if upright is not None else img)
    if out.mode == "RGBA" and out.getchannel("A").getextrema() == (255, 255):
        out = out.convert("RGB")
    return out


def open_display_image(path: str | Path) -> Image.Image:
    """Open an image file and return :func:`display_image` of it (loaded, file closed).

    Raises:
        MediaError: the file cannot be decoded.
    """
    return _open_display(path)[0]


# Modes whose ICC profile describes colour (RGB) rather than grey or ink.
_RGB_MODES = frozenset({"RGB", "RGBA", "RGBX", "RGBa", "P", "PA"})
_GREY_MODES = frozenset({"L", "LA", "La", "I", "I;16", "I;16B", "I;16L", "I;16N", "1"})


def _open_display(path: str | Path) -> tuple[Image.Image, bytes | None]:
    """:func:`display_image` of a file, and the ICC profile that still describes it (or None)."""
    try:
        with Image.open(path) as img:
            source_mode = img.mode
            icc = img.info.get("icc_profile")
            shown = display_image(img)
    except Image.DecompressionBombError as exc:
        raise MediaError(f"decompression bomb refused: {exc}") from exc
    except MediaError:
        raise
    except Exception as exc:  # noqa: BLE001 - see check_image
        raise MediaError(f"undecodable image: {exc or type(exc).__name__}") from exc
    # A profile is only carried over when the copy is in the same kind of colour space: a grey
    # profile on an RGB copy (or a CMYK one, already applied by _cmyk_to_rgb) would be wrong.
    colour_copy = shown.mode in ("RGB", "RGBA")
    if not icc or not ((source_mode in _RGB_MODES and colour_copy)
                       or (source_mode in _GREY_MODES and shown.mode == "L")):
        icc = None
    return shown, icc


@dataclass(frozen=True)
class JudgeImage:
    """The file a judge is sent for an image item."""

    path: str
    sha256: str
    note: str | None  # what normalisation did; None when the original is sent as it is
    width: int
    height: int


def prepare_judge_image(path: str | Path, media_sha256: str, out_dir: str | Path,
                        info: ImageInfo | None = None) -> JudgeImage:
    """Return the original image when a vision API takes it as is, else a normalised copy.

    The copy is the first frame, upright (EXIF orientation applied), in 8-bit RGB, RGBA or L,
    saved as JPEG (quality 95) when the source was a JPEG without transparency (a PNG of a large
    photograph can exceed an API's size limit) and as PNG otherwise. Colour profiles of RGB/L
    sources are kept; CMYK goes to sRGB through its profile. EXIF (and any GPS data in it) is
    not copied. The copy is content-addressed: ``out_dir/<sha256 of the copy>.<ext>``.

    Args:
        path: the original, already checked with :func:`check_image`.
        media_sha256: the original's hash (the item keeps it as its identity).
        out_dir: where normalised copies are stored.
        info: the original's :func:`check_image` result (computed when omitted).

    Returns:
        The file to send, its hash, a note of what was done, and its displayed size.

    Raises:
        MediaError: the image cannot be decoded or written.
    """
    info = info or check_image(path)
    problems = judge_form_problems(info)
    if not problems:
        return JudgeImage(str(path), media_sha256, None, info.width, info.height)
    img, icc = _open_display(path)
    lossy_source = info.format in ("JPEG", "MPO") and img.mode in ("RGB", "L")
    fmt, ext = ("JPEG", ".jpg") if lossy_source else ("PNG", ".png")
    options: dict[str, int | bool | bytes] = (
        {"quality": 95} if fmt == "JPEG" else {"optimize": False})
    if icc:
        options["icc_profile"] = icc
    buffer = io.BytesIO()
    img.save(buffer, format=fmt, **options)
    data = buffer.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    target = Path(out_dir) / f"{digest}{ext}"
    if not (target.is_file() and sha256_file(target) == digest):
        write_bytes(target, data)
    note = ", ".join(problems)
    if info.n_frames > 1:
        note += "; first frame only"
    note += f" -> 8-bit {img.mode} {fmt}"
    return JudgeImage(str(target), digest, note, img.width, img.height)


def letterbox(img: Image.Image, side: int = PANEL, fill: tuple[int, int, int] = (0, 0, 0)
              ) -> Image.Image:
    """Resize keeping the aspect ratio to fit a ``side`` x ``side`` square, padding the rest.

    Transparent pixels are shown over white, as an image viewer would (dropping the alpha
    channel would show whatever colour happens to be stored under it).
    """
    img = _to_8bit(img)
    if img.mode == "RGBA":
        backdrop = Image.new("RGB", img.size, (255, 255, 255))
        backdrop.paste(img, mask=img.getchannel("A"))
        img = backdrop
    img = img.convert("RGB")
    scale = min(side / img.width, side / img.height)
    new_size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
    resized = img.resize(new_size, Image.Resampling.LANCZOS)
    canvas = Image.new("RGB", (side, side), fill)
    canvas.paste(resized, ((side - new_size[0]) // 2, (side - new_size[1]) // 2))
    return canvas


def _label(panel: Image.Image, text: str) -> None:
    draw = ImageDraw.Draw(panel)
    font = ImageFont.load_default(size=32)
    left, top, right, bottom = draw.textbbox((12, 10), text, font=font)
    # A solid box behind the label keeps it legible on any frame content.
    draw.rectangle((left - 6, top - 4, right + 6, bottom + 4), fill=(255, 255, 255))
    draw.text((12, 10), text, fill=(0, 0, 0), font=font)


def tile_panels(images: Sequence[Image.Image], label: str) -> Image.Image:
    """Letterbox each image to 512x512, label it ``"{label} i"`` and place them side by side.

    Three video frames give the 1536x512 image G-VEval sends to the judge.
    """
    if not images:
        raise MediaError("nothing to tile")
    tile = Image.new("RGB", (PANEL * len(images), PANEL), (0, 0, 0))
    for i, image in enumerate(images):
        panel = letterbox(image)
        _label(panel, f"{label} {i + 1}")
        tile.paste(panel, (i * PANEL, 0))
    return tile


def save_png(img: Image.Image, path: Path) -> str:
    """Write a PNG atomically and return its sha256."""
    with atomic_path(path) as tmp:
        img.save(tmp, format="PNG", optimize=False)
    return sha256_file(path)


# --------------------------------------------------------------------------------------------
# Video


@dataclass(frozen=True)
class VideoInfo:
    """Stream facts gathered by demuxing (no decoding): exact frame count and timestamps."""

    width: int
    height: int
    n_frames: int
    fps: float
    duration_s: float
    format: str
    codec: str
    pts: tuple[int, ...] = field(repr=False)
    time_base: float = field(repr=False)


def _open_container(path: str) -> Any:
    import av  # imported lazily: ingest of image-only manifests never loads FFmpeg

    container = av.open(
        path,
        options={"protocol_whitelist": "file"},
        metadata_errors="ignore",
    )
    names = set(container.format.name.split(","))
    if not names & ALLOWED_VIDEO_FORMATS:
        container.close()
        raise MediaError(f"container format {container.format.name!r} is not allowed")
    if not container.streams.video:
        container.close()
        raise MediaError("no video stream")
    return container


def probe_video(path: str) -> VideoInfo:
    """Demux every packet of the first video stream to learn the exact frames and timestamps.

    Container metadata (``stream.frames``) is missing for WebM and wrong for some MP4s, so the
    true last frame is found from the packets themselves. Demuxing without decoding is cheap.
    """
    import av

    if os.path.getsize(path) == 0:
        raise MediaError("zero-byte file")
    try:
        container = _open_container(path)
    except MediaError:
        raise
    except (av.FFmpegError, OSError, ValueError) as exc:
        raise MediaError(f"undecodable video: {exc}") from exc
    try:
        stream = container.streams.video[0]
        pts: list[int] = []
        for packet in container.demux(stream):
            if packet.pts is not None and packet.size > 0:
                pts.append(int(packet.pts))
        if not pts:
            raise MediaError("video stream has no frames")
        pts.sort()
        time_base = float(stream.time_base) if stream.time_base else 1.0
        rate = stream.average_rate or stream.guessed_rate
        fps = float(rate) if rate else (len(pts) - 1) / max((pts[-1] - pts[0]) * time_base, 1e-9)
        duration = (pts[-1] - pts[0]) * time_base + (1.0 / fps if fps else 0.0)
        ctx = stream.codec_context
        return VideoInfo(
            width=int(ctx.width), height=int(ctx.height), n_frames=len(pts), fps=fps,
            duration_s=duration, format=container.format.name, codec=ctx.name,
            pts=tuple(pts), time_base=time_base,
        )
    except av.FFmpegError as exc:
        raise MediaError(f"undecodable video: {exc}") from exc
    finally:
        container.close()


def frame_indices(n_frames: int, policy: str, n: int = 3) -> list[int]:
    """Indices of the frames a sampling policy picks from a clip of ``n_frames`` frames.

    Args:
        n_frames: exact number of frames in the clip.
        policy: ``first_middle_last`` (G-VEval paper §3.5: first, middle and the true last
            frame), ``gveval_code`` (``linspace(0, N-1, 4)[:3]``: 0, 1/3 and 2/3 of the clip,
            never the last frame; what the G-VEval repository does, to reproduce its numbers)
            or ``uniform`` (``n`` evenly spaced frames
            from first to last).
        n: number of frames for ``uniform``.
    """
    if n_frames < 1:
        raise MediaError("video stream has no frames")
    last = n_frames - 1
    if policy == "first_middle_last":
        return [0, last // 2, last]
    if policy == "gveval_code":
        # The repository's video2imgs: np.linspace(0, n - 1, 4, dtype=int)[:3] (it samples
        # four points and drops the last). Integer floor division gives numpy's truncation.
        return [(k * last) // 3 for k in range(3)]
    if policy == "uniform":
        if n < 1:
            raise ValueError("uniform sampling needs n >= 1")
        if n == 1:
            return [last // 2]
        return [round(i * last / (n - 1)) for i in range(n)]
    raise ValueError(f"unknown frame policy {policy!r}; choose one of {FRAME_POLICIES}")


def decode_frames_seek(path: str, info: VideoInfo, indices: Sequence[int]) -> list[Image.Image]:
    """Decode only the wanted frames: seek to the keyframe before each, decode up to it."""
    import av

    container = _open_container(path)
    try:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        frames: dict[int, Image.Image] = {}
        for index in sorted(set(indices)):
            target = info.pts[index]
            container.seek(target, stream=stream, backward=True, any_frame=False)
            found = None
            for frame in container.decode(stream):
                if frame.pts is None:
                    continue
                if frame.pts >= target:
                    found = frame
                    break
            if found is None:
                raise MediaError(f"could not decode frame {index} (pts {target})")
            frames[index] = found.to_image()
        return [frames[i] for i in indices]
    except av.FFmpegError as exc:
        raise MediaError(f"undecodable video: {exc}") from exc
    finally:
        container.close()


def decode_frames_all(path: str, indices: Sequence[int]) -> list[Image.Image]:
    """Decode every frame in order and keep the wanted ones.

    This is the baseline seeking is measured against in ``bench/``, and also a fallback for
    streams whose seeking is broken.
    """
    container = _open_container(path)
    wanted = set(indices)
    kept: dict[int, Image.Image] = {}
    try:
        stream = container.streams.video[0]
        decoded = sorted(
            ((f.pts, f) for f in container.decode(stream) if f.pts is not None),
            key=lambda pair: pair[0],
        )
        for i, (_, frame) in enumerate(decoded):
            if i in wanted:
                kept[i] = frame.to_image()
    finally:
        container.close()
    missing = wanted - kept.keys()
    if missing:
        raise MediaError(f"frames {sorted(missing)} not decodable")
    return [kept[i] for i in indices]


@dataclass(frozen=True)
class SampledTile:
    """Result of sampling a video into a labelled tile."""

    tile_path: str
    tile_sha256: str
    policy: str
    indices: list[int]
    timestamps_s: list[float]
    info: VideoInfo
    frame_paths: list[str] = field(default_factory=list)
    """Each sampled frame on its own (:func:`frame_file`), in temporal order."""
    frame_sha256: list[str] = field(default_factory=list)


def frame_file(tile_path: str | Path, k: int) -> Path:
    """Where the ``k``-th (0-based) sampled frame of a video tile is kept, beside the tile.

    A judge shown the frames as separate pictures (G-VEval's ``visual_input: frames``) or as
    a video (families whose processor takes one) gets these, not the tile's letterboxed,
    labelled panels.
    """
    tile = Path(tile_path)
    return tile.with_name(f"{tile.stem}-frame{k + 1}.png")


def shown_frame(img: Image.Image, max_side: int = FRAME_MAX_SIDE) -> Image.Image:
    """A decoded frame as a judge is shown it on its own.

    8-bit RGB, aspect ratio kept, its long side at most ``max_side`` pixels (smaller frames
    are left as they are).
    """
    img = _to_8bit(img).convert("RGB")
    scale = max_side / max(img.width, img.height)
    if scale >= 1:
        return img
    size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
    return img.resize(size, Image.Resampling.LANCZOS)


def sample_video_tile(path: str, tile_path: str, policy: str = "first_middle_last",
                      n: int = 3) -> SampledTile:
    """Probe a video, decode the policy's frames by seeking and write the labelled tile.

    Each frame is also written on its own (:func:`frame_file`, :func:`shown_frame`: as decoded,
    at most :data:`FRAME_MAX_SIDE` pixels on its long side), so a judge can be shown the frames
    rather than the tile without decoding the video again.

    Seeking can land off-target on streams with broken indexes; the decoded frame count is
    checked and, when seeking fails, the whole stream is decoded instead (slower, same frames).
    """
    info = probe_video(path)
    indices = frame_indices(info.n_frames, policy, n)
    try:
        images = decode_frames_seek(path, info, indices)
    except MediaError:
        images = decode_frames_all(path, indices)
    tile = tile_panels(images, "Frame")
    # The frames first, then the tile: a run killed between them leaves no tile, so the
    # next one samples again (TileCache reuse also checks each frame's hash in the sidecar).
    frame_paths = [str(frame_file(tile_path, k)) for k in range(len(images))]
    frame_shas = [save_png(shown_frame(img), Path(f))
                  for img, f in zip(images, frame_paths, strict=True)]
    digest = save_png(tile, Path(tile_path))
    stamps = [round((info.pts[i] - info.pts[0]) * info.time_base, 6) for i in indices]
    return SampledTile(tile_path=tile_path, tile_sha256=digest, policy=policy,
                       indices=indices, timestamps_s=stamps, info=info,
                       frame_paths=frame_paths, frame_sha256=frame_shas)


def tile_views(paths: Sequence[str], tile_path: str) -> tuple[str, str]:
    """Tile a 3D object's rendered views side by side, labelled View 1..n; returns (path, sha).

    Each view is shown as a person sees it (:func:`display_image`: EXIF orientation applied,
    first frame, deep or CMYK images converted properly).

    Raises:
        MediaError: a view cannot be decoded.
    """
    images = [open_display_image(p) for p in paths]
    digest = save_png(tile_panels(images, "View"), Path(tile_path))
    return tile_path, digest


# --------------------------------------------------------------------------------------------
# Decoding in a separate process, with a timeout


def sample_video_tile_isolated(path: str, tile_path: str, policy: str = "first_middle_last",
                               n: int = 3, timeout_s: float = 60.0) -> SampledTile:
    """:func:`sample_video_tile` in a child process that is killed after ``timeout_s`` seconds.

    A decoder stuck on a hostile file cannot be interrupted from Python; a process can. The
    child is a fresh ``python -m capjudge.media`` (not a multiprocessing fork: the caller may be
    a Prefect task in a thread pool, and multiprocessing's spawn would re-import the caller's
    ``__main__``, i.e. Prefect, for every video).

    Raises:
        MediaError: timeout, crash of the decoder, or whatever the sampling raised.
    """
    request = json.dumps({"path": path, "tile_path": tile_path, "policy": policy, "n": n})
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "capjudge.media"], input=request, capture_output=True,
            text=True, timeout=timeout_s, check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise MediaError(f"decoding timed out after {timeout_s:g} s") from exc
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        raise MediaError(f"decoder crashed: {tail[0]}")
    reply = json.loads(lines[-1])
    if "error" in reply:
        raise MediaError(reply["error"])
    info = reply["info"]
    info["pts"] = tuple(info["pts"])
    return SampledTile(tile_path=reply["tile_path"], tile_sha256=reply["tile_sha256"],
                       policy=reply["policy"], indices=reply["indices"],
                       timestamps_s=reply["timestamps_s"], info=VideoInfo(**info),
                       frame_paths=reply["frame_paths"], frame_sha256=reply["frame_sha256"])


def _worker_main() -> int:
    request = json.loads(sys.stdin.read())
    try:
        result = sample_video_tile(request["path"], request["tile_path"], request["policy"],
                                   int(request["n"]))
        reply: dict[str, JSONValue] = asdict(result)
    except MediaError as exc:
        reply = {"error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - any decoder failure is a quarantine reason
        reply = {"error": f"undecodable video: {type(exc).__name__}: {exc}"}
    print(json.dumps(reply))
    return 0


if __name__ == "__main__":
    sys.exit(_worker_main())
