"""Judge backends, chosen by string id and imported lazily.

=========================  =================================================================
id                         backend
=========================  =================================================================
``openai/<model>``         OpenAI API or any OpenAI-compatible server (``base_url``)
``hf/<local path>``        a local transformers model (causal LM or VLM), exact distributions
``embedded/gemma-3-270m``  the default: Gemma 3 270M from a PyPI package, text-only
``fake/<script>``          deterministic scripted distributions (tests, dry runs)
=========================  =================================================================
"""

from __future__ import annotations

import threading
from typing import Any

from capjudge.backends.base import Backend, BackendError

DEFAULT_BACKEND = "embedded/gemma-3-270m"
_LOADED: dict[tuple[str, str], Backend] = {}
_LOCK = threading.Lock()


def create_backend(backend_id: str, **options: Any) -> Backend:
    """Build a backend from its id (``options`` are backend-specific keyword arguments).

    Local models are loaded once per process and shared (loading costs seconds and memory).

    Raises:
        BackendError: unknown kind, or the backend cannot be constructed.
    """
    kind, _, rest = backend_id.partition("/")
    if not rest:
        raise BackendError(f"backend id {backend_id!r} must look like KIND/NAME "
                           "(openai/..., hf/..., embedded/..., fake/...)", transient=False)
    if kind == "openai":
        from capjudge.backends.openai_backend import OpenAIBackend

        return OpenAIBackend(rest, **options)
    if kind == "fake":
        from capjudge.backends.fake import FakeBackend

        return FakeBackend(rest, **{k: v for k, v in options.items() if k == "min_mass"})
    if kind in ("hf", "embedded"):
        local = {k: v for k, v in options.items()
                 if k in {"device", "dtype", "batch_size", "min_mass", "max_tree_rows", "prune"}}
        key = (backend_id, repr(sorted(local.items())))
        with _LOCK:
            if key not in _LOADED:
                from capjudge.backends.hf import HFBackend

                if kind == "embedded":
                    from capjudge.backends.embedded import prepare_embedded

                    path = prepare_embedded(rest)
                    _LOADED[key] = HFBackend(path, backend_id=backend_id, **local)
                else:
                    _LOADED[key] = HFBackend(rest, backend_id=backend_id, **local)
            return _LOADED[key]
    raise BackendError(f"unknown backend kind {kind!r} in {backend_id!r}", transient=False)


__all__ = ["DEFAULT_BACKEND", "Backend", "BackendError", "create_backend"]
