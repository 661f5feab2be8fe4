"""``capjudge score``: score one caption with one method, mode and backend.

It runs the same pipeline as a judge stage (:func:`capjudge.judge.judge_items`) on one item
built from the command line and hashed like ingest does; a method with a context stage runs
it on the fly, through the same request cache.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any, TypedDict

from capjudge.cli.common import (
    EXIT_OK,
    EXIT_STRICT,
    UsageError,
    add_judge_options,
    judge_config,
)


class _ItemFields(TypedDict, total=False):
    """The :class:`~capjudge.item.Item` fields an ad-hoc item sets."""

    id: str
    task: str
    candidate: str
    references: tuple[str, ...]
    question: str | None
    media_kind: str
    media_root: str
    media_path: str
    media_sha256: str
    judge_path: str
    judge_sha256: str
    tile_path: str
    tile_sha256: str
    frame_policy: str
    frame_indices: tuple[int, ...]
    frame_paths: tuple[str, ...]
    frame_sha256: tuple[str, ...]


def adhoc_item(args: argparse.Namespace, frame_policy: str | None = None) -> Any:
    """An item built from --image/--video/--views and --caption/--ref, hashed like ingest.

    A video's frames are sampled by ``frame_policy`` (default first_middle_last).
    """
    from capjudge.cache import default_cache_dir
    from capjudge.ingest import IngestConfig, TileCache
    from capjudge.item import Item
    from capjudge.media import MediaError, check_image, sha256_file, sha256_text

    fields: _ItemFields = {"id": "cli", "task": "caption", "candidate": args.caption,
                           "references": tuple(args.ref or ()), "question": args.question}
    try:
        # The same content-hash-keyed tile cache (and image normalisation) as ingest.
        ingest = IngestConfig(frame_policy=frame_policy) if frame_policy else IngestConfig()
        tiles = TileCache(Path(args.cache_dir or default_cache_dir()) / "tiles", ingest)
        if args.image:
            path = Path(args.image)
            info = check_image(path)
            sha = sha256_file(path)
            judged = tiles.judge_image(path, sha, info)
            fields.update({"media_kind": "image", "media_root": str(path.parent.resolve()),
                           "media_path": path.name, "media_sha256": sha,
                           "judge_path": judged.path, "judge_sha256": judged.sha256})
        elif args.video or args.views:
            if args.video:
                path = Path(args.video)
                sha = sha256_file(path)
                meta = tiles.video(path, sha)
                fields.update({"media_kind": "video", "media_root": str(path.parent.resolve()),
                               "media_path": path.name, "media_sha256": sha,
                               "tile_path": meta["tile_path"],
                               "tile_sha256": meta["tile_sha256"],
                               "frame_policy": meta["policy"],
                               "frame_indices": tuple(meta["indices"]),
                               "frame_paths": tuple(meta["frame_paths"]),
                               "frame_sha256": tuple(meta["frame_sha256"])})
            else:
                paths = [Path(v) for v in args.views]
                sha = sha256_text(*[sha256_file(v) for v in paths])
                tile_path, tile_sha = tiles.views(paths, sha)
                fields.update({"media_kind": "views", "media_root": str(Path.cwd()),
                               "media_path": str(paths[0]), "media_sha256": sha,
                               "tile_path": tile_path, "tile_sha256": tile_sha})
    except (MediaError, OSError) as exc:
        raise UsageError(str(exc)) from exc
    return Item(**fields)


def check_texts(args: argparse.Namespace) -> None:
    """The caption and references pass the checks ingest applies to a manifest row.

    Raises:
        UsageError: a text with control or bidirectional override characters, or longer
            than ingest's caps (``max_candidate_chars``, ``max_reference_chars``,
            ``max_references``).
    """
    from capjudge.ingest import IngestConfig
    from capjudge.manifest import is_blank, text_problem

    caps = IngestConfig()
    refs = [r for r in (args.ref or []) if not is_blank(r)]
    for flag, text in [("--caption", args.caption), *(("--ref", r) for r in refs),
                       ("--question", args.question or "")]:
        if (problem := text_problem(text)) is not None:
            raise UsageError(f"{flag} {problem}")
    if caps.max_candidate_chars is not None and len(args.caption) > caps.max_candidate_chars:
        raise UsageError(f"--caption is too long ({len(args.caption):,} characters; the limit "
                         f"is {caps.max_candidate_chars:,})")
    if caps.max_references is not None and len(refs) > caps.max_references:
        raise UsageError(f"too many --ref ({len(refs)}; the limit is {caps.max_references})")
    for r in refs:
        if caps.max_reference_chars is not None and len(r) > caps.max_reference_chars:
            raise UsageError(f"--ref is too long ({len(r):,} characters; the limit is "
                             f"{caps.max_reference_chars:,})")
    args.ref = refs


class CriterionOutput(TypedDict):
    """One criterion in ``capjudge score``'s output."""

    score: float | None
    sd: float | None
    status: str
    reason: str | None
    mass: float | None
    expected: float | None
    printed: float | None
    paths_disagree: bool
    read_by: str | None
    confirmation: str | None
    distribution: dict[str, float] | None


