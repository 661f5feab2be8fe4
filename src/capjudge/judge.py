"""The judge stage: items -> requests (per method and mode) -> backend -> judgement rows.

Outputs (in ``out_dir``):

- ``judgements.parquet``: one row per (item, mode, criterion) with the full score distribution
  (``values``/``probs``), its expected value, argmax, sd, entropy and captured mass, the status
  and reason, the reasoning text, the template id@version, backend id, model snapshot and
  fingerprint, token usage and cost. Skipped (item, mode) pairs are rows with status
  ``skipped`` and the reason; failures are rows with their status and reason, never a score.
- ``summary.json``: counts by status and mode, model calls, cache hits, tokens, cost, which
  modes ran and which were skipped and why.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from capjudge.backends import create_backend
from capjudge.backends.base import Backend, Decoding, JudgeResponse
from capjudge.cache import RequestCache, default_cache_dir
from capjudge.client import JudgeClient, RetryPolicy
from capjudge.cost import Price, price_for
from capjudge.methods import MethodOptions, Planned, Skip, get_method

log = logging.getLogger(__name__)

JUDGEMENTS_SCHEMA = pa.schema([
    ("item_id", pa.string()),
    ("method", pa.string()),
    ("mode", pa.string()),
    ("criterion", pa.string()),
    ("status", pa.string()),
    ("reason", pa.string()),
    ("score", pa.float64()),  # expected value over the renormalised distribution
    ("argmax", pa.int64()),
    ("sd", pa.float64()),
    ("entropy", pa.float64()),
    ("mass", pa.float64()),
    ("printed", pa.float64()),  # the number the judge wrote, if any
    ("values", pa.list_(pa.int64())),
    ("probs", pa.list_(pa.float64())),
    ("source", pa.string()),  # logprobs | teacher_forcing | text | none
    ("anchor_forced", pa.bool_()),
    ("reasoning", pa.string()),
    ("explanation", pa.string()),  # HarmonicEval's optional "Why?" turn
    ("template", pa.string()),  # id@version
    ("backend", pa.string()),
    ("model", pa.string()),  # as reported by the backend
    ("snapshot", pa.string()),  # what the cache is keyed on (snapshot name, weights hash)
    ("system_fingerprint", pa.string()),
    ("prompt_tokens", pa.int64()),
    ("completion_tokens", pa.int64()),
    ("cost_usd", pa.float64()),
    ("latency_s", pa.float64()),
    ("attempts", pa.int64()),
    ("cached", pa.bool_()),
    ("cache_key", pa.string()),
    ("media_sha256", pa.string()),
    ("system", pa.string()),  # which captioner wrote the candidate
])


@dataclass
class JudgeConfig:
    """One judge: a method with its modes on one backend (``params.yaml: judges.<name>``)."""

    method: str
    backend: str
    modes: list[str] | None = None
    max_tokens: int = 512
    temperature: float = 0.0
    top_logprobs: int = 20
    detail: str = "auto"
    min_mass: float = 0.5
    backend_options: dict[str, Any] = field(default_factory=dict)
    concurrency: int | None = None
    rpm: float | None = None
    tpm: float | None = None
    max_attempts: int = 5
    backoff_base_s: float = 0.5
    limit: int | None = None  # judge only the first N items (smoke runs)
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    cache_dir: str | None = None
    method_options: dict[str, Any] = field(default_factory=dict)
    # The backend's fingerprint as last seen by the watch flow (API system_fingerprint, model
    # list). It joins the model snapshot in the cache key, so a changed remote model is asked
    # again instead of being answered from the cache.
    fingerprint: str | None = None

    @classmethod
    def from_params(cls, section: dict[str, Any], common: dict[str, Any] | None = None
                    ) -> JudgeConfig:
        """Build from a params section (unknown keys are an error naming them)."""
        merged = {**(common or {}), **section}
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(merged) - known)
        if unknown:
            raise ValueError(f"unknown judge settings: {', '.join(unknown)}")
        return cls(**merged)

    def decoding(self) -> Decoding:
        return Decoding(max_tokens=self.max_tokens, temperature=self.temperature,
                        top_logprobs=self.top_logprobs)


def make_backend(config: JudgeConfig) -> Backend:
    """The configured backend (local models are loaded once per process)."""
    options = dict(config.backend_options)
    options.setdefault("min_mass", config.min_mass)
    return create_backend(config.backend, **options)


def make_client(config: JudgeConfig, backend: Backend,
                progress: Callable[[int, int], None] | None = None) -> JudgeClient:
    """The cached, retrying, rate-limited client around a backend."""
    cache = RequestCache(config.cache_dir or default_cache_dir())
    return JudgeClient(backend, cache,
                       retry=RetryPolicy(max_attempts=config.max_attempts,
                                         base_s=config.backoff_base_s),
                       rpm=config.rpm, tpm=config.tpm, concurrency=config.concurrency,
                       progress=progress, fingerprint=config.fingerprint)


def load_context_table(path: str | Path) -> dict[str, dict[str, dict[str, Any]]]:
    """contexts.parquet as ``{image sha256: {kind: {status, reason, text}}}``."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for row in pq.read_table(path).to_pylist():
        table.setdefault(row["media_sha256"], {})[row["kind"]] = row
    return table


