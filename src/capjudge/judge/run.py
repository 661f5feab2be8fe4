"""Running a judge over items: planning, asking, reading, building rows.

:func:`judge_items` is the only place where items become requests (:func:`plan`), requests
become answers (the client, after :func:`verify_media`) and answers become rows
(:mod:`capjudge.judge.rows`). ``capjudge judge``, ``capjudge score``, the Prefect judge flow
and meta-evaluation all call it. Re-exported by :mod:`capjudge.judge`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from capjudge.backends.base import Backend
from capjudge.client import ClientStats, JudgeClient
from capjudge.cost import price_for
from capjudge.item import Item
from capjudge.judge.config import JudgeConfig
from capjudge.judge.connect import UnbuiltBackend, make_backend, make_client
from capjudge.judge.rows import format_settings, judgement
from capjudge.media_check import MediaChangedError, verify_request
from capjudge.methods import (
    AggregateOptions,
    Criterion,
    Method,
    MethodOptions,
    Planned,
    Skip,
    Verdict,
    get_method,
    verdict,
)
from capjudge.protocol import BackendFacts, JudgeResponse
from capjudge.records import Judgement

log = logging.getLogger(__name__)


def method_options(config: JudgeConfig, method: Method, vision: bool) -> MethodOptions:
    """Options for the method; loads the context stage's table when the method reads one."""
    extra = dict(config.method_options)
    if method.needs_context and "context_table" not in extra:
        path = extra.get("contexts")
        extra["context_table"] = method.load_context(path) if path else {}
    return MethodOptions(decoding=config.decoding(), detail=config.detail, vision=vision,
                         extra=extra)


def judge_modes(config: JudgeConfig, method: Method) -> list[str]:
    """The modes a judge runs (validated against the method's)."""
    modes = list(config.modes or method.default_modes)
    for mode in modes:
        method.check_mode(mode)
    return modes


def plan(items: Sequence[Item], config: JudgeConfig, vision: bool = True,
         options: MethodOptions | None = None) -> tuple[list[Planned], list[Skip]]:
    """Every (item, mode[, criterion]) as a request to send or a recorded skip.

    Args:
        items: typed items (:func:`capjudge.item.load_items`).
        config: the judge.
        vision: whether the backend accepts images (ignored when ``options`` is given).
        options: method options (default: from the config).
    """
    method = get_method(config.method)
    options = options or method_options(config, method, vision)
    modes = judge_modes(config, method)
    planned: list[Planned] = []
    skipped: list[Skip] = []
    for item in items:
        for mode in modes:
            try:
                results = method.plan(item, mode, options)
            except (ValueError, OSError) as exc:
                # A bad item (a missing picture, a malformed option) is that item's recorded
                # skip, never the end of the stage.
                results = [Skip(item.id, mode, f"could not build the request: {exc}")]
            except Exception as exc:  # noqa: BLE001 - one item must not end the stage
                log.exception("planning item %r (%s) failed", item.id, mode)
                results = [Skip(item.id, mode, f"could not build the request: "
                                               f"{type(exc).__name__}: {exc}")]
            for result in results:
                if isinstance(result, Planned):
                    planned.append(method.constrained(result))
                else:
                    skipped.append(result)
    return planned, skipped


def check_repeatable(backend: Backend | UnbuiltBackend) -> None:
    """Refuse repeats on a backend whose answer cannot vary between them.

    Raises:
        ValueError: the backend reads an exact distribution after greedy decoding (local
            models): every repeat would be identical, faking perfect reliability.
    """
    if backend.capabilities.distribution == "exact":
        raise ValueError(
            f"repeats > 1 need a backend that samples; {backend.backend_id} decodes greedily "
            "and reads the exact score distribution, so every repeat would be the same answer")