class ScoreOutput(TypedDict):
    """What ``capjudge score`` prints (``--json``: as it is)."""

    score: float | None
    status: str
    reason: str | None
    expected: float | None
    printed: float | None
    paths_disagree: bool | None
    settings: str | None
    mode: str
    mass: float | None
    argmax: int | None
    sd: float | None
    entropy: float | None
    distribution: dict[str, float] | None
    criteria: dict[str, CriterionOutput]
    reasoning: str | None
    backend: str
    model: str | None
    snapshot: str
    system_fingerprint: str | None
    template: str
    cached: bool
    usage: dict[str, int]
    aggregate_settings: dict[str, float]
    """The method's own aggregate settings in force (HarmonicEval's ``gamma``)."""


def _distribution(values: list[int] | None, probs: list[float] | None) -> dict[str, float] | None:
    if not values or not probs:
        return None
    return {str(v): p for v, p in zip(values, probs, strict=True) if p > 0}


def _method_and_mode(args: argparse.Namespace) -> tuple[Any, str]:
    """The method and mode asked for, after the checks of the caption, texts and settings.

    Raises:
        UsageError: an empty caption, a refused text, an aggregate setting no method declares
            or out of its bounds, an unknown mode.
    """
    from capjudge.manifest import is_blank
    from capjudge.methods import get_method

    if is_blank(args.caption):
        raise UsageError("--caption is empty")
    check_texts(args)
    args.settings = _aggregate_settings(args)
    method = get_method(args.method)
    mode = args.mode or method.score_mode or method.default_modes[0]
    try:
        method.check_mode(mode)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    return method, mode


def _aggregate_settings(args: argparse.Namespace) -> dict[str, float]:
    """``--aggregate NAME=VALUE`` (and ``--gamma``), checked against what methods declare.

    Raises:
        UsageError: a malformed pair, a name no method declares, a value out of bounds.
    """
    from capjudge.aggregate import AggregateConfig

    pairs: dict[str, object] = {}
    for text in args.aggregate or []:
        name, _, value = text.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = None
        if number is None or not name.strip():
            raise UsageError(f"--aggregate takes NAME=NUMBER, got {text!r}")
        pairs[name.strip()] = number
    try:
        settings = dict(AggregateConfig.from_section(pairs).settings)
    except ValueError as exc:
        raise UsageError(f"--aggregate: {exc}") from None
    if args.gamma is not None:
        try:
            settings |= AggregateConfig.from_section({"gamma": args.gamma}).settings
        except ValueError as exc:
            raise UsageError(f"--gamma: {exc}") from None
    return settings