def method_options(config: JudgeConfig, vision: bool) -> MethodOptions:
    """Options for the method; loads the visual-context table when the method needs one."""
    extra = dict(config.method_options)
    method = get_method(config.method)
    if method.needs_context and "context_table" not in extra:
        path = extra.get("contexts")
        extra["context_table"] = load_context_table(path) if path and Path(path).is_file() \
            else {}
    return MethodOptions(decoding=config.decoding(), detail=config.detail, vision=vision,
                         extra=extra)


def plan(items: Sequence[dict[str, Any]], config: JudgeConfig, vision: bool,
         options: MethodOptions | None = None) -> tuple[list[Planned], list[Skip]]:
    """Every (item, mode[, criterion]) as a request to send or a recorded skip."""
    method = get_method(config.method)
    modes = config.modes or list(method.default_modes)
    options = options or method_options(config, vision)
    planned: list[Planned] = []
    skipped: list[Skip] = []
    for item in items[: config.limit] if config.limit else items:
        for mode in modes:
            for result in method.plan(item, mode, options):
                if isinstance(result, Planned):
                    planned.append(result)
                else:
                    skipped.append(result)
    return planned, skipped


def response_rows(p: Planned, response: JudgeResponse, item: dict[str, Any], method: str,
                  backend: Backend, key: str, price: Price | None,
                  explanation: str | None = None) -> list[dict[str, Any]]:
    """Judgement rows (one per criterion) for one answered request."""
    cost = price.cost(response.usage.prompt_tokens, response.usage.completion_tokens) \
        if price and not response.cached else (0.0 if price else None)
    common = {
        "item_id": p.item_id, "method": method, "mode": p.mode, "reasoning": response.text,
        "explanation": explanation,
        "template": p.request.template, "backend": backend.backend_id, "model": response.model,
        "snapshot": backend.snapshot(), "system_fingerprint": response.system_fingerprint,
        "prompt_tokens": response.usage.prompt_tokens,
        "completion_tokens": response.usage.completion_tokens, "cost_usd": cost,
        "latency_s": response.latency_s, "attempts": response.attempts,
        "cached": response.cached, "cache_key": key, "media_sha256": item.get("media_sha256"),
        "system": item.get("system"),
    }
    rows = []
    for c in get_method(method).interpret(p, response):
        printed = c.printed
        rows.append({**common, "criterion": c.name, "status": c.status, "reason": c.reason,
                     "values": c.values, "probs": c.probs, "mass": c.mass,
                     "printed": None if printed is None else float(printed),
                     "source": c.source, "anchor_forced": c.anchor_forced, "score": c.score,
                     "argmax": c.argmax, "sd": c.sd, "entropy": c.entropy})
    return rows


def skip_rows(skips: Sequence[Skip], items_by_id: dict[str, dict[str, Any]], method: str,
              backend: Backend) -> list[dict[str, Any]]:
    """Rows recording what was not judged and why."""
    return [{"item_id": s.item_id, "method": method, "mode": s.mode, "criterion": s.criterion,
             "status": "skipped", "reason": s.reason, "template": s.template,
             "backend": backend.backend_id, "snapshot": backend.snapshot(),
             "media_sha256": items_by_id[s.item_id].get("media_sha256"),
             "system": items_by_id[s.item_id].get("system"), "cached": False,
             "anchor_forced": False} for s in skips]


