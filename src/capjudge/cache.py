"""Content-addressed request cache: one JSON file per answered request, written atomically.

The key (see :meth:`JudgeRequest.cache_key`) covers the backend id, the model snapshot, the
rendered prompt with its template id@version, the media *content* hashes and the decoding
settings, never file names. A write goes to a temporary file and is renamed into place, so a run
killed at any moment (even ``kill -9``) leaves either the whole answer or nothing; a rerun asks
only what is missing. Failed or empty answers are never stored: a rerun retries them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from capjudge.backends.base import JudgeResponse

CACHEABLE = frozenset({"ok", "low_mass"})


def default_cache_dir() -> Path:
    """``$CAPJUDGE_CACHE_DIR``, else ``.capjudge-cache`` in the working directory."""
    return Path(os.environ.get("CAPJUDGE_CACHE_DIR", ".capjudge-cache"))


class RequestCache:
    """Directory of ``<key[:2]>/<key>.json`` files."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root) / "requests"
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> JudgeResponse | None:
        """The stored answer, or None (a corrupt file counts as missing and is replaced)."""
        path = self._path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            response = JudgeResponse.from_json(data["response"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return None
        response.cached = True
        return response

    def put(self, key: str, response: JudgeResponse, meta: dict[str, Any] | None = None
            ) -> bool:
        """Store an answer if it is a real one; returns whether it was stored."""
        if response.status not in CACHEABLE or not response.text.strip():
            return False
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{id(response)}.tmp")
        payload = {"key": key, "meta": meta or {}, "response": response.to_json()}
        tmp.write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)
        return True

    def __len__(self) -> int:
        return sum(1 for _ in self.root.glob("*/*.json"))
