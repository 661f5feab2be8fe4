"""Classical reference-based baselines (BLEU-1/4, METEOR, ROUGE-L, CIDEr) via pycocoevalcap.

Computed exactly as CLIPScore's ``generation_eval_utils`` does, so published numbers reproduce:
the candidate list is scored as given (one entry per rating row under the "rows" protocol, so
CIDEr's document frequencies match), texts are whitespace-normalised, then tokenised with the
PTB tokenizer (Java), and the per-candidate scores are used. METEOR and the tokenizer need Java
(installed by the setup script).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence

log = logging.getLogger(__name__)

BASELINES = ("bleu1", "bleu4", "meteor", "rougeL", "cider")


def require_java() -> None:
    """Raise a clear error when no Java runtime is on PATH."""
    if shutil.which("java") is None:
        raise RuntimeError("METEOR and the PTB tokenizer need Java: install a JRE "
                           "(Debian: apt-get install default-jre-headless)")


def baseline_scores(candidates: Sequence[str], references: Sequence[Sequence[str]],
                    metrics: Sequence[str] = BASELINES) -> dict[str, list[float]]:
    """Per-candidate scores for each requested baseline.

    Args:
        candidates: the texts to score.
        references: each candidate's references (at least one each).
        metrics: which of :data:`BASELINES` to compute.

    Returns:
        metric -> one score per candidate.

    Raises:
        ValueError: an unknown metric, misaligned inputs, or a candidate without references
            (the baselines are reference-based: pycocoevalcap would crash or score it 0).
        RuntimeError: no Java runtime.
    """
    unknown = set(metrics) - set(BASELINES)
    if unknown:
        raise ValueError(f"unknown baseline metrics {sorted(unknown)}; known: {BASELINES}")
    if len(candidates) != len(references):
        raise ValueError(f"{len(candidates)} candidates but {len(references)} reference lists")
    missing = [i for i, refs in enumerate(references) if not refs]
    if missing:
        raise ValueError(f"the reference-based baselines {', '.join(metrics)} need references; "
                         f"{len(missing)} of {len(candidates)} candidates have none (first: "
                         f"index {missing[0]}): use reference-free metrics on such data")
    if not candidates:
        return {m: [] for m in metrics}
    require_java()
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    refs = {i: [{"caption": " ".join(r.split())} for r in rs] for i, rs in enumerate(references)}
    cands = {i: [{"caption": " ".join(c.split())}] for i, c in enumerate(candidates)}
    tokenizer = PTBTokenizer()
    refs_tok = tokenizer.tokenize(refs)
    cands_tok = tokenizer.tokenize(cands)
    out: dict[str, list[float]] = {}
    if {"bleu1", "bleu4"} & set(metrics):
        from pycocoevalcap.bleu.bleu import Bleu

        _, per = Bleu(4).compute_score(refs_tok, cands_tok, verbose=0)
        if "bleu1" in metrics:
            out["bleu1"] = [float(x) for x in per[0]]
        if "bleu4" in metrics:
            out["bleu4"] = [float(x) for x in per[3]]
    if "meteor" in metrics:
        from pycocoevalcap.meteor.meteor import Meteor

        log.info("METEOR on %d candidates (Java)...", len(candidates))
        _, per = Meteor().compute_score(refs_tok, cands_tok)
        out["meteor"] = [float(x) for x in per]
    if "rougeL" in metrics:
        from pycocoevalcap.rouge.rouge import Rouge

        _, per = Rouge().compute_score(refs_tok, cands_tok)
        out["rougeL"] = [float(x) for x in per]
    if "cider" in metrics:
        from pycocoevalcap.cider.cider import Cider

        _, per = Cider().compute_score(refs_tok, cands_tok)
        out["cider"] = [float(x) for x in per]
    return out