def write_outputs(out_dir: Path, rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """Write judgements.parquet and summary.json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=JUDGEMENTS_SCHEMA)
    pq.write_table(table, out_dir / "judgements.parquet")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")


def summarise_run(rows: Sequence[dict[str, Any]], skips: Sequence[Skip], client: JudgeClient,
                  config: JudgeConfig, backend: Backend, seconds: float) -> dict[str, Any]:
    """The run's counts for summary.json (and DVC metrics)."""
    judged = [r for r in rows if r["status"] != "skipped"]
    by_status = Counter(r["status"] for r in rows)
    modes_ran = sorted({r["mode"] for r in judged})
    skipped_modes: dict[str, dict[str, int]] = {}
    for s in skips:
        skipped_modes.setdefault(s.mode, {}).setdefault(s.reason, 0)
        skipped_modes[s.mode][s.reason] += 1
    cost = [r["cost_usd"] for r in judged if r.get("cost_usd") is not None]
    return {
        "method": config.method, "backend": backend.describe(), "modes_ran": modes_ran,
        "modes_skipped": {m: v for m, v in skipped_modes.items() if m not in modes_ran},
        "skips": skipped_modes, "rows": len(rows), "by_status": dict(sorted(by_status.items())),
        # Failures have no score; low_mass judgements do (flagged), so they are counted apart.
        "failure_rate": (sum(v for k, v in by_status.items()
                             if k in ("error", "refused", "parse_failure")) / max(1, len(judged))),
        "low_mass_rate": by_status.get("low_mass", 0) / max(1, len(judged)),
        "requests": client.stats.requests, "model_calls": client.stats.calls,
        "cache_hits": client.stats.cache_hits, "retries": client.stats.retries,
        "prompt_tokens": client.stats.prompt_tokens,
        "completion_tokens": client.stats.completion_tokens,
        "cost_usd": round(sum(cost), 6) if cost else None,
        "templates": sorted({r["template"] for r in rows if r.get("template")}),
        "seconds": round(seconds, 2),
    }


def explain(config: JudgeConfig, planned: Sequence[Planned],
            responses: Sequence[JudgeResponse], client: JudgeClient) -> list[str | None]:
    """HarmonicEval's optional "Why? Tell me the reason." turn, for answered requests."""
    method = get_method(config.method)
    if not config.method_options.get("explain") or not hasattr(method, "explanation_request"):
        return [None] * len(planned)
    todo = [i for i, r in enumerate(responses) if r.status in ("ok", "low_mass")]
    follow_ups = client.run([method.explanation_request(planned[i], responses[i])
                             for i in todo])
    out: list[str | None] = [None] * len(planned)
    for i, answer in zip(todo, follow_ups, strict=True):
        out[i] = answer.text if answer.status in ("ok", "low_mass") and answer.text else None
    return out


def build_rows(config: JudgeConfig, backend: Backend, client: JudgeClient,
               planned: Sequence[Planned], responses: Sequence[JudgeResponse],
               explanations: Sequence[str | None], skips: Sequence[Skip],
               by_id: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """All judgement rows of a run: answered requests, then recorded skips."""
    price = price_for(backend.backend_id.split("/", 1)[1], config.prices)
    rows: list[dict[str, Any]] = []
    for p, response, why in zip(planned, responses, explanations, strict=True):
        rows += response_rows(p, response, by_id[p.item_id], config.method, backend,
                              client.key(p.request), price, why)
    rows += skip_rows(skips, by_id, config.method, backend)
    return rows


def load_items(path: str | Path) -> list[dict[str, Any]]:
    """items.parquet as a list of dicts."""
    return pq.read_table(path).to_pylist()


def progress_logger(label: str) -> Callable[[int, int], None]:
    """A progress callback that logs about every 5 % (and the end)."""
    state = {"last": -1.0, "t0": time.perf_counter()}

    def report(done: int, total: int) -> None:
        fraction = done / total if total else 1.0
        if fraction - state["last"] >= 0.05 or done == total:
            state["last"] = fraction
            elapsed = time.perf_counter() - state["t0"]
            eta = elapsed / fraction - elapsed if fraction > 0 else float("nan")
            log.info("%s: %d/%d requests (%.0f%%), %.0f s elapsed, ~%.0f s left", label, done,
                     total, 100 * fraction, elapsed, eta)

    return report


def run_judge(items_path: str | Path, out_dir: str | Path, config: JudgeConfig,
              backend: Backend | None = None) -> dict[str, Any]:
    """Run one judge over the ingested items and write its outputs; returns the summary."""
    started = time.perf_counter()
    items = load_items(items_path)
    by_id = {i["id"]: i for i in items}
    backend = backend or make_backend(config)
    planned, skips = plan(items, config, backend.capabilities.vision)
    client = make_client(config, backend, progress_logger(f"judge {config.method}"))
    responses = client.run([p.request for p in planned])
    explanations = explain(config, planned, responses, client)
    rows = build_rows(config, backend, client, planned, responses, explanations, skips, by_id)
    summary = summarise_run(rows, skips, client, config, backend,
                            time.perf_counter() - started)
    write_outputs(Path(out_dir), rows, summary)
    return summary
