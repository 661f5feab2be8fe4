"""Test helpers: small media files made on the fly."""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Callable
from pathlib import Path

from PIL import Image

from capjudge.sample import encode_video


def grey_video(path: Path, n_frames: int, size: tuple[int, int] = (160, 90), fps: int = 10
               ) -> None:
    """A clip whose frame i is a flat grey of level 20 + 8*i: the frame index is readable back."""
    frames = [Image.new("RGB", size, (20 + 8 * i,) * 3) for i in range(n_frames)]
    encode_video(frames, path, fps=fps)


def png_bomb(path: Path, width: int = 30000, height: int = 30000) -> None:
    """A tiny PNG whose header claims width x height pixels (over Pillow's bomb limit)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
                     + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


def panel_level(tile: Image.Image, panel: int) -> float:
    """Mean grey level at the centre of panel ``panel`` (0-based) of a 512-px-high tile."""
    crop = tile.crop((panel * 512 + 236, 236, panel * 512 + 276, 276)).convert("L")
    pixels = list(crop.getdata())
    return sum(pixels) / len(pixels)


class FakeClock:
    """Time that passes only when something sleeps on it (rate limiters without waiting).

    Pass the instance as ``clock`` and :meth:`sleep` as ``sleep``.
    """

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def wait_until(condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.05
               ) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout_s`` passes (False).

    For what another process or thread does in its own time; the caller still asserts.
    """
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)
    return True