def repeat_planned(planned: Sequence[Planned], repeats: int) -> list[Planned]:
    """Each request ``repeats`` times, repeat ``r`` with ``Decoding.sample = r``.

    Each repeat has its own cache key and sampling seed. The order is request-major, so the
    repeats of a request are adjacent.
    """
    return [replace(p, request=replace(p.request, decoding=replace(p.request.decoding,
                                                                   sample=r)))
            for p in planned for r in range(repeats)]


def check_verdict_format(method: Method, options: MethodOptions,
                         backend: Backend | UnbuiltBackend) -> None:
    """``verdict_format: json_schema`` needs a backend that enforces the schema.

    Raises:
        ValueError: the backend cannot (a local transformers model, a fake judge).
    """
    if dict(method.settings(options)).get("verdict_format") == "json_schema" and \
            not backend.capabilities.json_schema:
        raise ValueError(f"verdict_format: json_schema needs a backend that enforces a JSON "
                         f"schema (openai/..., llamacpp/..., an OpenAI-compatible server); "
                         f"{backend.backend_id} cannot")


@dataclass
class JudgeResult:
    """What :func:`judge_items` returns.

    Attributes:
        rows: judgement rows (JUDGEMENTS_SCHEMA), answered requests first, then skips.
        stats: this call's client statistics (requests, model calls, cache hits, ...).
        criteria: per (item id, mode) every criterion result, skipped ones included (with
            ``repeats > 1``, those of repeat 0; every repeat is in ``rows``).
        responses: the answers, aligned with ``planned``.
        planned: the requests that were sent (or answered from the cache).
        skips: what was not judged, and why.
        backend: the backend that answered (None when none was built).
        unbuilt_facts: when no backend was built, its facts (:meth:`backend_facts`).
    """

    rows: list[Judgement]
    stats: ClientStats
    criteria: dict[tuple[str, str], list[Criterion]]
    responses: list[JudgeResponse]
    planned: list[Planned]
    skips: list[Skip]
    # The backend that answered, or the facts of one never built (every row a skip).
    backend: Backend | None = None
    unbuilt_facts: BackendFacts | None = None

    def backend_facts(self) -> BackendFacts:
        """The lineage facts of the judge's backend (``loaded: False`` when never built).

        Raises:
            ValueError: the result records no backend (built by hand).
        """
        if self.unbuilt_facts is not None:
            return self.unbuilt_facts
        if self.backend is None:
            raise ValueError("this result records no backend")
        return self.backend.describe()

    def verdicts(self, method: Method, options: AggregateOptions
                 ) -> dict[tuple[str, str], Verdict]:
        """Each (item, mode)'s overall score and status under the one rule."""
        return {key: verdict(method, crit, options) for key, crit in self.criteria.items()}


