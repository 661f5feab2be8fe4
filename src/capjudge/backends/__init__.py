"""Judge backends, registered by kind and imported lazily.

=========================  =================================================================
id                         backend
=========================  =================================================================
``openai/<model>``         OpenAI API or any OpenAI-compatible server (``base_url``)
``hf/<local path>``        a local transformers model (causal LM or VLM), exact distributions
``embedded/gemma-3-270m``  the default: Gemma 3 270M from a PyPI package, text-only
``llamacpp/<model>``       a GGUF (``gemma-3-270m`` or a path) on llama.cpp, in process
``fake/<script>``          deterministic scripted distributions (tests, dry runs)
=========================  =================================================================

A backend kind is a :class:`~capjudge.backends.base.Backend` subclass registered under the
part of the id before the ``/``; it declares the options it accepts, its default concurrency
and how it fingerprints its model. An installed package adds a kind through the
``capjudge.backends`` entry-point group (``kind = "package.module:Class"``), code with
``@register_backend("kind")``; see :mod:`capjudge.registry`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from capjudge.backends.base import Backend
from capjudge.protocol import BackendError
from capjudge.registry import Registry, subclass_check

DEFAULT_BACKEND = "embedded/gemma-3-270m"

BACKEND_REGISTRY: Registry[type[Backend]] = Registry("backend kind", group="capjudge.backends",
                                                     check=subclass_check(Backend))
BACKEND_REGISTRY.add_lazy("openai", "capjudge.backends.openai_backend:OpenAIBackend")
BACKEND_REGISTRY.add_lazy("hf", "capjudge.backends.hf:HFBackend")
BACKEND_REGISTRY.add_lazy("embedded", "capjudge.backends.embedded:EmbeddedBackend")
BACKEND_REGISTRY.add_lazy("llamacpp", "capjudge.backends.llamacpp:LlamaCppBackend")
BACKEND_REGISTRY.add_lazy("fake", "capjudge.backends.fake:FakeBackend")

register_backend = BACKEND_REGISTRY.decorator
"""``@register_backend("kind")`` on a :class:`Backend` subclass registers it."""

_LOADED: dict[tuple[str, str], Backend] = {}
_LOCK = threading.Lock()


def backend_class(backend_id: str) -> type[Backend]:
    """The class serving ``KIND/NAME`` (imported on first use).

    Raises:
        BackendError: a malformed id or an unknown kind (the message lists the known ones).
    """
    kind, _, rest = backend_id.partition("/")
    if not rest:
        raise BackendError(f"backend id {backend_id!r} must look like KIND/NAME "
                           f"({', '.join(k + '/...' for k in BACKEND_REGISTRY.names())})",
                           transient=False)
    if kind not in BACKEND_REGISTRY:
        raise BackendError(f"unknown backend kind {kind!r} in {backend_id!r}; known: "
                           f"{', '.join(BACKEND_REGISTRY.names())}", transient=False)
    try:
        return BACKEND_REGISTRY.get(kind)
    except KeyError as exc:  # claimed twice, or a plugin that cannot be loaded
        raise BackendError(str(exc), transient=False) from exc


def create_backend(backend_id: str, **options: Any) -> Backend:
    """Build a backend from its id (``options`` are the backend's own keyword options).

    Every backend validates its options the same way: an option it does not accept is an error
    naming it. Backends marked ``shared`` (local models) are built once per process.

    Raises:
        BackendError: unknown kind, unknown option, or the backend cannot be constructed.
    """
    cls = backend_class(backend_id)
    cls.check_options(backend_id, options)
    name = backend_id.partition("/")[2]
    if not cls.shared:
        return cls.create(name, **options)
    key = (backend_id, repr(sorted(options.items())))
    with _LOCK:
        if key not in _LOADED:
            _LOADED[key] = cls.create(name, **options)
        return _LOADED[key]


def backend_kinds() -> list[str]:
    """Every registered backend kind (nothing is imported)."""
    return BACKEND_REGISTRY.names()


def default_concurrency(backend_id: str, options: Mapping[str, object]) -> int:
    """How many requests a judge on this backend runs at once by default.

    Found without building the backend (the flow sizes its worker pool with it).
    """
    return backend_class(backend_id).concurrency_for(options)


__all__ = ["BACKEND_REGISTRY", "DEFAULT_BACKEND", "Backend", "BackendError", "backend_class",
           "backend_kinds", "create_backend", "default_concurrency", "register_backend"]
