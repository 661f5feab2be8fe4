"""Meta-evaluation: how well metrics and judges agree with human judgments.

:func:`run_meta_eval` loads a dataset, scores its candidates with the requested metrics
(reference-based baselines and/or a judge), arranges human ratings as the protocol says, and
computes Kendall tau-b/tau-c, Pearson, Spearman (or pairwise accuracy) with bootstrap 95 %
confidence intervals. Every result names its protocol.

The code lives in :mod:`capjudge.metaeval.run`; this package re-exports its public names.
"""

from capjudge.metaeval.run import (
    Rows,
    Scorer,
    arrange,
    correlate,
    correlation_matrix,
    judge_scorer,
    run_meta_eval,
)

__all__ = ["Rows", "Scorer", "arrange", "correlate", "correlation_matrix", "judge_scorer",
           "run_meta_eval"]