def judge_items(items: Sequence[Item], config: JudgeConfig, *, backend: Backend | None = None,
                client: JudgeClient | None = None, options: MethodOptions | None = None,
                progress: Callable[[int, int], None] | None = None,
                connect: Callable[[], tuple[Backend, JudgeClient]] | None = None
                ) -> JudgeResult:
    """Judge items with one method on one backend: plan, ask (cached), read, build rows.

    Without ``backend`` and ``client`` the items are planned with what the backend's class
    declares (:class:`UnbuiltBackend`) and the backend is built only when a request is to be
    sent: a judge whose every (item, mode) is a recorded skip (a text-only model asked for
    pictures) loads no model and starts no engine, and writes the same rows.

    Args:
        items: the items (``config.limit`` is applied by the caller that owns the item list).
        config: the judge.
        backend: an existing backend (default: built by ``connect`` when needed).
        client: an existing client around ``backend`` (default: a new one).
        options: method options (default: from the config; loads a context table if needed).
        progress: called with (done, total) requests while answering.
        connect: builds the backend and its client (default: :func:`make_backend` and
            :func:`make_client`); called at most once, and only when something is to be asked
            or only a built backend knows its capabilities or snapshot.

    Returns:
        The rows, this call's statistics and the per-item criteria.
    """
    method = get_method(config.method)
    if backend is None and client is not None:
        backend = client.backend
    if connect is None:
        def connect() -> tuple[Backend, JudgeClient]:
            built = make_backend(config)
            return built, make_client(config, built, progress)
    target: Backend | UnbuiltBackend | None = backend or UnbuiltBackend.of(config)
    if target is None:
        backend, client = connect()
        target = backend
    options = options or method_options(config, method, target.capabilities.vision)
    check_verdict_format(method, options, target)
    planned, skips = plan(items, config, options=options)
    if config.repeats > 1:
        check_repeatable(target)
        planned = repeat_planned(planned, config.repeats)
    unbuilt = target.describe() if backend is None and not planned else None
    if backend is None and unbuilt is None:
        backend, client = connect()
    if backend is not None and client is None:
        client = make_client(config, backend, progress)
    by_id = {item.id: item for item in items}
    planned, responses, explanations, stats = _answer(config, method, planned, by_id, client)
    if backend is not None:
        backend_id, snapshot = backend.backend_id, backend.snapshot()
    else:
        assert unbuilt is not None  # built above unless its facts were known
        backend_id, snapshot = config.backend, unbuilt["snapshot"]
    rows, criteria = _rows(config, method, options, by_id, planned, responses, explanations,
                           skips, backend_id, snapshot)
    return JudgeResult(rows, stats, criteria, responses, planned, skips, backend, unbuilt)


def _answer(config: JudgeConfig, method: Method, planned: list[Planned],
            by_id: dict[str, Item], client: JudgeClient | None
            ) -> tuple[list[Planned], list[JudgeResponse], list[str | None], ClientStats]:
    """Ask every planned request (cached) and the method's explanation turn.

    Returns the requests rebuilt on their verified pictures, the answers aligned with them (a
    picture changed since ingest is that request's error, answered without a call), the
    explanations and this call's statistics. ``client`` is None only when nothing is planned.
    """
    if client is None:
        return planned, [], [], ClientStats()
    planned, media_errors = verify_media(planned, by_id)
    sendable = shared_context_order(
        [k for k, why in enumerate(media_errors) if why is None], planned)
    sent, stats = client.run_with_stats([planned[k].request for k in sendable])
    responses = [JudgeResponse(status="error", reason=why, attempts=0) if why is not None
                 else JudgeResponse(status="error", reason="not answered")
                 for why in media_errors]
    for k, response in zip(sendable, sent, strict=True):
        responses[k] = response
    try:
        explanations = _explain(config, method, planned, responses, client, stats)
    except Exception:  # noqa: BLE001 - the optional turn must not lose the answers
        log.exception("the explanation turn failed; rows are written without explanations")
        explanations = [None] * len(planned)
    return planned, responses, explanations, stats


def _rows(config: JudgeConfig, method: Method, options: MethodOptions, by_id: dict[str, Item],
          planned: Sequence[Planned], responses: Sequence[JudgeResponse],
          explanations: Sequence[str | None], skips: Sequence[Skip], backend_id: str,
          snapshot: str) -> tuple[list[Judgement], dict[tuple[str, str], list[Criterion]]]:
    """The judgement rows (answered requests first, then skips) and per-item criteria."""
    price = price_for(backend_id.split("/", 1)[1], config.prices)
    if price is not None and config.submit == "batch":
        price = price.batch()  # what the Batch API charges
    rows: list[Judgement] = []
    criteria: dict[tuple[str, str], list[Criterion]] = {}
    for p, response, why in zip(planned, responses, explanations, strict=True):
        results = _interpret(method, p, response)
        if p.request.decoding.sample == 0:  # ``criteria`` is one answer per request
            criteria.setdefault((p.item_id, p.mode), []).extend(results)
        rows += [judgement(by_id[p.item_id], method.name, p.mode, c,
                           template=p.request.template, settings=format_settings(p.settings),
                           backend=backend_id, snapshot=snapshot, response=response,
                           price=price, explanation=why, repeat=p.request.decoding.sample)
                 for c in results]
    try:
        skip_settings = format_settings(method.settings(options))
    except ValueError:
        skip_settings = None
    for s in skips:
        criteria.setdefault((s.item_id, s.mode), []).append(
            Criterion(s.criterion, "skipped", s.reason))
        rows.append(judgement(by_id[s.item_id], method.name, s.mode,
                              Criterion(s.criterion, "skipped", s.reason),
                              template=s.template, settings=skip_settings,
                              backend=backend_id, snapshot=snapshot))
    return rows, criteria


