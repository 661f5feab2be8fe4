"""Frame sampling: input seeking vs decoding every frame, on the same clip, in one run.

    python bench/bench_frames.py [--seconds 10] [--repeat 5]

Prints the median time of each way to get the first/middle/last frames, and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from PIL import Image, ImageDraw

from capjudge.media import decode_frames_all, decode_frames_seek, frame_indices, probe_video
from capjudge.sample import encode_video


def make_clip(path: Path, seconds: int, fps: int = 25, size: tuple[int, int] = (640, 360)
              ) -> None:
    frames = []
    for i in range(seconds * fps):
        img = Image.new("RGB", size, (30, 30, 30))
        ImageDraw.Draw(img).ellipse((i % 600, 150, i % 600 + 40, 190), fill=(200, 50, 50))
        frames.append(img)
    encode_video(frames, path, fps=fps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        clip = Path(tmp) / "clip.mp4"
        make_clip(clip, args.seconds)
        seek_times, full_times, probe_times = [], [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            info = probe_video(str(clip))
            t1 = time.perf_counter()
            idx = frame_indices(info.n_frames, "first_middle_last")
            decode_frames_seek(str(clip), info, idx)
            t2 = time.perf_counter()
            decode_frames_all(str(clip), idx)
            t3 = time.perf_counter()
            probe_times.append(t1 - t0)
            seek_times.append(t2 - t0)  # seeking needs the probe; count it
            full_times.append(t3 - t2)
        seek, full = statistics.median(seek_times), statistics.median(full_times)
        print(f"clip: {args.seconds} s, 640x360, {info.n_frames} frames, H.264")
        print(f"probe (demux only):          {statistics.median(probe_times) * 1e3:8.1f} ms")
        print(f"seek (probe + 3 frames):     {seek * 1e3:8.1f} ms")
        print(f"decode all frames:           {full * 1e3:8.1f} ms")
        print(f"ratio decode-all / seek:     {full / seek:8.1f}x")


if __name__ == "__main__":
    main()
