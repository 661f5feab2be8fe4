"""Where a stage's tasks run: ``params.yaml: runner`` (threads, a Dask cluster or a Ray cluster).

.. code-block:: yaml

    runner:
      kind: threads        # threads | dask | ray
      address: null        # dask: "tcp://scheduler:8786"; ray: "ray://head:10001" or "auto"
      workers: null        # local pool/cluster size (threads, or worker processes); null: the
                           # stage's own default (a judge: its backend's concurrency), at
                           # most one process per core for a local cluster
      threads_per_worker: 1
      shared_dir: null     # rpm/tpm window and Retry-After pause of distributed judges
                           # (default: <judge cache_dir>/limits)

``threads`` is one process (the default, and the fastest on one small machine). ``dask`` and
``ray`` without ``address`` start a local cluster of ``workers`` processes for the stage; with
``address`` they send tasks to a running cluster, whose workers must import this project
(``flows``/``tasks`` and ``capjudge``, e.g. the same checkout and venv on every node) and see
the same paths (the ingest folder, the judge's ``cache_dir`` and ``out``) on a shared
filesystem. prefect-ray is optional (``pip install -c requirements.lock -e ".[ray]"``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

KINDS = ("threads", "dask", "ray")


@dataclass(frozen=True)
class RunnerConfig:
    """``params.yaml: runner`` (see the module docstring)."""

    kind: str = "threads"
    address: str | None = None
    workers: int | None = None
    threads_per_worker: int = 1
    shared_dir: str | None = None

    def __post_init__(self) -> None:
        """Reject an unknown kind, a non-positive size, or an address for threads.

        Raises:
            ValueError: naming the bad setting.
        """
        if self.kind not in KINDS:
            raise ValueError(f"runner.kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"runner.workers must be >= 1, got {self.workers!r}")
        if self.threads_per_worker < 1:
            raise ValueError("runner.threads_per_worker must be >= 1")
        if self.address and self.kind == "threads":
            raise ValueError("runner.address needs kind: dask or ray")

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> RunnerConfig:
        """The ``runner`` section of a params file (absent: threads); unknown keys are an
        error naming them."""
        section = dict(params.get("runner") or {})
        unknown = sorted(set(section) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown runner settings: {', '.join(unknown)}")
        return cls(**section)

    @property
    def distributed(self) -> bool:
        """Whether tasks may run in other processes or on other hosts."""
        return self.kind != "threads"

    def limits_dir(self, cache_dir: str | None) -> str | None:
        """Where a distributed judge keeps its shared rpm window and pause: ``shared_dir``, or
        ``limits`` in the request cache (shared by the workers anyway); None on threads, whose
        client shares them in memory. Absolute, so every worker means the same folder whatever
        its working directory."""
        if not self.distributed:
            return None
        from capjudge.cache import default_cache_dir

        base = Path(self.shared_dir) if self.shared_dir else \
            Path(cache_dir or default_cache_dir()) / "limits"
        return str(base.absolute())

    def worker_count(self, default: int) -> int:
        """Threads, or worker processes: ``workers``, else the stage's ``default``; a local
        cluster is also capped at one process per core (a judge's default is its backend's
        concurrency, e.g. 8 API requests, which every process multiplies)."""
        if self.workers:
            return self.workers
        if self.distributed:
            return max(1, min(default, os.cpu_count() or 1))
        return default

    def size(self, default: int) -> int:
        """How many tasks run at once: :meth:`worker_count` x ``threads_per_worker``."""
        return self.worker_count(default) * (self.threads_per_worker if self.distributed else 1)


def task_runner(runner: RunnerConfig, default_workers: int) -> TaskRunner[Any]:
    """The Prefect task runner for ``runner`` (``default_workers``: the stage's own size).

    Raises:
        RuntimeError: the runner's package is not installed (the message says what to
            install).
    """
    workers = runner.worker_count(default_workers)
    if runner.kind == "threads":
        return ThreadPoolTaskRunner(max_workers=workers)
    if runner.kind == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError as exc:  # pragma: no cover - a pinned dependency
            raise RuntimeError("runner.kind: dask needs prefect-dask: "
                               "pip install -c requirements.lock -e .") from exc
        if runner.address:
            return DaskTaskRunner(address=runner.address)
        # Worker processes, not threads: frame decoding and local models are CPU-bound. No
        # dashboard: it needs bokeh and a free port, and a pipeline stage has no one to watch.
        return DaskTaskRunner(cluster_class="distributed.LocalCluster", cluster_kwargs={
            "n_workers": workers, "threads_per_worker": runner.threads_per_worker,
            "processes": True, "dashboard_address": None})
    try:
        from prefect_ray import RayTaskRunner
    except ImportError as exc:
        raise RuntimeError("runner.kind: ray needs prefect-ray, which is optional (Ray is "
                           "large): pip install -c requirements.lock -e '.[ray]'") from exc
    # Ray writes usage statistics unless told not to; nothing should leave the machine.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # (prefect-ray ships no type information: the runner is typed here.)
    ray: TaskRunner[Any] = (RayTaskRunner(address=runner.address) if runner.address else
                            RayTaskRunner(init_kwargs={
                                "num_cpus": workers * runner.threads_per_worker,
                                "include_dashboard": False}))
    return ray


__all__ = ["KINDS", "RunnerConfig", "task_runner"]
