"""Content-addressed request cache: one checksummed JSON file per answered request.

The key (see :meth:`JudgeRequest.cache_key`) covers the backend id, the model snapshot, the
rendered prompt with its template id@version, the media *content* hashes and the decoding
settings, never file names. Failed or empty answers are never stored: a rerun retries them.

Layout and format
    ``<root>/requests/<key[:2]>/<key>.json`` (the layout of earlier versions, so an existing
    cache keeps serving). A file is one JSON object whose first bytes are fixed::

        {"sha256":"<64 hex of ENTRY>","entry":ENTRY}

    where ENTRY is ``{"key": ..., "meta": ..., "response": JudgeResponse.to_json()}``, the very
    object earlier versions wrote as the whole file. The reader slices ENTRY out by position and
    checks its SHA-256 before parsing it, so a truncated, bit-flipped or otherwise damaged entry
    is a miss with a logged warning (the request is asked again and the entry replaced); the
    file stays valid JSON for ``jq``. Files without the header were written by earlier versions
    (they carry no checksum); they are served as before and replaced whenever rewritten.

Concurrency and crashes
    A write goes to a temporary file in the same shard directory, named with host, pid, thread
    and random bits (``O_EXCL``), is ``fsync``-ed, then renamed over the final name. Rename is
    atomic on POSIX and on NFS (a single RENAME on the server), so any number of processes,
    threads and hosts may write at once, a reader sees a whole entry or none, and a run killed at
    any moment (even ``kill -9``) leaves whole answers or nothing; the last writer of a key
    wins, which is harmless because every writer stores an answer to the same question. The
    file is synced before the rename so that a power loss cannot leave an empty file under the
    final name (the checksum would catch it anyway; the sync costs well under a model call).
    The directory is not synced: a rename lost to a power cut is just a miss.

Hot path
    ``get`` is one ``open`` + two ``read`` (a miss is one failed ``open``), ``put`` one
    create/write/fsync/rename (plus one ``mkdir`` the first time a shard is used); neither
    lists a directory, so lookups stay O(1) at millions of entries (256 shards; ext4, XFS and
    NFS look names up by hash/B-tree, not by scanning). ``bool(cache)`` is always True and never
    counts; ``len(cache)`` does count (a directory walk) and is for tests and reports only.

Why files rather than a database
    The cache must work on a shared path (NFS-like) written by several hosts at once. SQLite
    (and diskcache, which is SQLite underneath) relies on POSIX byte-range locks and, in WAL
    mode, on a shared-memory index that only works on one host: its docs warn against network
    filesystems and WAL explicitly does not work over them. LMDB locks through a memory-mapped
    lock file and is documented as unusable on remote filesystems too. One file per entry with
    atomic rename needs nothing but rename semantics, which NFS provides. Measured on this
    machine (``python bench/bench_cache.py``: 20,000 entries of 3.4 KB, a G-VEval-like answer
    with a 0-100 distribution; local ext4; 2 cores shared with other work), microseconds per
    entry in one run:

    ==========  =========  ============  ========  ========  ====
    store       put+fsync  put, no sync  cold get  warm get  miss
    ==========  =========  ============  ========  ========  ====
    files       1339       318           101       86        4.8
    SQLite WAL  589        180           97        93        4.9
    diskcache   775        273           107       80        8.4
    LMDB        2542       174           91        77        1.3
    ==========  =========  ============  ========  ========  ====

    Over six runs, LMDB's warm gets were level with the files' or up to 50% faster in five (it
    makes no open/read system calls) and 16% slower in one; SQLite's within 10% either way,
    diskcache's from 20% faster to 50% slower. ~85 us of every lookup is verifying and parsing
    the entry (JSON floats), shared by all stores, so even the best case saves under a second
    per 20,000 answers. Synced puts swung from 0.3x to 1.9x of the files' with the disk load
    of the other users; unsynced, SQLite and LMDB put ~1.7x faster. Neither matters for this
    cache: a put follows a model call of seconds, while a cache that corrupts or deadlocks on a
    shared path does matter. No store wins clearly, so no dependency is added. (The old
    ``if self.cache`` globbed all 20,000 entries per lookup: ~45 ms each, a warm rerun of
    ~950 s against ~1.8 s now.)
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from capjudge.protocol import JudgeResponse
from capjudge.records import JSONValue
from capjudge.util.atomic import HOST, is_orphan

log = logging.getLogger(__name__)

# text_only is a real answer too (the server returned no log-probabilities): asking again
# would cost the same and get the same.
CACHEABLE = frozenset({"ok", "low_mass", "text_only"})


def is_cacheable(response: JudgeResponse) -> bool:
    """Whether an answer may be stored: a real answer with content.

    Real means a ``CACHEABLE`` status; content means generated text, or the log-likelihoods a
    likelihood request asked for. Failed and empty answers are never stored, so a rerun asks
    them again.
    """
    return response.status in CACHEABLE and bool(response.text.strip() or response.logliks)

# Fixed framing of an entry file: the checksum sits at a known offset so the reader can verify
# the entry's bytes before paying for a JSON parse, and detect truncation without one.
_HEAD = b'{"sha256":"'
_MID = b'","entry":'
_TAIL = b"}"
_DIGEST_LEN = 64
_BODY_AT = len(_HEAD) + _DIGEST_LEN + len(_MID)

# The temp name carries the host and pid so capjudge.util.atomic.clean_orphans can tell a dead
# writer's leftover from a live writer's file.
_HOST = HOST


def _read(path: str) -> bytes:
    # os.open/os.read rather than open(): no io buffer objects, about 5 us less per lookup.
    # Read until an empty read rather than trusting one short read, so a file still growing
    # (it never is: entries appear by rename) or a short network read cannot cut an entry.
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def default_cache_dir() -> Path:
    """The request cache's default root.

    Returns:
        ``$CAPJUDGE_CACHE_DIR`` if set, else ``.capjudge-cache`` in the working directory.
    """
    return Path(os.environ.get("CAPJUDGE_CACHE_DIR", ".capjudge-cache"))


def encode_entry(key: str, response: JudgeResponse, meta: Mapping[str, JSONValue] | None = None
                 ) -> bytes:
    """The bytes of one cache file (framing, checksum and entry).

    Args:
        key: The request's cache key.
        response: The answer to store (its ``cached`` flag is stored as False).
        meta: Free-form provenance (backend, template, tag), stored but never read back.

    Returns:
        The complete file contents.

    Raises:
        TypeError, ValueError: ``meta`` or the response holds something JSON cannot encode.
    """
    data = response.to_json()
    data["cached"] = False  # provenance of *this* object, not of the answer
    entry = json.dumps({"key": key, "meta": meta or {}, "response": data},
                       ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    digest = hashlib.sha256(entry).hexdigest().encode("ascii")
    return b"".join((_HEAD, digest, _MID, entry, _TAIL))


def decode_entry(raw: bytes, key: str) -> JudgeResponse:
    """Verify and parse one cache file.

    Args:
        raw: The file's bytes.
        key: The key it was looked up under (a file holding another key is rejected).

    Returns:
        The stored answer (``cached`` not yet set).

    Raises:
        ValueError: The file is truncated, fails its checksum, or does not hold an answer to
            ``key``; the message says which.
    """
    if raw.startswith(_HEAD):
        if (len(raw) < _BODY_AT + len(_TAIL) or raw[_BODY_AT - len(_MID):_BODY_AT] != _MID
                or not raw.endswith(_TAIL)):
            raise ValueError(f"truncated or malformed ({len(raw)} bytes)")
        body = raw[_BODY_AT:len(raw) - len(_TAIL)]
        digest = raw[len(_HEAD):len(_HEAD) + _DIGEST_LEN]
        if hashlib.sha256(body).hexdigest().encode("ascii") != digest:
            raise ValueError("checksum mismatch")
    else:
        body = raw  # written by an earlier version: the entry itself, without a checksum
    try:
        data = json.loads(body)
        if data["key"] != key:
            raise ValueError(f"holds key {str(data['key'])[:16]}...")
        return JudgeResponse.from_json(data["response"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        # ValueError covers JSONDecodeError and UnicodeDecodeError.
        raise ValueError(f"unreadable entry ({type(exc).__name__}: {exc})") from None


class RequestCache:
    """Directory of ``<key[:2]>/<key>.json`` files (see the module docstring).

    Safe to share between threads, processes and hosts. Never raises for an I/O failure on
    ``get`` or ``put``: a failed read is a miss, a failed write returns False; each kind of
    failure (errno) is logged as a warning once per cache object, later ones at debug level.

    Attributes:
        root: The ``requests`` directory under the root given.
        durable: Whether ``put`` fsyncs each file before renaming it into place.
        write_failures: How many ``put`` calls failed to write (not counting answers that are
            not cacheable).
    """

    def __init__(self, root: str | Path, *, durable: bool = True) -> None:
        """Open (and create if needed) a cache.

        Args:
            root: The cache directory; entries live under ``root/requests``.
            durable: fsync each entry before it becomes visible (default). Off only for
                throw-away caches where a power loss may lose entries.
        """
        self.root = Path(root) / "requests"
        self.durable = durable
        self.write_failures = 0
        self._root = os.fspath(self.root)
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            # A read-only cache (e.g. a shared warm cache mounted ro) still serves reads.
            self._warn_once("open", exc, f"cannot create cache directory {self.root}")

    def _path(self, key: str) -> str:
        # Keys are hex digests; anything that could leave the shard, or pass for a temp file
        # (leading dot), is a caller's bug and must not touch the disk.
        if len(key) < 3 or key[0] == "." or "/" in key or os.sep in key:
            raise ValueError(f"not a cache key: {key!r}")
        # Plain string joins: this runs twice per request and Path objects cost more.
        return f"{self._root}{os.sep}{key[:2]}{os.sep}{key}.json"

    def _warn_once(self, op: str, exc: BaseException, what: str) -> None:
        code = getattr(exc, "errno", None)
        name = errno.errorcode.get(code, "") if isinstance(code, int) else ""
        kind = f"{op}:{name or type(exc).__name__}"
        with self._lock:
            first = kind not in self._warned
            self._warned.add(kind)
        if first:
            log.warning("request cache: %s (%s: %s); further %s failures are logged at debug "
                        "level", what, type(exc).__name__, exc, kind)
        else:
            log.debug("request cache: %s (%s: %s)", what, type(exc).__name__, exc)

    def get(self, key: str) -> JudgeResponse | None:
        """Look an answer up.

        Args:
            key: The request's cache key.

        Returns:
            The stored answer with ``cached = True`` and its ``cache_key``, or None when there
            is none, or when the entry is damaged (logged as a warning; the next ``put``
            replaces it) or unreadable.

        Raises:
            ValueError: ``key`` is not a key (empty, a path, or starting with a dot).
        """
        path = self._path(key)
        try:
            raw = _read(path)
        except (FileNotFoundError, NotADirectoryError):
            # NotADirectoryError: a file where the shard should be; put() reports that one.
            return None
        except OSError as exc:
            self._warn_once("read", exc, f"cannot read {path}")
            return None
        try:
            response = decode_entry(raw, key)
        except ValueError as exc:
            log.warning("request cache: ignoring damaged entry %s: %s", path, exc)
            return None
        response.cached = True
        response.cache_key = key
        return response

    def put(self, key: str, response: JudgeResponse, meta: Mapping[str, JSONValue] | None = None
            ) -> bool:
        """Store an answer if it is a real one.

        Args:
            key: The request's cache key.
            response: The answer; failed (status not in :data:`CACHEABLE`) or empty ones are
                not stored.
            meta: Free-form provenance stored with it.

        Returns:
            Whether the answer is now stored. False for an answer that is not cacheable and for
            a failed write (read-only or missing permissions, disk full, a file where the shard
            directory should be, ...), which is logged and counted in ``write_failures`` but
            never raised: the caller keeps the answer and goes on.

        Raises:
            ValueError: ``key`` is not a key (a caller's bug, not a write failure).
        """
        if not is_cacheable(response):
            return False
        try:
            data = encode_entry(key, response, meta)
        except (TypeError, ValueError) as exc:
            self._fail("encode", exc, f"cannot encode the answer for {key[:16]}...")
            return False
        path = self._path(key)
        shard = os.path.dirname(path)
        # Unique across hosts sharing the directory, processes, threads and repeated attempts.
        tmp = (f"{shard}{os.sep}.{key}.{_HOST}.{os.getpid()}.{threading.get_ident()}."
               f"{os.urandom(4).hex()}.tmp")
        try:
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileNotFoundError:
                os.makedirs(shard, exist_ok=True)  # first entry of this shard
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except OSError as exc:
            self._fail("write", exc, f"cannot create {tmp}")
            return False
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                if self.durable:
                    os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass  # already gone, or the directory turned unwritable: nothing more to do
            self._fail("write", exc, f"cannot write {path}")
            return False
        return True

    def _lease(self, key: str) -> str:
        return self._path(key)[: -len(".json")] + ".lease"

    def claim(self, key: str, lease_s: float = 900.0) -> bool:
        """Claim the right to ask ``key`` now; False while another live asker holds it.

        A claim is a ``<key>.lease`` file created with ``O_EXCL`` next to where the answer
        will go, holding the claimer's host, pid and thread. Two runs started together on one
        cache thus ask each question once: the second waits for the first's answer instead of
        paying for it again. A claim older than ``lease_s`` seconds, or of a dead process of
        this host (``kill -9``), is taken over. Where no lease can be written (a read-only
        cache) the claim is granted: asking is always allowed.

        Returns:
            True: the caller asks (and calls :meth:`release` after storing the answer).
        """
        path = self._lease(key)
        mine = f"{_HOST} {os.getpid()} {threading.get_ident()}".encode()
        for _ in range(3):
            try:
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                except FileNotFoundError:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                if not self._stale_lease(path, lease_s):
                    return False
                try:
                    os.unlink(path)  # a dead or stuck claimer's: take it over
                except FileNotFoundError:
                    pass
                except OSError:
                    return True
                continue
            except OSError:
                return True
            with os.fdopen(fd, "wb") as f:
                f.write(mine)
            return True
        return True

    def _stale_lease(self, path: str, lease_s: float) -> bool:
        try:
            age = time.time() - os.stat(path).st_mtime
            owner = _read(path).decode("utf-8", "replace").split()
        except FileNotFoundError:
            return True  # released meanwhile
        except OSError:
            return False
        if age > lease_s:
            return True
        if len(owner) >= 2 and owner[0] == _HOST and owner[1].isdigit():
            try:
                os.kill(int(owner[1]), 0)
            except ProcessLookupError:
                return True
            except OSError:
                return False
        return False

    def release(self, key: str) -> None:
        """Drop this thread's claim on ``key`` (another claimer's is left alone)."""
        path = self._lease(key)
        mine = f"{_HOST} {os.getpid()} {threading.get_ident()}".encode()
        try:
            if _read(path) == mine:
                os.unlink(path)
        except OSError:
            pass

    def clean(self, lease_s: float = 900.0) -> int:
        """Remove what dead writers left: orphan temporaries and stale claims; returns how many.

        Walks every shard (O(entries), run once when a process opens the cache); a live
        writer's temporary and a live claim are never touched.
        """
        removed = 0
        now = time.time()
        try:
            shards = [e.path for e in os.scandir(self._root)
                      if len(e.name) == 2 and e.is_dir(follow_symlinks=False)]
        except OSError:
            return 0
        for shard in shards:
            try:
                entries = list(os.scandir(shard))
            except OSError:
                continue
            for e in entries:
                try:
                    if e.name.startswith(".") and e.name.endswith(".tmp"):
                        if is_orphan(e.name, e.stat(follow_symlinks=False).st_mtime, now):
                            os.unlink(e.path)
                            removed += 1
                    elif e.name.endswith(".lease") and self._stale_lease(e.path, lease_s):
                        os.unlink(e.path)
                        removed += 1
                except OSError:
                    continue
        if removed:
            log.info("request cache: removed %d orphan temporary file(s) and stale claim(s) "
                     "under %s", removed, self.root)
        return removed

    def _fail(self, op: str, exc: BaseException, what: str) -> None:
        with self._lock:
            self.write_failures += 1
        self._warn_once(op, exc, what)

    def __bool__(self) -> bool:
        # Without this, ``if cache:`` falls back to __len__, a walk of the whole cache.
        return True

    def __len__(self) -> int:
        """The number of entries: walks every shard, O(entries); not for hot paths."""
        n = 0
        try:
            shards = os.scandir(self._root)
        except OSError:
            return 0
        with shards:
            for shard in shards:
                if len(shard.name) != 2 or not shard.is_dir():
                    continue
                try:
                    with os.scandir(shard.path) as files:
                        # Temp files start with "." and end in ".tmp": never counted.
                        n += sum(1 for e in files
                                 if e.name.endswith(".json") and not e.name.startswith("."))
                except OSError:
                    continue
        return n

    def __repr__(self) -> str:
        return f"RequestCache({str(self.root.parent)!r})"
