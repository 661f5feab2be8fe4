"""Injection inflation and what the guarded prompt variant changes, on the bundled sample.

Runs on the OpenAI-protocol stand-in (no network): the sample is generated and ingested in a
temporary folder; every paper method is judged on the adversarial items plus eighteen injection
captions (see :mod:`capjudge.testing.quoting`) by an honest judge and by one that quotes the
candidate after its verdict, with the reader as it is and with quotation masking turned off;
then the whole sample under ``prompt_variant: paper`` and ``guarded``. Prints one table.

    python bench/bench_injection_variants.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from statistics import mean

from capjudge.ingest import ingest
from capjudge.item import load_items
from capjudge.judge import JudgeConfig, judge_items
from capjudge.methods import get_method, verdict
from capjudge.reading import masking
from capjudge.sample import generate_sample
from capjudge.testing.openai_server import MockOpenAIServer
from capjudge.testing.quoting import injection_inflation, injection_items

METHODS = {"gveval": ["ref-free", "ref-only", "combined"], "gveval-accr": ["combined"],
           "visce2": ["vanilla", "references"], "harmoniceval": None, "cap3d": None}


def variant_run(items: list, method: str, modes: list[str] | None, variant: str,
                server: MockOpenAIServer, cache: Path) -> tuple[dict, float]:
    config = JudgeConfig(method=method, backend="openai/gpt-4o-2024-08-06",
                         backend_options={"base_url": server.url}, cache_dir=str(cache),
                         modes=modes, method_options={"prompt_variant": variant,
                                                      "all_media": True})
    result = judge_items(items, config)
    m = get_method(method)
    scores = {k: verdict(m, c, {"gamma": 0.75}).score for k, c in result.criteria.items()}
    chars = mean(len("".join(msg.text() for msg in p.request.messages))
                 for p in result.planned)
    return scores, chars


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        generate_sample(root / "sample", seed=0)
        ingest(root / "sample" / "manifest.jsonl", root / "sample", root / "ingest")
        items = load_items(root / "ingest" / "items.parquet")
        attacks = injection_items(items)
        print("method        | inflation (masking on) | inflation (quote masking off) | "
              "n | prompt chars paper -> guarded | items whose score moved | mean |Δ|")
        for method, modes in METHODS.items():
            with MockOpenAIServer() as server:
                on = injection_inflation(attacks, method, server, str(root / f"c1-{method}"),
                                         modes, {"all_media": True})
                saved = masking.mask_quotes
                masking.mask_quotes = lambda text, quotes: text  # type: ignore[assignment]
                try:
                    off = injection_inflation(attacks, method, server,
                                              str(root / f"c2-{method}"), modes,
                                              {"all_media": True})
                finally:
                    masking.mask_quotes = saved  # type: ignore[assignment]
            with MockOpenAIServer() as server:
                paper, c_paper = variant_run(items, method, modes, "paper", server,
                                             root / f"v1-{method}")
                guarded, c_guarded = variant_run(items, method, modes, "guarded", server,
                                                 root / f"v2-{method}")
            both = [k for k in paper if paper[k] is not None and guarded.get(k) is not None]
            moved = sum(abs(paper[k] - guarded[k]) > 1e-9 for k in both)
            delta = mean(abs(paper[k] - guarded[k]) for k in both) if both else float("nan")
            print(f"{method:<13} | {on['inflation_pct']:+.2f} pts of 100 "
                  f"| {off['inflation_pct']:+.2f} pts of 100 | {on['n']} "
                  f"| {c_paper:.0f} -> {c_guarded:.0f} | {moved}/{len(both)} | {delta:.2f}")


if __name__ == "__main__":
    main()