def shared_context_order(indices: Sequence[int], planned: Sequence[Planned]) -> list[int]:
    """``indices`` reordered so that requests whose first pair shares a context go together.

    The order is stable; a group's first appearance decides its place. A likelihood request's
    first pair is the candidate after its references: one picture's candidates share it, so
    they reach the backend in the same batches and its references are encoded once (the
    backend's prefix cache). Requests without pairs are grouped by template (their shared
    instructions stay in a server's prompt cache). The caller puts the answers back in plan
    order.
    """
    first: dict[str, int] = {}

    def group(k: int) -> int:
        pairs = planned[k].request.continuations
        # A generation request goes with those of its template (HarmonicEval's criteria):
        # an engine that keeps one template's instructions cached reuses them in a row.
        key = pairs[0][0] if pairs else f"\x00{planned[k].request.template}"
        return first.setdefault(key, len(first))

    return sorted(indices, key=group)


def verify_media(planned: Sequence[Planned], items: dict[str, Item]
                 ) -> tuple[list[Planned], list[str | None]]:
    """Re-check every picture a request would send against what ingest recorded.

    Returns:
        The requests rebuilt on the verified real paths of their pictures, and per request
        None (send it) or why it must not be sent (missing, outside the item's roots, or
        changed since ingest: see :mod:`capjudge.media_check`).
    """
    out: list[Planned] = []
    errors: list[str | None] = []
    for p in planned:
        try:
            out.append(replace(p, request=verify_request(p.request, items[p.item_id])))
            errors.append(None)
        except MediaChangedError as exc:
            log.warning("item %s (%s): %s", p.item_id, p.mode, exc)
            out.append(p)
            errors.append(str(exc))
    return out, errors


def _interpret(method: Method, p: Planned, response: JudgeResponse) -> list[Criterion]:
    """The method's reading of an answer.

    A method that fails on one answer makes that request's criteria errors with the reason,
    not the end of the stage.
    """
    try:
        return method.interpret(p, response)
    except Exception as exc:  # noqa: BLE001 - one answer must not end the stage
        log.exception("reading the answer for item %r (%s) failed", p.item_id, p.mode)
        why = f"could not read the answer: {type(exc).__name__}: {exc}"
        return [Criterion(slot.name, "error", why) for slot in p.request.slots] \
            or [Criterion(p.criterion or "*", "error", why)]


def _explain(config: JudgeConfig, method: Method, planned: Sequence[Planned],
             responses: Sequence[JudgeResponse], client: JudgeClient,
             stats: ClientStats) -> list[str | None]:
    """The method's optional explanation turn (``method_options.explain``), for answered requests.

    Its requests count in ``stats`` like any other.
    """
    out: list[str | None] = [None] * len(planned)
    if not config.method_options.get("explain") or not method.explains:
        return out
    todo: list[int] = []
    follow_ups = []
    for i, r in enumerate(responses):
        if r.status in ("ok", "low_mass", "text_only"):
            request = method.explanation_request(planned[i], r)
            if request is not None:
                todo.append(i)
                follow_ups.append(request)
    answers, extra = client.run_with_stats(follow_ups)
    stats.merge(extra)
    for i, answer in zip(todo, answers, strict=True):
        out[i] = answer.text if answer.status in ("ok", "low_mass", "text_only") \
            and answer.text else None
    return out
