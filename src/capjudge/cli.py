"""The ``capjudge`` command line. Subcommands mirror the pipeline stages.

Exit codes (all subcommands):

- 0: success (for ``ingest``: also when rows were quarantined; they are counted and reported).
- 1: an unexpected internal error (a bug: please report it with the traceback).
- 2: bad usage or unreadable input (a manifest that cannot be parsed, a missing file); the
  message names the file and, where it applies, the line.
- 3: ``--strict`` was given and rows were quarantined / judgements failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_STRICT = 0, 1, 2, 3


class UsageError(Exception):
    """Bad arguments or unreadable input: exit code 2 with the message."""


def _cmd_sample(args: argparse.Namespace) -> int:
    from capjudge.sample import generate_sample

    counts = generate_sample(args.out, seed=args.seed, n_images=args.images)
    print(json.dumps({"out": str(args.out), **counts}))
    return EXIT_OK


def _cmd_ingest(args: argparse.Namespace) -> int:
    from capjudge.ingest import IngestConfig, ingest
    from capjudge.manifest import ManifestError

    config = IngestConfig(frame_policy=args.frame_policy, uniform_frames=args.frames,
                          decode_timeout_s=args.decode_timeout)
    try:
        result = ingest(args.manifest, args.media_root, args.out, config)
    except ManifestError as exc:
        raise UsageError(str(exc)) from exc
    print(f"ingest: {result.n_rows} rows -> {result.n_items} items "
          f"({', '.join(f'{k} {v}' for k, v in sorted(result.by_kind.items())) or 'none'}), "
          f"{result.n_quarantined} quarantined", file=sys.stderr)
    for reason, count in sorted(result.reasons.items()):
        print(f"  quarantined: {count} x {reason}", file=sys.stderr)
    if result.n_quarantined:
        print(f"  details: {Path(result.out_dir) / 'quarantine.parquet'}", file=sys.stderr)
    if args.strict and result.n_quarantined:
        return EXIT_STRICT
    return EXIT_OK


def _judge_config(args: argparse.Namespace, modes: list[str] | None) -> Any:
    from capjudge.judge import JudgeConfig

    options: dict[str, Any] = {}
    if args.base_url:
        options["base_url"] = args.base_url
    prices: dict[str, Any] = {}
    params = Path(args.params)
    if params.is_file():
        import yaml

        prices = (yaml.safe_load(params.read_text()) or {}).get("judge", {}).get("prices", {})
    return JudgeConfig(method=args.method, backend=args.backend, modes=modes,
                       max_tokens=args.max_tokens, min_mass=args.min_mass,
                       backend_options=options, prices=prices,
                       cache_dir=str(args.cache_dir) if args.cache_dir else None)


def _adhoc_item(args: argparse.Namespace) -> dict[str, Any]:
    """An item built from --image/--video and --caption/--ref, hashed like ingest does."""
    from capjudge.cache import default_cache_dir
    from capjudge.ingest import IngestConfig
    from capjudge.media import MediaError, check_image, sha256_file, sha256_text

    item: dict[str, Any] = {"id": "cli", "task": "caption", "candidate": args.caption,
                            "references": args.ref or [], "question": args.question,
                            "system": None, "media_kind": "none", "media_root": ".",
                            "media_path": None, "media_sha256": None, "tile_path": None,
                            "tile_sha256": None}
    try:
        if args.image:
            path = Path(args.image)
            check_image(path)
            item.update(media_kind="image", media_root=str(path.parent), media_path=path.name,
                        media_sha256=sha256_file(path))
        elif args.video or getattr(args, "views", None):
            # The same content-hash-keyed tile cache as the ingest stage.
            from capjudge.ingest import TileCache

            tiles = TileCache(Path(args.cache_dir or default_cache_dir()) / "tiles",
                               IngestConfig())
            if args.video:
                path = Path(args.video)
                sha = sha256_file(path)
                meta = tiles.video(path, sha)
                item.update(media_kind="video", media_root=str(path.parent),
                            media_path=path.name, media_sha256=sha,
                            tile_path=meta["tile_path"], tile_sha256=meta["tile_sha256"])
            else:
                paths = [Path(v) for v in args.views]
                sha = sha256_text(*[sha256_file(v) for v in paths])
                tile_path, tile_sha = tiles.views(paths, sha)
                item.update(media_kind="views", media_root=".", media_path=str(paths[0]),
                            media_sha256=sha, tile_path=tile_path, tile_sha256=tile_sha)
    except (MediaError, OSError) as exc:
        raise UsageError(str(exc)) from exc
    return item


def _cmd_score(args: argparse.Namespace) -> int:
    from capjudge.backends.base import BackendError
    from capjudge.judge import make_backend, make_client, method_options, plan, response_rows
    from capjudge.methods import Criterion, get_method

    config = _judge_config(args, [args.mode] if args.mode else None)
    method = get_method(args.method)
    if args.mode is None:
        config.modes = [method.default_modes[0]] if method.name != "visce2" else ["context"]
    item = _adhoc_item(args)
    try:
        backend = make_backend(config)
    except BackendError as exc:
        raise UsageError(str(exc)) from exc
    client = make_client(config, backend)
    options = method_options(config, backend.capabilities.vision)
    if method.needs_context and options.vision:
        # VisCE² step 1 on the fly, through the same cache as the context stage.
        from capjudge.context import ContextConfig, extract

        rows = extract([item], ContextConfig(backend=args.extractor or args.backend),
                       backend if not args.extractor else make_backend(
                           type(config)(method=config.method, backend=args.extractor,
                                        backend_options=config.backend_options)), client)
        table: dict[str, dict[str, Any]] = {}
        for r in rows:
            table.setdefault(r["media_sha256"], {})[r["kind"]] = r
        options.extra["context_table"] = table
    planned, skipped = plan([item], config, backend.capabilities.vision, options)
    responses = client.run([p.request for p in planned])
    criteria: list[Criterion] = []
    rows = []
    for p, response in zip(planned, responses, strict=True):
        criteria += method.interpret(p, response)
        rows += response_rows(p, response, item, args.method, backend, client.key(p.request),
                              None)
    for s in skipped:
        criteria.append(Criterion(s.criterion if s.criterion != "*" else "score", "skipped",
                                  s.reason))
    gamma = {"gamma": args.gamma}
    score, why = method.overall([c for c in criteria if c.status != "skipped"], gamma)
    statuses = {c.status for c in criteria}
    if score is not None:
        status = "ok" if statuses <= {"ok", "skipped"} else (
            "low_mass" if statuses <= {"ok", "low_mass", "skipped"} else "partial")
    else:
        order = ("error", "refused", "parse_failure", "undefined", "low_mass", "skipped")
        status = next((s for s in order if s in statuses), "error")
    main = rows[0] if len(rows) == 1 else {}
    probs = main.get("probs")
    result: dict[str, Any] = {
        "score": score, "status": status,
        "reason": why or "; ".join(f"{c.name}: {c.reason}" for c in criteria if c.reason) or None,
        "mass": main.get("mass"), "argmax": main.get("argmax"), "sd": main.get("sd"),
        "entropy": main.get("entropy"),
        "distribution": ({str(v): p for v, p in zip(main["values"], probs, strict=True) if p > 0}
                         if probs else None),
        "criteria": {c.name: {"score": c.score, "sd": c.sd, "status": c.status,
                              "reason": c.reason, "mass": c.mass,
                              "distribution": ({str(v): p for v, p in zip(c.values, c.probs,
                                                                         strict=True) if p > 0}
                                               if c.values and c.probs else None)}
                     for c in criteria},
        "reasoning": "\n\n".join(r.text for r in responses if r.text) or None,
        "backend": backend.backend_id,
        "model": next((r.model for r in responses if r.model), None),
        "snapshot": backend.snapshot(),
        "system_fingerprint": next((r.system_fingerprint for r in responses
                                    if r.system_fingerprint), None),
        "template": ", ".join(sorted({p.request.template for p in planned}
                                     | {s.template for s in skipped if s.template})),
        "cached": bool(responses) and all(r.cached for r in responses),
        "usage": {"prompt_tokens": sum(r.usage.prompt_tokens for r in responses),
                  "completion_tokens": sum(r.usage.completion_tokens for r in responses)},
    }
    if args.method == "harmoniceval":
        result["gamma"] = args.gamma
    _print_result(result, args.json)
    return EXIT_OK if score is not None else EXIT_STRICT


def _print_result(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, indent=2))
        return
    score = result.get("score")
    print(f"status:  {result['status']}" + (f" ({result['reason']})" if result.get("reason")
                                            else ""))
    print(f"score:   {score:.2f}" if score is not None else "score:   -")
    for name, c in (result.get("criteria") or {}).items():
        if len(result.get("criteria") or {}) > 1:
            value = "-" if c["score"] is None else f"{c['score']:.2f}"
            sd = "" if c.get("sd") is None else f" (sd {c['sd']:.2f})"
            print(f"  {name:<14} {value}{sd}  {c['status']}")
    if result.get("mass") is not None:
        print(f"mass:    {result['mass']:.3f}   argmax: {result.get('argmax')}   "
              f"sd: {result.get('sd'):.2f}   entropy: {result.get('entropy'):.3f}")
    dist = result.get("distribution") or {}
    top = sorted(dist.items(), key=lambda kv: -kv[1])[:5]
    if top:
        print("top:     " + ", ".join(f"{k}: {v:.3f}" for k, v in top))
    print(f"backend: {result['backend']}  model: {result.get('model')}  "
          f"template: {result.get('template')}")
    if result.get("reasoning"):
        print("reasoning:\n" + str(result["reasoning"]).strip())


def _cmd_judge(args: argparse.Namespace) -> int:
    from capjudge.backends.base import BackendError
    from capjudge.judge import run_judge

    config = _judge_config(args, args.modes)
    config.limit = args.limit
    try:
        summary = run_judge(args.items, args.out, config)
    except BackendError as exc:
        raise UsageError(str(exc)) from exc
    print(json.dumps({k: summary[k] for k in ("by_status", "model_calls", "cache_hits",
                                              "modes_ran", "modes_skipped")}, indent=2))
    if args.strict and summary["failure_rate"] > 0:
        return EXIT_STRICT
    return EXIT_OK


def _cmd_estimate_cost(args: argparse.Namespace) -> int:
    from capjudge.cost import estimate, price_for
    from capjudge.judge import load_items, plan

    config = _judge_config(args, args.modes)
    items = load_items(args.items)
    planned, skipped = plan(items, config, vision=not args.text_only)
    model = args.backend.split("/", 1)[1]
    price = price_for(model, config.prices)
    est = estimate([p.request for p in planned], price, args.expected_completion)
    out = {"backend": args.backend, "method": args.method, "requests": est.requests,
           "skipped": len(skipped), "prompt_tokens": est.prompt_tokens,
           "image_tokens": est.image_tokens,
           "expected_completion_tokens": est.expected_completion_tokens,
           "max_completion_tokens": est.max_completion_tokens,
           "usd_expected": None if est.usd_expected is None else round(est.usd_expected, 4),
           "usd_max": None if est.usd_max is None else round(est.usd_max, 4),
           "price": None if price is None else vars(price)}
    if price is None:
        out["note"] = f"no price for {model!r} in params.yaml judge.prices"
    print(json.dumps(out, indent=2))
    return EXIT_OK


def _cmd_prepare_model(args: argparse.Namespace) -> int:
    from capjudge.backends.embedded import prepare_embedded

    print(prepare_embedded(args.name))
    return EXIT_OK


def _cmd_meta_eval(args: argparse.Namespace) -> int:
    from capjudge.metaeval import judge_scorer, run_meta_eval
    from capjudge.metaeval.datasets import DatasetError

    judges = {}
    for spec in args.judge or []:
        method, _, mode = spec.partition(":")
        options = {"base_url": args.base_url} if args.base_url else {}
        judges[spec] = judge_scorer(method, mode or None, args.backend, options,
                                    str(args.cache_dir) if args.cache_dir else None,
                                    args.max_tokens)
    metrics = [m for m in (args.metrics or "").split(",") if m]
    try:
        result = run_meta_eval(args.dataset, str(args.path), protocol=args.protocol,
                               metrics=metrics, judges=judges, refs=args.refs,
                               n_boot=args.bootstrap, limit=args.limit)
    except (DatasetError, KeyError, ValueError, RuntimeError) as exc:
        raise UsageError(str(exc)) from exc
    text = json.dumps(result, indent=2, default=float)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(text + "\n")
    headline = {"pascal50s": "accuracy", "foil": "accuracy"}.get(args.dataset)
    print(f"{result['dataset']} ({result['protocol']}): {result['protocol_description']}")
    for name, m in result["metrics"].items():
        if headline or "accuracy" in m:
            print(f"  {name:<24} accuracy {100 * m['accuracy']:.1f}  "
                  f"(ties {m['ties']}, n {m['n']})")
        else:
            print(f"  {name:<24} tau_b {100 * m['kendall_tau_b']:.1f}  tau_c "
                  f"{100 * m['kendall_tau_c']:.1f}  pearson {100 * m['pearson']:.1f}  "
                  f"spearman {100 * m['spearman']:.1f}  (n {m['n']})")
    return EXIT_OK


def _cmd_compare(args: argparse.Namespace) -> int:
    from capjudge.compare import compare_runs, write_comparison
    from capjudge.lineage import resolve_run

    registry = Path(args.registry)
    try:
        db_a, db_b = resolve_run(args.run_a, registry), resolve_run(args.run_b, registry)
        result = compare_runs(db_a, db_b, series=tuple(args.series) if args.series else None,
                              n_boot=args.bootstrap, threshold=args.threshold)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    md, js = write_comparison(result, Path(args.out))
    print(md.read_text())
    print(f"written: {md}, {js}", file=sys.stderr)
    return EXIT_OK


def _cmd_runs(args: argparse.Namespace) -> int:
    from capjudge.lineage import list_runs

    for run in list_runs(Path(args.registry)):
        judges = ", ".join(f"{b['judge']}={b['backend']}@{b['snapshot']}"
                           for b in run["backends"])
        print(f"{run['run_id']}  {run['time']}  git {str(run['git_revision'])[:10]}  {judges}")
    return EXIT_OK


def _cmd_watch(args: argparse.Namespace) -> int:
    import subprocess

    if not Path("flows/watch.py").is_file():
        raise UsageError("run `capjudge watch` from the project root (flows/watch.py)")
    cmd = [sys.executable, "-m", "flows.watch", "--params", args.params,
           "--registry", args.registry]
    cmd += ["--cron", args.cron] if args.cron else ["--once"]
    if args.no_probe:
        cmd.append("--no-probe")
    return subprocess.call(cmd)


def _add_judge_options(p: argparse.ArgumentParser, method_default: str | None = "gveval"
                       ) -> None:
    from capjudge.backends import DEFAULT_BACKEND
    from capjudge.methods import METHODS

    p.add_argument("--method", default=method_default, required=method_default is None,
                   choices=METHODS)
    p.add_argument("--backend", default=DEFAULT_BACKEND,
                   help="openai/<model>, hf/<path>, embedded/gemma-3-270m, fake/<script>")
    p.add_argument("--base-url", help="OpenAI-compatible server (else $OPENAI_BASE_URL)")
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--min-mass", type=float, default=0.5,
                   help="below this captured probability mass a judgement is 'low_mass'")
    p.add_argument("--cache-dir", type=Path,
                   help="request cache (default $CAPJUDGE_CACHE_DIR or .capjudge-cache)")
    p.add_argument("--params", default="params.yaml", help="for the price table")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    from capjudge.media import FRAME_POLICIES

    parser = argparse.ArgumentParser(prog="capjudge", description=__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("sample", help="generate the bundled synthetic sample suite (CC0)")
    p.add_argument("--out", type=Path, default=Path("data/sample"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--images", type=int, default=20, help="number of synthetic images")
    p.set_defaults(func=_cmd_sample)

    p = sub.add_parser("ingest", help="validate a manifest, hash media, sample video frames")
    p.add_argument("manifest", type=Path, help="JSONL (reference), CSV or Parquet manifest")
    p.add_argument("--media-root", type=Path, required=True,
                   help="relative media paths resolve here; nothing outside it is read")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--frame-policy", choices=FRAME_POLICIES, default="first_middle_last")
    p.add_argument("--frames", type=int, default=3, help="frames for --frame-policy uniform")
    p.add_argument("--decode-timeout", type=float, default=60.0,
                   help="seconds allowed to decode one video")
    p.add_argument("--strict", action="store_true", help="exit 3 if any row is quarantined")
    p.set_defaults(func=_cmd_ingest)

    p = sub.add_parser("score", help="score one caption with one method/mode/backend")
    _add_judge_options(p)
    p.add_argument("--mode", help="method mode (default: the method's first; visce2: context)")
    p.add_argument("--gamma", type=float, default=0.75,
                   help="HarmonicEval weighting: 1 uniform, 0.5 inverse variance, ->0 select")
    p.add_argument("--extractor", help="VisCE² context extractor backend (default: --backend)")
    media = p.add_mutually_exclusive_group()
    media.add_argument("--image", type=Path)
    media.add_argument("--video", type=Path)
    media.add_argument("--views", type=Path, nargs="+", help="a 3D object's rendered views")
    p.add_argument("--caption", required=True)
    p.add_argument("--ref", action="append", help="a reference caption (repeatable)")
    p.add_argument("--question")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_score)

    p = sub.add_parser("judge", help="run one judge over ingested items (no Prefect)")
    _add_judge_options(p)
    p.add_argument("--items", type=Path, default=Path("data/ingest/items.parquet"))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--modes", nargs="+")
    p.add_argument("--limit", type=int, help="only the first N items")
    p.add_argument("--strict", action="store_true", help="exit 3 if any judgement failed")
    p.set_defaults(func=_cmd_judge)

    p = sub.add_parser("estimate-cost", help="predict a run's tokens and dollars, no calls")
    _add_judge_options(p)
    p.add_argument("--items", type=Path, default=Path("data/ingest/items.parquet"))
    p.add_argument("--modes", nargs="+")
    p.add_argument("--text-only", action="store_true", help="as for a backend without vision")
    p.add_argument("--expected-completion", type=int, default=250,
                   help="typical reasoning length in tokens")
    p.set_defaults(func=_cmd_estimate_cost, backend="openai/gpt-4o-2024-08-06")

    p = sub.add_parser("meta-eval", help="agreement of metrics/judges with a human dataset")
    _add_judge_options(p, method_default="gveval")
    p.add_argument("--dataset", required=True,
                   choices=["flickr8k-expert", "flickr8k-cf", "composite", "thumb",
                            "pascal50s", "foil", "vatex-eval", "msvd-eval", "polaris", "mmhe"])
    p.add_argument("--path", type=Path, required=True, help="the dataset file")
    p.add_argument("--protocol", help="scoring protocol (default: the dataset's usual one)")
    p.add_argument("--refs", type=int, help="references the baselines see (default: protocol)")
    p.add_argument("--metrics", default="", help="comma list of bleu1,bleu4,meteor,rougeL,cider")
    p.add_argument("--judge", action="append",
                   help="METHOD[:MODE] scored with --backend (repeatable), e.g. gveval:ref-only")
    p.add_argument("--bootstrap", type=int, default=1000, help="resamples for the 95%% CIs")
    p.add_argument("--limit", type=int, help="only the first N candidates/pairs")
    p.add_argument("--json", type=Path, help="write the result JSON here")
    p.set_defaults(func=_cmd_meta_eval)

    p = sub.add_parser("compare", help="compare two runs: score shifts, agreement, flips, cost")
    p.add_argument("run_a", help="run id (or prefix, 'latest', 'previous'), report dir or .duckdb")
    p.add_argument("run_b")
    p.add_argument("--registry", default=".capjudge-runs")
    p.add_argument("--series", nargs=2, metavar=("A_KEY", "B_KEY"),
                   help="compare judge/mode A_KEY of run A with B_KEY of run B")
    p.add_argument("--threshold", type=float, help="pass/fail cut (default: scale midpoint)")
    p.add_argument("--bootstrap", type=int, default=500)
    p.add_argument("--out", default="reports/compare")
    p.set_defaults(func=_cmd_compare)

    p = sub.add_parser("watch", help="re-evaluate when a judge's backend model changes")
    p.add_argument("--cron", help="serve on this cron schedule (needs a Prefect server); "
                                  "without it, check once now")
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--registry", default=".capjudge-runs")
    p.add_argument("--no-probe", action="store_true")
    p.set_defaults(func=_cmd_watch)

    p = sub.add_parser("runs", help="list the registered runs")
    p.add_argument("--registry", default=".capjudge-runs")
    p.set_defaults(func=_cmd_runs)

    p = sub.add_parser("prepare-model", help="convert the embedded judge once (cached)")
    p.add_argument("--name", default="gemma-3-270m")
    p.set_defaults(func=_cmd_prepare_model)

    for register in _EXTENSIONS:
        register(sub)
    return parser


# Later stages register their subcommands here (keeps this module's imports light).
_EXTENSIONS: list[Callable[[Any], None]] = []


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``capjudge`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr,
    )
    for noisy in ("httpx", "httpx2", "openai"):  # one INFO line per HTTP request otherwise
        logging.getLogger(noisy).setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    try:
        code: int = args.func(args)
    except UsageError as exc:
        print(f"capjudge {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
