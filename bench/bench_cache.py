"""Request cache: the file store against SQLite (WAL), diskcache and LMDB, in one run.

    python bench/bench_cache.py [--n 20000] [--dir /path/on/the/disk/to/test]

Every store holds the same checksummed entry bytes (``capjudge.cache.encode_entry``) and every
lookup verifies and parses them (``decode_entry``), so only the storage differs. Per entry it
times: ``put`` (one transaction / one fsync-ed file each, as the judge stage writes them),
``cold get`` (a fresh process opening the store and reading every key once, in random order;
the OS page cache is *not* dropped, this is a shared machine), ``warm get`` (the same process
reading them again) and a miss. Then the serialisation (``dataclasses.asdict`` against the
hand-written ``to_json``) and what the old ``if self.cache`` cost per lookup (``len`` globbed
the whole cache). LMDB runs only when the ``lmdb`` package can be imported (it is not a
dependency); ``--dir`` lets you measure a network share.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from capjudge.cache import RequestCache, decode_entry, encode_entry
from capjudge.protocol import JudgeResponse, SlotResult, Usage

STORES = ("files", "sqlite-wal", "diskcache", "lmdb")


def sample_response(i: int) -> JudgeResponse:
    """A G-VEval-like answer: ~400 chars of text and a 0-100 distribution."""
    rng = random.Random(i)
    weights = [rng.random() ** 8 for _ in range(101)]
    total = sum(weights)
    return JudgeResponse(
        status="ok",
        text=f"Item {i}: the caption names the red box and the dog but misses the tree. " * 5
             + "The final score is $85$.",
        slots=[SlotResult(name="score", values=list(range(101)),
                          probs=[w / total for w in weights], mass=0.97, source="logprobs",
                          printed=85)],
        usage=Usage(prompt_tokens=812, completion_tokens=96), model="gpt-4o-2024-08-06",
        system_fingerprint="fp_test_0001", latency_s=1.8)


def key_of(i: int) -> str:
    return f"{(i * 2654435761) % (1 << 256):064x}"  # hex spread over all shards


META = {"backend": "openai/gpt-4o-2024-08-06", "template": "gveval@1", "tag": "item"}


class Store(Protocol):
    def put(self, key: str, response: JudgeResponse) -> bool: ...
    def get(self, key: str) -> JudgeResponse | None: ...
    def close(self) -> None: ...


class FileStore:
    """The real thing: capjudge.cache.RequestCache."""

    def __init__(self, root: Path, durable: bool) -> None:
        self.cache = RequestCache(root, durable=durable)

    def put(self, key: str, response: JudgeResponse) -> bool:
        return self.cache.put(key, response, META)

    def get(self, key: str) -> JudgeResponse | None:
        return self.cache.get(key)

    def close(self) -> None:
        pass


class BytesStore:
    """Shared encode/verify/decode around a key -> bytes store."""

    def _set(self, key: str, value: bytes) -> None:
        raise NotImplementedError

    def _get(self, key: str) -> bytes | None:
        raise NotImplementedError

    def put(self, key: str, response: JudgeResponse) -> bool:
        self._set(key, encode_entry(key, response, META))
        return True

    def get(self, key: str) -> JudgeResponse | None:
        raw = self._get(key)
        if raw is None:
            return None
        response = decode_entry(raw, key)
        response.cached = True
        return response

    def close(self) -> None:
        pass


class SqliteStore(BytesStore):
    """SQLite in WAL mode, one autocommitted put each; synchronous=FULL (one fsync per
    commit, like the files) when durable, OFF otherwise."""

    def __init__(self, root: Path, durable: bool) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(root / "cache.sqlite", isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={'FULL' if durable else 'OFF'}")
        self.db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value BLOB)")

    def _set(self, key: str, value: bytes) -> None:
        self.db.execute("INSERT OR REPLACE INTO entries VALUES (?, ?)", (key, value))

    def _get(self, key: str) -> bytes | None:
        row = self.db.execute("SELECT value FROM entries WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def close(self) -> None:
        self.db.close()


class DiskcacheStore(BytesStore):
    """diskcache.Cache (SQLite in WAL mode; values this small live in the database)."""

    def __init__(self, root: Path, durable: bool) -> None:
        import diskcache

        # Its default is synchronous=NORMAL (no fsync per commit); FULL to compare like with
        # like.
        self.cache = diskcache.Cache(str(root), sqlite_synchronous=2 if durable else 0)

    def _set(self, key: str, value: bytes) -> None:
        self.cache.set(key, value)

    def _get(self, key: str) -> bytes | None:
        value = self.cache.get(key)
        return None if value is None else bytes(value)

    def close(self) -> None:
        self.cache.close()


class LmdbStore(BytesStore):
    """LMDB, one write transaction per put (synced when durable)."""

    def __init__(self, root: Path, durable: bool) -> None:
        import lmdb

        root.mkdir(parents=True, exist_ok=True)
        self.env = lmdb.open(str(root), map_size=4 << 30, sync=durable)

    def _set(self, key: str, value: bytes) -> None:
        with self.env.begin(write=True) as txn:
            txn.put(key.encode(), value)

    def _get(self, key: str) -> bytes | None:
        with self.env.begin() as txn:
            value = txn.get(key.encode())
        return None if value is None else bytes(value)

    def close(self) -> None:
        self.env.close()


def open_store(name: str, root: Path, durable: bool = True) -> Store:
    factories: dict[str, Callable[[Path, bool], Store]] = {
        "files": FileStore, "sqlite-wal": SqliteStore, "diskcache": DiskcacheStore,
        "lmdb": LmdbStore}
    return factories[name](root, durable)


def available(name: str) -> bool:
    try:
        if name == "diskcache":
            import diskcache  # noqa: F401
        elif name == "lmdb":
            import lmdb  # noqa: F401
    except ImportError:
        return False
    return True


def per_entry(seconds: float, n: int) -> float:
    return seconds / n * 1e6  # microseconds


def read_all(store: Store, keys: list[str]) -> float:
    t0 = time.perf_counter()
    for k in keys:
        if store.get(k) is None:
            raise SystemExit(f"lost entry {k}")
    return time.perf_counter() - t0


def cold_child(name: str, root: Path, n: int) -> None:
    """In a fresh process: open the store and read every key once, in random order."""
    keys = [key_of(i) for i in range(n)]
    random.Random(1).shuffle(keys)
    t0 = time.perf_counter()
    store = open_store(name, root)  # opening counts: a cold run pays it
    read_all(store, keys)
    elapsed = time.perf_counter() - t0
    store.close()
    print(json.dumps({"cold_s": elapsed}))


def timed_puts(store: Store, keys: list[str], responses: list[JudgeResponse]) -> float:
    t0 = time.perf_counter()
    for k, r in zip(keys, responses, strict=True):
        store.put(k, r)
    return time.perf_counter() - t0


def bench_store(name: str, root: Path, responses: list[JudgeResponse], n_sync: int
                ) -> dict[str, float]:
    n = len(responses)
    n_sync = min(n_sync, n)
    keys = [key_of(i) for i in range(n)]
    # The first entries as the judge stage writes them (each synced); the rest unsynced, so
    # the run stays short and shows what the sync itself costs.
    store = open_store(name, root, durable=True)
    sync_s = timed_puts(store, keys[:n_sync], responses[:n_sync])
    store.close()
    store = open_store(name, root, durable=False)
    nosync_s = timed_puts(store, keys[n_sync:], responses[n_sync:])
    store.close()
    child = subprocess.run([sys.executable, __file__, "--cold", name, str(root), str(n)],
                           capture_output=True, text=True, check=True)
    cold_s = json.loads(child.stdout.strip().splitlines()[-1])["cold_s"]
    store = open_store(name, root)
    shuffled = keys[:]
    random.Random(2).shuffle(shuffled)
    read_all(store, shuffled)  # warm it up
    # Best of 3 passes over a sample: the machine is shared, the minimum is the least noisy.
    sample = shuffled[:5000]
    warm_s = min(read_all(store, sample) for _ in range(3)) * n / len(sample)
    misses = [key_of(n + i) for i in range(min(n, 5000))]
    t0 = time.perf_counter()
    for k in misses:
        store.get(k)
    miss_s = time.perf_counter() - t0
    store.close()
    size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    return {"put": per_entry(sync_s, n_sync),
            "put_nosync": per_entry(nosync_s, n - n_sync) if n > n_sync else float("nan"),
            "cold": per_entry(cold_s, n),
            "warm": per_entry(warm_s, n), "miss": per_entry(miss_s, len(misses)),
            "mb": size / 1e6}


def timeit(fn: Callable[[], Any], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def old_from_json(data: dict[str, Any]) -> JudgeResponse:
    """from_json as it was (kwargs splat), for the ratio."""
    data = dict(data)
    data["slots"] = [SlotResult(**s) for s in data.get("slots", [])]
    data["usage"] = Usage(**data.get("usage", {}))
    return JudgeResponse(**data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20000, help="entries per store")
    parser.add_argument("--n-sync", type=int, default=1000,
                        help="of which written durably (fsync per put) and timed as 'put'")
    parser.add_argument("--dir", type=Path, default=None, help="where the stores live")
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--cold", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cold:
        cold_child(args.cold[0], Path(args.cold[1]), int(args.cold[2]))
        return
    n = args.n
    responses = [sample_response(i) for i in range(n)]
    entry_bytes = len(encode_entry(key_of(0), responses[0], META))

    # Serialisation: asdict against the hand-written copies, on 2,000 answers.
    sample = responses[:2000]
    t_asdict = timeit(lambda: [dataclasses.asdict(r) for r in sample])
    t_to = timeit(lambda: [r.to_json() for r in sample])
    dicts = [r.to_json() for r in sample]
    t_from_old = timeit(lambda: [old_from_json(d) for d in dicts])
    t_from = timeit(lambda: [JudgeResponse.from_json(d) for d in dicts])
    blobs = [encode_entry(key_of(i), r, META) for i, r in enumerate(sample)]
    t_encode = timeit(lambda: [encode_entry(key_of(i), r, META) for i, r in enumerate(sample)])
    t_decode = timeit(lambda: [decode_entry(b, key_of(i)) for i, b in enumerate(blobs)])
    m = len(sample)
    print(f"entries: {n} per store, {entry_bytes} bytes each; python {sys.version.split()[0]}")
    print("serialisation per answer:")
    print(f"  to_json   asdict {per_entry(t_asdict, m):7.1f} us   hand-written "
          f"{per_entry(t_to, m):6.1f} us   ratio {t_asdict / t_to:5.1f}x")
    print(f"  from_json kwargs {per_entry(t_from_old, m):7.1f} us   hand-written "
          f"{per_entry(t_from, m):6.1f} us   ratio {t_from_old / t_from:5.1f}x")
    print(f"  whole entry (to_json+dumps+sha256) {per_entry(t_encode, m):6.1f} us, "
          f"(sha256+loads+from_json) {per_entry(t_decode, m):6.1f} us")

    base = Path(tempfile.mkdtemp(prefix="capjudge-bench-cache-", dir=args.dir))
    results: dict[str, dict[str, float]] = {}
    try:
        for name in args.stores.split(","):
            if not available(name):
                print(f"  ({name}: not installed, skipped)")
                continue
            t0 = time.perf_counter()
            results[name] = bench_store(name, base / name, responses, args.n_sync)
            results[name]["total"] = time.perf_counter() - t0
        print(f"per entry, us; put = fsync-ed put (first {min(args.n_sync, n)}), put-nosync = "
              f"the rest; cold = fresh process (page cache not dropped); at {base}:")
        print(f"  {'store':<11} {'put':>8} {'put-nosync':>10} {'cold get':>9} {'warm get':>9} "
              f"{'miss':>6} {'MB':>6}   vs files: put  cold  warm")
        ref = results.get("files")
        for name, r in results.items():
            ratio = (f"{r['put'] / ref['put']:5.2f}x {r['cold'] / ref['cold']:5.2f}x "
                     f"{r['warm'] / ref['warm']:5.2f}x" if ref else "")
            print(f"  {name:<11} {r['put']:8.1f} {r['put_nosync']:10.1f} {r['cold']:9.1f} "
                  f"{r['warm']:9.1f} {r['miss']:6.1f} {r['mb']:6.1f}   {' ' * 9}{ratio}")

        # What `if self.cache:` cost per lookup before __bool__: a glob of every entry.
        if "files" in results:
            root = base / "files" / "requests"
            t_glob = timeit(lambda: sum(1 for _ in root.glob("*/*.json")), repeat=3)
            t_len = timeit(lambda: len(RequestCache(base / "files")), repeat=3)
            warm = results["files"]["warm"] * 1e-6
            print(f"old `if cache` (glob of {n} entries) per lookup: {t_glob * 1e3:7.1f} ms; "
                  f"len() now {t_len * 1e3:.1f} ms (off the hot path)")
            print(f"warm rerun of {n} lookups: old ~{n * (t_glob + warm):8.1f} s (quadratic), "
                  f"now {n * warm:.2f} s; ratio {(t_glob + warm) / warm:,.0f}x")
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
