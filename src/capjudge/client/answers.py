"""What a client keeps of its answers.

Cache keys, look-ups re-read under the current settings, and writes that never fail a run.
"""

from __future__ import annotations

import logging

from capjudge.backends.base import Backend
from capjudge.cache import RequestCache, is_cacheable
from capjudge.protocol import JudgeRequest, JudgeResponse
from capjudge.reading import READING_RULES_VERSION
from capjudge.records import JSONValue

log = logging.getLogger(__name__)


class CachedAnswers:
    """One client's view of the request cache.

    Args:
        backend: the backend answering (its id keys the cache; it re-reads stored answers).
        cache: the request cache (None: nothing is cached).
        snapshot: the model snapshot (with the fingerprint) that joins every key.
    """

    def __init__(self, backend: Backend, cache: RequestCache | None, snapshot: str) -> None:
        self.backend = backend
        self.cache = cache
        self.snapshot = snapshot

    def key(self, request: JudgeRequest) -> str:
        """The request's cache key under this backend and model snapshot."""
        return request.cache_key(self.backend.backend_id, self.snapshot)

    def lookup(self, request: JudgeRequest, key: str) -> JudgeResponse | None:
        """The cached answer to ``request``, its statuses derived from the current settings.

        The cache stores the answer (and, where the backend keeps it, its raw form); whether
        it is ``low_mass`` is decided now by :meth:`Backend.reread`, so changing ``min_mass``
        or the reading rules re-reads cached answers and never asks again.
        """
        if self.cache is None:
            return None
        hit = self.cache.get(key)
        if hit is None:
            return None
        if self.backend.ask_again(request, hit):
            return None
        try:
            hit = self.backend.reread(request, hit)
        except Exception:  # noqa: BLE001 - a re-read that fails keeps the stored reading
            log.exception("re-reading a cached answer failed; its stored reading is kept")
        hit.cached = True
        hit.cache_key = key
        return hit

    def read_with(self) -> dict[str, JSONValue]:
        """The settings an answer's statuses are derived with (stored with the answer)."""
        out: dict[str, JSONValue] = {"reading_rules": READING_RULES_VERSION}
        min_mass = getattr(self.backend, "min_mass", None)
        if isinstance(min_mass, (int, float)):
            out["min_mass"] = float(min_mass)
        min_p = getattr(self.backend, "follow_up_min_p", None)
        if isinstance(min_p, float):
            out["follow_up_min_p"] = min_p
        confirm = getattr(self.backend, "confirm", None)
        if isinstance(confirm, str):
            # How off-contract verdicts were confirmed (capjudge.reading.confirm): a change
            # re-reads the stored answer (what it cannot confirm from it stays unconfirmed).
            out["confirm"] = confirm
        return out

    def store(self, key: str, answer: JudgeResponse, request: JudgeRequest) -> bool:
        """Cache a finished answer with the settings it was read with.

        Returns False when a write that should have happened failed (counted by the caller,
        logged here), never raises: the answer is still returned and written to the stage's
        output.
        """
        if self.cache is None:
            return True
        answer.read_with = self.read_with()
        meta = {"backend": self.backend.backend_id, "template": request.template,
                "tag": request.tag}
        try:
            stored = self.cache.put(key, answer, meta)
        except OSError as exc:  # a blocked shard directory, a full or read-only disk
            log.warning("request cache write failed (%s); the answer is kept in this run's "
                        "output but will be asked again next time", exc)
            stored = None
        return not (stored is None or (stored is False and is_cacheable(answer)))
