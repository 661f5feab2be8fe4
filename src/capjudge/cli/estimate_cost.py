"""``capjudge estimate-cost``: predict a run's tokens and dollars without calling anything."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from capjudge.cli.common import EXIT_OK, UsageError, add_judge_options, bounded, judge_config


def run(args: argparse.Namespace) -> int:
    """Plan the requests as the judge would and price them."""
    from capjudge.cost import estimate, price_for
    from capjudge.item import load_items
    from capjudge.judge import method_options, plan, repeat_planned
    from capjudge.methods import get_method

    config = judge_config(args, args.modes)
    method = get_method(config.method)
    try:
        items = load_items(args.items)
        planned, skipped = plan(items, config,
                                options=method_options(config, method, not args.text_only))
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    planned = repeat_planned(planned, config.repeats)  # test-retest repeats are paid for too
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
    else:
        # The same requests through the Batch API (submit: batch): the entry's batch_discount
        # (50 % unless params.yaml says otherwise) off both token prices.
        batch = price.batch()
        out["batch"] = {
            "discount": price.batch_discount,
            "usd_expected": round(batch.cost(est.prompt_tokens,
                                             est.expected_completion_tokens), 4),
            "usd_max": round(batch.cost(est.prompt_tokens, est.max_completion_tokens), 4)}
    print(json.dumps(out, indent=2))
    return EXIT_OK


def register(sub: Any) -> None:
    """Add the subcommand."""
    p = sub.add_parser("estimate-cost", help="predict a run's tokens and dollars, no calls")
    add_judge_options(p)
    p.add_argument("--items", type=Path, default=Path("data/ingest/items.parquet"))
    p.add_argument("--modes", nargs="+")
    p.add_argument("--text-only", action="store_true", help="as for a backend without vision")
    p.add_argument("--expected-completion", type=bounded(int, 0), default=250,
                   help="typical reasoning length in tokens")
    p.set_defaults(func=run, backend="openai/gpt-4o-2024-08-06")