def run(args: argparse.Namespace) -> int:
    """Score the item; print the result (exit 3 when it got no score)."""
    from capjudge.client import AuthError, WrongServerError, raise_if_stopped
    from capjudge.judge import check_verdict_format, judge_items, make_backend, make_client
    from capjudge.methods import AggregateOptions, MethodOptions, verdict
    from capjudge.protocol import BackendError
    from capjudge.util.stopping import exit_promptly_on_signals

    exit_promptly_on_signals()
    method, mode = _method_and_mode(args)
    config = judge_config(args, [mode])
    # A profile that needs its own frames (gveval_code) gets them sampled that way.
    item = adhoc_item(args, config.method_options.get("frame_policy"))
    try:
        backend = make_backend(config)
        backend.connect()  # a server that cannot be reached: one line naming its URL
        check_verdict_format(method, MethodOptions(extra=dict(config.method_options)),
                             backend)
    except (BackendError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    client = make_client(config, backend)
    # The context stage's output lives only as long as this one judgement: one run used to
    # leave a directory behind in the temp folder each time (thousands on a busy machine).
    with tempfile.TemporaryDirectory(prefix="capjudge-score-context-") as scratch:
        if method.needs_context and backend.capabilities.vision and item.media_kind != "none":
            # The method's context stage on this one picture (answers cached like the stage's).
            section: dict[str, object] = {"backend": args.extractor or args.backend,
                                       "backend_options": dict(config.backend_options),
                                       "cache_dir": config.cache_dir}
            method.run_context([item], Path(scratch), section)
            config.method_options["contexts"] = scratch
        result = judge_items([item], config, backend=backend, client=client)
    try:
        raise_if_stopped(result.stats)
    except (AuthError, WrongServerError) as exc:
        raise UsageError(str(exc)) from exc
    criteria = result.criteria.get((item.id, mode), [])
    options: AggregateOptions = {"settings": args.settings}
    v = verdict(method, criteria, options)
    rows = [r for r in result.rows if r.status != "skipped"]
    main = rows[0] if len(rows) == 1 else None
    responses = result.responses
    output: ScoreOutput = {
        "score": v.score, "status": v.detail,
        "reason": v.reason or "; ".join(f"{c.name}: {c.reason}" for c in criteria
                                        if c.reason) or None,
        # VisCE²: ``score`` is the printed integer (the paper's), ``expected`` the expected
        # value over the distribution beside it; ``settings`` names the method's options.
        "expected": main.expected if main else None,
        "printed": main.printed if main else None,
        "paths_disagree": main.paths_disagree if main else None,
        "settings": next((r.settings for r in result.rows if r.settings), None),
        "mode": mode, "mass": main.mass if main else None,
        "argmax": main.argmax if main else None,
        "sd": main.sd if main else None, "entropy": main.entropy if main else None,
        "distribution": _distribution(main.values, main.probs) if main else None,
        "criteria": {c.name: {"score": c.score, "sd": c.sd, "status": c.status,
                              "reason": c.reason, "mass": c.mass, "expected": c.expected,
                              "printed": c.printed, "paths_disagree": c.paths_disagree,
                              "read_by": c.read_by, "confirmation": c.confirmation,
                              "distribution": _distribution(c.values, c.probs)}
                     for c in criteria},
        "reasoning": "\n\n".join(r.text for r in responses if r.text) or None,
        "backend": backend.backend_id,
        "model": next((r.model for r in responses if r.model), None),
        "snapshot": backend.snapshot(),
        "system_fingerprint": next((r.system_fingerprint for r in responses
                                    if r.system_fingerprint), None),
        "template": ", ".join(sorted({r.template for r in result.rows if r.template})),
        "cached": bool(responses) and all(r.cached for r in responses),
        "usage": {"prompt_tokens": result.stats.prompt_tokens,
                  "completion_tokens": result.stats.completion_tokens},
        "aggregate_settings": {name: method.setting(options, name)
                               for name in method.aggregate_settings},
    }
    print_result(output, args.json)
    return EXIT_OK if v.score is not None else EXIT_STRICT


def print_result(result: ScoreOutput, as_json: bool) -> None:
    """Print a score result as JSON or as readable lines."""
    if as_json:
        from capjudge.util.credentials import redact

        print(redact(json.dumps(result, indent=2)))
        return
    score = result.get("score")
    print(f"status:  {result['status']}" + (f" ({result['reason']})" if result.get("reason")
                                            else ""))
    print(f"score:   {score:.2f}" if score is not None else "score:   -")
    criteria = result.get("criteria") or {}
    if len(criteria) > 1:
        for name, c in criteria.items():
            value = "-" if c["score"] is None else f"{c['score']:.2f}"
            sd = "" if c.get("sd") is None else f" (sd {c['sd']:.2f})"
            print(f"  {name:<14} {value}{sd}  {c['status']}")
    if result.get("mass") is not None:
        print(f"mass:    {result['mass']:.3f}   argmax: {result.get('argmax')}   "
              f"sd: {result.get('sd'):.2f}   entropy: {result.get('entropy'):.3f}")
    top = sorted((result.get("distribution") or {}).items(), key=lambda kv: -kv[1])[:5]
    if top:
        print("top:     " + ", ".join(f"{k}: {v:.3f}" for k, v in top))
    print(f"backend: {result['backend']}  model: {result.get('model')}  "
          f"template: {result.get('template')}")
    if result.get("reasoning"):
        print("reasoning:\n" + str(result["reasoning"]).strip())


def register(sub: Any) -> None:
    """Add the subcommand."""
    p = sub.add_parser("score", help="score one caption with one method/mode/backend")
    add_judge_options(p)
    p.add_argument("--mode", help="method mode (default: the method's own choice)")
    p.add_argument("--aggregate", action="append", metavar="NAME=NUMBER",
                   help="a method's own aggregate setting (params.yaml: aggregate.NAME; "
                        "e.g. HarmonicEval's gamma=0.5); repeatable")
    p.add_argument("--gamma", type=float, default=None,
                   help="the same as --aggregate gamma=NUMBER (HarmonicEval's weighting: "
                        "1 uniform, 0.5 inverse variance, ->0 select; default 0.75)")
    p.add_argument("--extractor", help="context-stage backend (default: --backend)")
    media = p.add_mutually_exclusive_group()
    media.add_argument("--image", type=Path)
    media.add_argument("--video", type=Path)
    media.add_argument("--views", type=Path, nargs="+", help="a 3D object's rendered views")
    p.add_argument("--caption", required=True)
    p.add_argument("--ref", action="append", help="a reference caption (repeatable)")
    p.add_argument("--question")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)
