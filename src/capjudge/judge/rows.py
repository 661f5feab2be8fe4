"""Judgement rows: the one place a row of ``judgements.parquet`` is built.

:func:`judgement` turns one criterion of one answered request (or a recorded skip) into a
:class:`~capjudge.records.Judgement`; :func:`rows_table` makes the Arrow table with the fixed
schema (:data:`JUDGEMENTS_SCHEMA`). Re-exported by :mod:`capjudge.judge`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from capjudge.cost import Price
from capjudge.item import Item
from capjudge.methods import Criterion
from capjudge.protocol import JudgeResponse
from capjudge.records import Judgement

JUDGEMENTS_SCHEMA = Judgement.schema()
"""The columns of ``judgements.parquet`` (derived from :class:`capjudge.records.Judgement`)."""


def format_settings(settings: Sequence[tuple[str, str]]) -> str | None:
    """A method's named options as recorded on rows: ``prompt_variant=paper; score=printed``."""
    return "; ".join(f"{k}={v}" for k, v in settings) or None


def judgement(item: Item, method: str, mode: str, result: Criterion, *, template: str | None,
              settings: str | None, backend: str, snapshot: str,
              response: JudgeResponse | None = None, price: Price | None = None,
              explanation: str | None = None, repeat: int = 0) -> Judgement:
    """The one place a judgement row is built: one criterion of one request, or a skip.

    Args:
        item: the item judged.
        method: the method's name.
        mode: the mode.
        result: the method's reading of the criterion (for a skip: its status and reason).
        template: the template id@version.
        settings: the method's named options (:func:`format_settings`).
        backend: the backend id.
        snapshot: the model snapshot (what the cache is keyed on).
        response: the answer; None for a skip (nothing was asked: no score, no usage).
        price: what the model costs (None: unknown, no cost recorded).
        explanation: the method's optional explanation turn.
        repeat: the test-retest repeat index.
    """
    if response is None:
        return Judgement(item_id=item.id, method=method, mode=mode, criterion=result.name,
                         status=result.status, reason=result.reason, template=template,
                         settings=settings, backend=backend, snapshot=snapshot,
                         media_sha256=item.media_sha256, system=item.system, repeat=repeat)
    usage = response.usage
    cost = price.cost(usage.prompt_tokens, usage.completion_tokens) \
        if price and not response.cached else (0.0 if price else None)
    c = result
    return Judgement(
        item_id=item.id, method=method, mode=mode, criterion=c.name, status=c.status,
        reason=c.reason, score=c.score, expected=c.expected, paths_disagree=c.paths_disagree,
        argmax=c.argmax, sd=c.sd, entropy=c.entropy, mass=c.mass,
        printed=None if c.printed is None else float(c.printed), values=c.values,
        probs=c.probs, source=c.source, anchor_forced=c.anchor_forced, read_by=c.read_by,
        confirmation=c.confirmation,
        reasoning=c.reasoning if c.reasoning is not None else response.text,
        explanation=explanation, template=template,
        settings=settings, backend=backend, model=response.model, snapshot=snapshot,
        system_fingerprint=response.system_fingerprint, prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens, cost_usd=cost,
        latency_s=response.latency_s, attempts=response.attempts, cached=response.cached,
        cache_key=response.cache_key, media_sha256=item.media_sha256, system=item.system,
        repeat=repeat, server_timings=response.timings)


def rows_table(rows: Sequence[Judgement]) -> pa.Table:
    """Judgement rows as an Arrow table with the fixed schema."""
    return Judgement.table(rows)
