"""``capjudge meta-eval``: agreement of metrics and judges with a human-judgment dataset."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from capjudge.cli.common import EXIT_OK, UsageError, add_judge_options, bounded


def run(args: argparse.Namespace) -> int:
    """Score the dataset with the baselines and judges; print and optionally save JSON."""
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
    except (DatasetError, KeyError, ValueError, RuntimeError, OSError) as exc:
        raise UsageError(str(exc)) from exc
    text = json.dumps(result, indent=2, default=float)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(text + "\n")
    print(f"{result['dataset']} ({result['protocol']}): {result['protocol_description']}")
    for name, m in result["metrics"].items():
        if "accuracy" in m:
            print(f"  {name:<24} accuracy {100 * m['accuracy']:.1f}  "
                  f"(ties {m['ties']}, n {m['n']})")
        else:
            print(f"  {name:<24} tau_b {_pct(m.get('kendall_tau_b'))}  tau_c "
                  f"{_pct(m.get('kendall_tau_c'))}  pearson {_pct(m.get('pearson'))}  "
                  f"spearman {_pct(m.get('spearman'))}  (n {m['n']})"
                  + (f"  [{m['note']}]" if m.get("note") and "per-annotator" not in
                     str(m.get("note")) else ""))
    return EXIT_OK


def _pct(value: object) -> str:
    """A coefficient x100, or '-' where it does not exist (the note says why)."""
    if isinstance(value, int | float) and value == value:
        return f"{100 * value:.1f}"
    return "-"


def register(sub: Any) -> None:
    """Add the subcommand."""
    from capjudge.metaeval.datasets import dataset_names

    p = sub.add_parser("meta-eval", help="agreement of metrics/judges with a human dataset")
    add_judge_options(p)
    p.add_argument("--dataset", required=True, choices=dataset_names())
    p.add_argument("--path", type=Path, required=True, help="the dataset file")
    p.add_argument("--protocol", help="scoring protocol (default: the dataset's usual one)")
    p.add_argument("--refs", type=bounded(int, 0),
                   help="references the baselines see (default: protocol)")
    p.add_argument("--metrics", default="", help="comma list of bleu1,bleu4,meteor,rougeL,cider")
    p.add_argument("--judge", action="append",
                   help="METHOD[:MODE] scored with --backend (repeatable), e.g. gveval:ref-only")
    p.add_argument("--bootstrap", type=bounded(int, 0), default=1000,
                   help="resamples for the 95%% CIs")
    p.add_argument("--limit", type=bounded(int, 1), help="only the first N candidates/pairs")
    p.add_argument("--json", type=Path, help="write the result JSON here")
    p.set_defaults(func=run)
