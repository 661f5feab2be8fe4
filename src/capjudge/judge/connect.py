"""A judge's backend and client: built, shared per process, or described without building.

:func:`make_backend` and :func:`make_client` build what answers a judge's requests;
:func:`shared_client` keeps one of each per judge config per process (chunks on one worker
share the model, cache and rate limiter); :class:`UnbuiltBackend` says what a backend's class
declares without loading anything, and :func:`check_reachable` asks a remote server before a
stage starts. Re-exported by :mod:`capjudge.judge`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capjudge.backends import create_backend
from capjudge.backends.base import Backend, Capabilities
from capjudge.client import JudgeClient, build_client
from capjudge.judge.config import JudgeConfig
from capjudge.protocol import BackendFacts


def backend_options(config: JudgeConfig) -> dict[str, Any]:
    """The keyword options the judge's backend is built with (the judge's settings filled in)."""
    from capjudge.backends import backend_class

    options = dict(config.backend_options)
    options.setdefault("min_mass", config.min_mass)
    if "timeout_s" in backend_class(config.backend).options:
        # The judge's timeout_s is the client's (backend_options.timeout_s wins when set).
        options.setdefault("timeout_s", config.timeout_s)
    return options


def make_backend(config: JudgeConfig) -> Backend:
    """The configured backend (local models are loaded once per process)."""
    return create_backend(config.backend, **backend_options(config))


@dataclass(frozen=True)
class UnbuiltBackend:
    """A judge's backend before it is built: what its class says without loading anything.

    Planning needs only the capabilities (vision); rows of recorded skips need only the id and
    snapshot. When every (item, mode) is a skip the backend is never built
    (:meth:`Backend.capabilities_for`, :meth:`Backend.describe_unloaded`).
    """

    backend_id: str
    capabilities: Capabilities
    config: JudgeConfig

    @classmethod
    def of(cls, config: JudgeConfig) -> UnbuiltBackend | None:
        """The judge's backend as its class declares it; None when only a built one can say.

        Raises:
            BackendError: an unknown kind or option, or options the class refuses.
        """
        from capjudge.backends import backend_class

        kind = backend_class(config.backend)
        options = backend_options(config)
        kind.check_options(config.backend, options)
        capabilities = kind.capabilities_for(config.backend.partition("/")[2], options)
        return None if capabilities is None else cls(config.backend, capabilities, config)

    def describe(self) -> BackendFacts | None:
        """Its lineage facts, snapshot included, without building it (None: it must be)."""
        from capjudge.backends import backend_class

        return backend_class(self.backend_id).describe_unloaded(
            self.backend_id.partition("/")[2], backend_options(self.config))


def check_reachable(config: JudgeConfig) -> None:
    """Ask a remote judge's server what it serves, before a stage starts.

    A wrong address then stops the stage with one line naming it, before any task runs (and
    before any cached answer could stand in for the server). Local models are loaded by the
    stage itself: nothing to reach here.

    Raises:
        BackendError: the server cannot be reached, or the backend refuses its options.
    """
    from capjudge.backends import backend_class

    if not backend_class(config.backend).shared:
        make_backend(config).connect()


def make_client(config: JudgeConfig, backend: Backend,
                progress: Callable[[int, int], None] | None = None,
                shared_dir: str | Path | None = None) -> JudgeClient:
    """The cached, retrying, rate-limited client around a backend.

    Args:
        config: the judge.
        backend: what answers.
        progress: called with (done, total) requests.
        shared_dir: keep the rpm/tpm window and the ``Retry-After`` pause in files here, shared
            by every process and host that uses the same folder (:mod:`capjudge.util.limits`);
            None: per client.
    """
    return build_client(backend, cache_dir=config.cache_dir, max_attempts=config.max_attempts,
                        backoff_base_s=config.backoff_base_s, rpm=config.rpm, tpm=config.tpm,
                        concurrency=config.concurrency, progress=progress,
                        fingerprint=config.fingerprint,
                        max_retry_after_s=config.max_retry_after_s,
                        rate_window_s=config.rate_window_s, shared_dir=shared_dir)


_SHARED: dict[str, tuple[Backend, JudgeClient]] = {}


_SHARED_LOCK = threading.Lock()


def shared_client(config: JudgeConfig, shared_dir: str | None = None
                  ) -> tuple[Backend, JudgeClient]:
    """One backend and client per judge config per process, keyed by the config's stable hash.

    Chunks running on threads of one worker share the model, the cache and the rate limiter.
    With ``shared_dir`` the limiter and the ``Retry-After`` pause are also shared with the
    other processes of the run (see :func:`make_client`).
    """
    key = f"{config.stable_hash()}|{shared_dir or ''}"
    with _SHARED_LOCK:
        if key not in _SHARED:
            backend = make_backend(config)
            _SHARED[key] = (backend, make_client(config, backend, shared_dir=shared_dir))
        return _SHARED[key]
