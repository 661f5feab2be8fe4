"""Frame sampling and tiling: the right frames, the true last one, the right geometry."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from capjudge.media import (
    MediaError,
    check_image,
    decode_frames_all,
    decode_frames_seek,
    frame_indices,
    letterbox,
    prepare_judge_image,
    probe_video,
    sample_video_tile,
    sample_video_tile_isolated,
    sha256_file,
    tile_views,
)
from helpers import grey_video, panel_level


@pytest.mark.parametrize(
    ("n", "policy", "expected"),
    [
        (24, "first_middle_last", [0, 11, 23]),
        (25, "first_middle_last", [0, 12, 24]),
        (1, "first_middle_last", [0, 0, 0]),
        # The repository's linspace(0, N-1, 4, dtype=int)[:3]; [0, 8, 16] for N = 24 was the
        # old [0, n//3, 2n//3] rule, which is not what it does (issue 10).
        (24, "gveval_code", [0, 7, 15]),
        (10, "gveval_code", [0, 3, 6]),
        (11, "gveval_code", [0, 3, 6]),
        (2, "gveval_code", [0, 0, 0]),
        (11, "uniform", [0, 5, 10]),
    ],
)
def test_frame_indices(n: int, policy: str, expected: list[int]) -> None:
    assert frame_indices(n, policy) == expected


def test_uniform_n_frames_and_errors() -> None:
    assert frame_indices(100, "uniform", n=5) == [0, 25, 50, 74, 99]
    with pytest.raises(ValueError, match="unknown frame policy"):
        frame_indices(10, "random")
    with pytest.raises(MediaError):
        frame_indices(0, "first_middle_last")


@pytest.mark.parametrize("suffix", [".mp4", ".webm"])
def test_tile_has_first_middle_and_true_last_frame(tmp_path: Path, suffix: str) -> None:
    video = tmp_path / f"grey{suffix}"
    grey_video(video, 23)
    info = probe_video(str(video))
    assert info.n_frames == 23  # counted from packets, also for WebM (no frame count metadata)
    result = sample_video_tile(str(video), str(tmp_path / "tile.png"))
    assert result.indices == [0, 11, 22]
    tile = Image.open(result.tile_path)
    assert tile.size == (1536, 512)
    for panel, index in enumerate(result.indices):
        # Lossy codecs move a flat grey by a level or two; neighbouring frames differ by 8.
        assert abs(panel_level(tile, panel) - (20 + 8 * index)) < 4
    assert result.timestamps_s[0] == 0.0 and result.timestamps_s[-1] == pytest.approx(2.2)


def test_seek_and_full_decode_give_the_same_frames(tmp_path: Path) -> None:
    video = tmp_path / "v.mp4"
    grey_video(video, 40)
    info = probe_video(str(video))
    seek = decode_frames_seek(str(video), info, [0, 19, 39])
    full = decode_frames_all(str(video), [0, 19, 39])
    assert [list(a.getdata()) for a in seek] == [list(b.getdata()) for b in full]


def test_isolated_sampling_reports_errors_as_media_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 100)
    with pytest.raises(MediaError, match="video"):
        sample_video_tile_isolated(str(bad), str(tmp_path / "t.png"))


def test_playlist_formats_are_refused(tmp_path: Path) -> None:
    playlist = tmp_path / "list.m3u8"
    playlist.write_text("#EXTM3U\n#EXTINF:1,\nhttp://127.0.0.1:9/x.ts\n")
    with pytest.raises(MediaError):
        probe_video(str(playlist))


def test_letterbox_keeps_aspect_ratio() -> None:
    img = Image.new("RGB", (200, 100), (255, 0, 0))
    boxed = letterbox(img)
    assert boxed.size == (512, 512)
    assert boxed.getpixel((256, 256)) == (255, 0, 0)
    assert boxed.getpixel((256, 10)) == (0, 0, 0)  # padding above the 512x256 content
    assert boxed.getpixel((256, 130)) == (255, 0, 0)


def test_letterbox_shows_transparency_over_white() -> None:
    img = Image.new("RGBA", (100, 100), (255, 0, 0, 0))  # fully transparent red
    assert letterbox(img).getpixel((256, 256)) == (255, 255, 255)


def test_views_tile_is_upright_and_scales_deep_images(tmp_path: Path) -> None:
    # Stored 60x20; EXIF orientation 8 shows it 20x60 (portrait): padding at the panel's sides.
    turned = Image.new("RGB", (60, 20), (0, 0, 220))
    exif = turned.getexif()
    exif[0x0112] = 8
    turned.save(tmp_path / "turned.jpg", exif=exif)
    Image.new("I;16", (20, 20), 32768).save(tmp_path / "deep.png")  # 16-bit mid-grey
    path, _ = tile_views([str(tmp_path / "turned.jpg"), str(tmp_path / "deep.png")],
                         str(tmp_path / "tile.png"))
    tile = Image.open(path)
    assert tile.getpixel((40, 256)) == (0, 0, 0)
    assert abs(panel_level(tile, 1) - 128) < 2  # not clipped to white


def test_judge_image_is_the_original_when_already_acceptable(tmp_path: Path) -> None:
    image = tmp_path / "ok.jpg"
    Image.new("RGB", (30, 20), (9, 9, 9)).save(image)
    sha = sha256_file(image)
    judge = prepare_judge_image(image, sha, tmp_path / "copies", check_image(image))
    assert (judge.path, judge.sha256, judge.note) == (str(image), sha, None)
    assert not (tmp_path / "copies").exists()


def test_judge_copy_is_content_addressed_and_reused(tmp_path: Path) -> None:
    image = tmp_path / "cmyk.jpg"
    Image.new("CMYK", (30, 20), (0, 0, 0, 255)).save(image)
    first = prepare_judge_image(image, sha256_file(image), tmp_path / "copies")
    again = prepare_judge_image(image, sha256_file(image), tmp_path / "copies")
    assert first == again and Path(first.path).name == f"{first.sha256}.jpg"
    assert first.note == "CMYK JPEG -> 8-bit RGB JPEG"
    assert len(list((tmp_path / "copies").iterdir())) == 1


def test_a_frame_kept_on_its_own_is_capped_on_its_long_side() -> None:
    """Frames are shown as decoded up to FRAME_MAX_SIDE; larger ones keep their aspect ratio."""
    from PIL import Image

    from capjudge.media import FRAME_MAX_SIDE, shown_frame

    small = Image.new("RGB", (160, 90), (1, 2, 3))
    assert shown_frame(small).size == (160, 90)
    big = shown_frame(Image.new("RGB", (3840, 2160), (9, 9, 9)))
    assert big.size == (FRAME_MAX_SIDE, 576) and big.mode == "RGB"
    tall = shown_frame(Image.new("L", (1080, 1920), 7))
    assert tall.size == (576, FRAME_MAX_SIDE) and tall.mode == "RGB"
