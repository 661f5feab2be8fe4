"""Judge-time media check: a judge is sent exactly the bytes ingest hashed, from where it allowed.

Ingest checked and hashed every picture, but files can change afterwards: edited, replaced, or a
symlink inside the media root retargeted to a file outside it or to something that is not an
image. Two checks keep that from reaching a judge (or the request cache, whose keys name the
ingest-time hash):

1. Before a request is sent, :func:`verify_request` resolves each picture in it against an
   absolute root (:meth:`capjudge.item.Item.resolve`), follows symlinks and checks that the real
   file lies inside the item's media root or its ingest folder (tiles and normalised copies are
   made there), then recomputes the file's sha256 and compares it with the one recorded at
   ingest. The request is rebuilt on the real path, so a symlink retargeted later changes
   nothing. A failure is that request's ``error`` with the reason, never a crash and never a
   silent skip. Hashes are remembered per run by (real path, device, inode, size, mtime), so a
   picture shared by many items, modes and criteria is read once.
2. When a backend builds the request it reads the picture with :func:`read_verified`: the bytes
   are read once, hashed in memory and used only if they match, so what is uploaded is exactly
   what was hashed, even if the file is swapped between the check and the send.

Items built in memory (``capjudge score``, meta-evaluation) have no ingest folder
(``base_dir`` is None): their paths come from the caller in this process, so only the hash is
checked for them.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import replace
from pathlib import Path

from capjudge.item import Item
from capjudge.protocol import BackendError, ImagePart, JudgeRequest, Message


class MediaChangedError(BackendError):
    """A picture no longer matches what ingest recorded (or cannot be read): not retried."""

    def __init__(self, message: str) -> None:
        super().__init__(message, transient=False)


class HashCache:
    """sha256 of files keyed by (real path, device, inode, size, mtime); thread-safe.

    A changed file gets a new key (new size, mtime or inode on replacement), so the cache never
    hides a change that matters; the send-time :func:`read_verified` hashes the uploaded bytes
    themselves in any case.
    """

    def __init__(self, max_entries: int = 200_000) -> None:
        self._hashes: dict[tuple[str, int, int, int, int], str] = {}
        self._lock = threading.Lock()
        self.max_entries = max_entries

    def sha256(self, path: str) -> str:
        """The file's sha256 (``path`` should be a real path)."""
        st = os.stat(path)
        key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            known = self._hashes.get(key)
        if known is not None:
            return known
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        value = digest.hexdigest()
        with self._lock:
            if len(self._hashes) >= self.max_entries:
                self._hashes.clear()  # a bound on memory; the next look-ups rehash
            self._hashes[key] = value
        return value


HASHES = HashCache()


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def allowed_roots(item: Item) -> list[str] | None:
    """Real paths a picture of ``item`` may lie in: its media root and its ingest folder.

    None for an item built in memory (no containment check, see the module docstring).
    """
    if item.base_dir is None:
        return None
    return [os.path.realpath(item.root()), os.path.realpath(item.base_dir)]


def verify_image(part: ImagePart, item: Item, hashes: HashCache = HASHES) -> ImagePart:
    """The picture on its verified real path.

    Raises:
        MediaChangedError: missing, outside the item's roots, not a regular file, unreadable,
            or different from what ingest hashed (the message says which).
    """
    shown = part.path
    real = os.path.realpath(part.path)
    roots = allowed_roots(item)
    if roots is not None and not any(_inside(real, r) for r in roots):
        raise MediaChangedError(f"picture {shown!r} now resolves to {real!r}, outside the "
                                f"media root {roots[0]!r} and the ingest folder {roots[1]!r}; "
                                "not sent (was a symlink retargeted after ingest?)")
    if not os.path.exists(real):
        raise MediaChangedError(f"picture {shown!r} is missing (it was there at ingest)")
    if not os.path.isfile(real):
        raise MediaChangedError(f"picture {shown!r} is not a regular file any more")
    try:
        actual = hashes.sha256(real)
    except OSError as exc:
        raise MediaChangedError(f"picture {shown!r} cannot be read: {exc}") from exc
    if actual != part.sha256:
        raise MediaChangedError(f"picture {shown!r} changed since ingest (sha256 {actual[:12]}… "
                                f"instead of {part.sha256[:12]}…); re-run ingest to judge the "
                                "new content")
    return replace(part, path=real)


def verify_request(request: JudgeRequest, item: Item, hashes: HashCache = HASHES
                   ) -> JudgeRequest:
    """``request`` with every picture verified (:func:`verify_image`) and on its real path.

    A request without pictures is returned as it is.

    Raises:
        MediaChangedError: some picture failed the check.
    """
    if not any(m.images for m in request.messages):
        return request
    messages = tuple(
        Message(m.role, tuple(verify_image(p, item, hashes) if isinstance(p, ImagePart) else p
                              for p in m.parts)) if m.images else m
        for m in request.messages)
    return replace(request, messages=messages)


def read_verified(part: ImagePart) -> bytes:
    """The picture's bytes, read once and returned only if they hash to ``part.sha256``.

    Raises:
        MediaChangedError: unreadable or changed (what would be sent is not what was hashed).
    """
    try:
        data = Path(part.path).read_bytes()
    except OSError as exc:
        raise MediaChangedError(f"picture {part.path!r} cannot be read: {exc}") from exc
    actual = hashlib.sha256(data).hexdigest()
    if actual != part.sha256:
        raise MediaChangedError(f"picture {part.path!r} changed before it was sent (sha256 "
                                f"{actual[:12]}… instead of {part.sha256[:12]}…); not sent")
    return data


__all__ = ["HASHES", "HashCache", "MediaChangedError", "allowed_roots", "read_verified",
           "verify_image", "verify_request"]
