"""capjudge's statistics, one home for each: pure functions of plain arrays, no I/O.

Meta-evaluation, judge reliability, run comparison and the report all call these; each is
tested once, against scipy and published worked examples (``tests/test_stats*.py``).

- :mod:`~capjudge.stats.correlation`: Kendall tau-b/tau-c, Pearson, Spearman, partial
  correlations, criterion matrices.
- :mod:`~capjudge.stats.bootstrap`: :class:`Estimate`, percentile bootstrap CIs (item or
  cluster resampling).
- :mod:`~capjudge.stats.paired`: paired bootstrap, paired permutation test, judge-vs-judge
  comparison, Holm adjustment.
- :mod:`~capjudge.stats.interrater`: ICC (Shrout & Fleiss), Krippendorff's alpha, test-retest.
- :mod:`~capjudge.stats.calibration`: isotonic calibration on a seeded split.
- :mod:`~capjudge.stats.bias`: length bias (partial Spearman).
- :mod:`~capjudge.stats.system`: system-level correlation and its stratified bootstrap.
- :mod:`~capjudge.stats.pairwise`: pairwise preference and best-of-N accuracy.
"""

from capjudge.stats.bias import length_bias
from capjudge.stats.bootstrap import (
    Estimate,
    bootstrap_ci,
    bootstrap_rows,
    mean_difference,
    none_if_nan,
    percentile_interval,
)
from capjudge.stats.calibration import (
    IsotonicMap,
    calibrate,
    isotonic_fit,
    linear_map,
    split_indices,
)
from capjudge.stats.correlation import (
    STATS,
    ArrayLike,
    Stat,
    correlation_matrix,
    kendall_tau_b,
    kendall_tau_c,
    partial_correlation,
    partial_spearman,
    pearson,
    pearson_fast,
    spearman,
    undefined_reason,
)
from capjudge.stats.interrater import (
    ICCForm,
    anova_mean_squares,
    complete_rows,
    icc,
    item_spread,
    krippendorff_alpha,
    retest,
)
from capjudge.stats.paired import (
    Comparison,
    holm,
    paired_comparison,
    paired_difference,
    paired_permutation_test,
)
from capjudge.stats.pairwise import PairwiseResult, best_of_n_accuracy, pairwise_accuracy
from capjudge.stats.system import system_level, system_level_ci, system_means

__all__ = ["STATS", "ArrayLike", "Comparison", "Estimate", "ICCForm", "IsotonicMap",
           "PairwiseResult", "Stat", "anova_mean_squares", "best_of_n_accuracy", "bootstrap_ci",
           "bootstrap_rows", "calibrate", "complete_rows", "correlation_matrix", "holm", "icc",
           "isotonic_fit", "item_spread", "kendall_tau_b", "kendall_tau_c", "krippendorff_alpha",
           "length_bias", "linear_map", "mean_difference", "none_if_nan", "paired_comparison",
           "paired_difference", "paired_permutation_test", "pairwise_accuracy",
           "partial_correlation", "partial_spearman", "pearson", "pearson_fast",
           "percentile_interval", "retest", "spearman", "split_indices", "system_level",
           "system_level_ci", "system_means", "undefined_reason"]
