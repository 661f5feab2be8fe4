"""VisCE²'s step 1 (the ``context`` stage): visual-context extraction once per picture.

For every distinct picture a judge would see (an image, a video's frame tile, a 3D object's view
tile), the extractor VLM writes the structured visual context (up to five important objects,
their features, their relationships) and, for the "w/ description" variant, a detailed
description. Results are keyed by the picture's content hash, the extractor backend/snapshot and
the template version (through the request cache), so a candidate added for an image already seen
costs no extraction, and every candidate of an image reuses the same context. The extractor and
the evaluator may be different backends.

Output ``contexts.parquet``: ``media_sha256`` (of the picture shown), ``kind`` (``context`` |
``description``), ``status``, ``reason``, ``text``, ``template``, ``backend``, ``snapshot``,
``model``, ``system_fingerprint``, token usage, ``cached``, ``items`` (how many items use it).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from capjudge.backends.base import Backend
from capjudge.client import ClientStats, JudgeClient
from capjudge.item import Item
from capjudge.methods.base import item_image
from capjudge.prompts import get_template
from capjudge.protocol import BackendFacts, Decoding, JudgeRequest, JudgeResponse
from capjudge.records import ContextRow, ContextSummary
from capjudge.stage_files import CONTEXTS, summary_file

KINDS = ("context", "description")

NO_VISION = "backend has no vision input (extraction needs the image)"



@dataclass
class ContextConfig:
    """One extractor (``params.yaml: contexts.<name>``)."""

    backend: str
    kinds: list[str] = field(default_factory=lambda: list(KINDS))
    max_tokens: int = 1024  # the paper's setting for extraction
    detail: str = "auto"
    backend_options: dict[str, Any] = field(default_factory=dict)
    concurrency: int | None = None
    rpm: float | None = None
    tpm: float | None = None
    max_attempts: int = 5
    backoff_base_s: float = 0.5
    cache_dir: str | None = None
    rate_window_s: float = 60.0  # see JudgeConfig.rate_window_s
    # Set by a distributed runner: the folder where the rpm/tpm window and Retry-After pause
    # shared by every worker live (capjudge.util.limits); None: this process's own.
    shared_dir: str | None = None

    @classmethod
    def from_params(cls, section: Mapping[str, object]) -> ContextConfig:
        """Build from ``params.yaml: contexts.<name>``.

        Unknown keys are an error naming them; ``method`` and ``out`` belong to the stage, not
        the extractor.
        """
        # Any: the keys become this dataclass's keyword arguments, of several types.
        kwargs: dict[str, Any] = {k: v for k, v in section.items() if k not in ("method", "out")}
        unknown = sorted(set(kwargs) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown context settings: {', '.join(unknown)}")
        return cls(**kwargs)


def load_context_table(path: str | Path) -> dict[str, dict[str, ContextRow]]:
    """contexts.parquet as ``{picture sha256: {kind: row}}``."""
    return context_table(ContextRow.from_table(pq.read_table(path)))


def context_table(rows: Sequence[ContextRow]) -> dict[str, dict[str, ContextRow]]:
    """Extraction rows (as :func:`extract` returns them) as the table VisCE² plans with."""
    table: dict[str, dict[str, ContextRow]] = {}
    for row in rows:
        table.setdefault(row.media_sha256, {})[row.kind] = row
    return table


def extraction_requests(items: Sequence[Item], kinds: Sequence[str], detail: str,
                        max_tokens: int) -> tuple[list[tuple[str, str, JudgeRequest]],
                                                  Counter[str]]:
    """One request per (distinct picture, kind); also how many items share each picture."""
    uses: Counter[str] = Counter()
    seen: dict[str, Item] = {}
    for item in items:
        image = item_image(item, detail)
        uses[image.sha256] += 1
        seen.setdefault(image.sha256, item)
    requests = []
    for sha, item in seen.items():
        image = item_image(item, detail)
        for kind in kinds:
            if kind not in KINDS:
                raise ValueError(f"unknown context kind {kind!r}; choose from {KINDS}")
            template = get_template("visce2", f"visce2/extract-{kind}")
            request = JudgeRequest(messages=template.render(image=image), slots=(),
                                   decoding=Decoding(max_tokens=max_tokens),
                                   template=template.ref, tag=f"{sha[:12]}|{kind}")
            requests.append((sha, kind, request))
    return requests, uses


def context_rows(backend: Backend, requests: Sequence[tuple[str, str, JudgeRequest]],
                 responses: Sequence[JudgeResponse], uses: Counter[str]) -> list[ContextRow]:
    """Rows for contexts.parquet; an empty answer is a failure, not a context."""
    rows = []
    for (sha, kind, request), r in zip(requests, responses, strict=True):
        status, reason = r.status, r.reason
        if status == "ok" and not r.text.strip():
            status, reason = "parse_failure", "empty extraction"
        rows.append(ContextRow(
            media_sha256=sha, kind=kind, status=status, reason=reason,
            text=r.text if status == "ok" else None, template=request.template,
            backend=backend.backend_id, snapshot=backend.snapshot(), model=r.model,
            system_fingerprint=r.system_fingerprint, prompt_tokens=r.usage.prompt_tokens,
            completion_tokens=r.usage.completion_tokens, cached=r.cached, items=uses[sha]))
    return rows


def skipped_rows(backend_id: str, snapshot: str,
                 requests: Sequence[tuple[str, str, JudgeRequest]], uses: Counter[str],
                 reason: str) -> list[ContextRow]:
    """Rows recording extractions that were not attempted (e.g. a text-only backend)."""
    return [ContextRow(media_sha256=sha, kind=kind, status="skipped", reason=reason,
                       template=request.template, backend=backend_id, snapshot=snapshot,
                       cached=False, items=uses[sha])
            for sha, kind, request in requests]


def extract(items: Sequence[Item], config: ContextConfig, backend: Backend,
            client: JudgeClient) -> list[ContextRow]:
    """Run (or fetch from the cache) every extraction the items need."""
    requests, uses = extraction_requests(items, config.kinds, config.detail, config.max_tokens)
    if not backend.capabilities.vision:
        return skipped_rows(backend.backend_id, backend.snapshot(), requests, uses, NO_VISION)
    responses = client.run([r for _, _, r in requests])
    return context_rows(backend, requests, responses, uses)


def extract_unbuilt(items: Sequence[Item], config: ContextConfig
                    ) -> tuple[list[ContextRow], BackendFacts] | None:
    """Every extraction as a recorded skip, when the extractor's class says it has no vision.

    Nothing is built (no model loaded, no engine started): the rows and the backend's facts
    come from the class (:meth:`Backend.capabilities_for`, :meth:`Backend.describe_unloaded`)
    and are the rows :func:`extract` writes for a built text-only backend. None: the backend
    may see pictures, or only a built one can say; build it.

    Raises:
        BackendError: an unknown backend kind or option.
    """
    from capjudge.backends import backend_class

    kind = backend_class(config.backend)
    name = config.backend.partition("/")[2]
    kind.check_options(config.backend, config.backend_options)
    capabilities = kind.capabilities_for(name, config.backend_options)
    if capabilities is None or capabilities.vision:
        return None
    facts = kind.describe_unloaded(name, config.backend_options)
    if facts is None:
        return None
    requests, uses = extraction_requests(items, config.kinds, config.detail, config.max_tokens)
    return skipped_rows(facts["backend"], facts["snapshot"], requests, uses, NO_VISION), facts


def write_contexts(out_dir: Path, rows: Sequence[ContextRow], summary: ContextSummary) -> None:
    """Write contexts.parquet and summary.json, atomically and as one set."""
    from capjudge.util.atomic import atomic_path, stage_outputs, write_json

    with stage_outputs(out_dir):
        with atomic_path(out_dir / CONTEXTS) as tmp:
            pq.write_table(ContextRow.table(rows), tmp)
        write_json(summary_file(out_dir), summary)


def run_context(items: Sequence[Item] | str | Path, out_dir: str | Path, config: ContextConfig,
                backend: Backend | None = None) -> ContextSummary:
    """The context stage without Prefect: extract, write, summarise.

    Args:
        items: the items, or the path of an ``items.parquet``.
        out_dir: where contexts.parquet and summary.json go.
        config: the extractor.
        backend: an existing backend (default: built from the config).
    """
    from capjudge.backends import create_backend
    from capjudge.client import build_client
    from capjudge.item import load_items

    started = time.perf_counter()
    if isinstance(items, str | Path):
        items = load_items(items)
    pictures = [i for i in items if i.media_kind != "none"]
    # A text-only extractor's every extraction is a recorded skip: no model is loaded for it.
    unbuilt = extract_unbuilt(pictures, config) if backend is None else None
    if unbuilt is not None:
        rows, facts = unbuilt
        stats = ClientStats()
    else:
        backend = backend or create_backend(config.backend, **config.backend_options)
        from capjudge.util.progress import Progress

        progress = Progress(f"context {config.backend}", "request")
        client = build_client(backend, cache_dir=config.cache_dir, progress=progress,
                              max_attempts=config.max_attempts,
                              backoff_base_s=config.backoff_base_s, rpm=config.rpm,
                              tpm=config.tpm, concurrency=config.concurrency,
                              rate_window_s=config.rate_window_s, shared_dir=config.shared_dir)
        try:
            rows = extract(pictures, config, backend, client)
        finally:
            progress.close()
        facts, stats = backend.describe(), client.stats
    summary: ContextSummary = {
        "backend": facts, "kinds": config.kinds,
        "pictures": len({r.media_sha256 for r in rows}), "rows": len(rows),
        "by_status": dict(Counter(r.status for r in rows)),
        "requests": stats.requests, "model_calls": stats.calls, "cache_hits": stats.cache_hits,
        "seconds": round(time.perf_counter() - started, 2)}
    write_contexts(Path(out_dir), rows, summary)
    return summary
