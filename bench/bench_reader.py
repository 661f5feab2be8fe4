"""The reader's figure on the judge-answer corpora (issue 30).

Every entry is replayed through ``capjudge score --json`` against the stand-in
OpenAI-protocol server (tests/replay.py) and compared with its hand-worked reading.
Prints, per corpus: entries read right, and wrong values returned as valid (the worst
failure), then each miss.

    python bench/bench_reader.py                       # the blind corpus
    python bench/bench_reader.py tests/data/holdout_answers.json
    python bench/bench_reader.py --confirm tests/data/blind_answers_e.json   # with follow-ups
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from replay import judged, load, replay  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="*", type=Path,
                        default=[ROOT / "tests/data/blind_answers.json"])
    parser.add_argument("--quiet", action="store_true", help="figures only, no misses")
    parser.add_argument("--confirm", action="store_true",
                        help="confirm: follow_up (an off-contract answer asks the follow-up "
                             "question; the entry's follow_up is the reply)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    for path in args.corpora:
        entries = load(path)
        outcomes = []
        sent: Counter[str] = Counter()
        with tempfile.TemporaryDirectory() as tmp:
            for k, entry in enumerate(entries):
                work = Path(tmp) / str(k)
                work.mkdir()
                out = replay(entry, work, confirm=args.confirm)
                sent.update(out["replayed"])
                sent["asked"] += bool(out["replayed"]["questions"])
                outcomes.append(judged(entry, out))
        right = sum(o.right for o in outcomes)
        wrong = [o for o in outcomes if o.wrong_valid]
        by_method = Counter(e["method"] for e, o in zip(entries, outcomes, strict=True)
                            if not o.right)
        print(f"{path.name}: {right}/{len(outcomes)} read right; {len(wrong)} wrong value(s) "
              f"returned as valid; misses by method: {dict(by_method)}")
        if args.confirm:
            # The cost of confirming off-contract readings by the follow-up question: one more
            # request per answer that asks it (the conversation again, at most 64 tokens out).
            print(f"  confirmation: {sent['asked']} of {len(entries)} answers asked the "
                  f"follow-up question ({100 * sent['asked'] / len(entries):.0f} %): "
                  f"{sent['questions']} extra requests on {sent['requests'] - sent['questions']}"
                  f" ({100 * sent['questions'] / max(1, sent['requests'] - sent['questions']):.0f}"
                  " %)")
        if not args.quiet:
            for o in outcomes:
                if not o.right:
                    flag = "WRONG-VALID" if o.wrong_valid else "miss"
                    print(f"  {flag:<11} {o.id}: got {o.got_status} {o.got_score} | want "
                          f"{o.want_status} {o.want_score} | {(o.reason or '')[:150]}")


if __name__ == "__main__":
    main()
