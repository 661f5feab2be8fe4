"""capjudge.stats against scipy, hand-computed cases and published worked examples.

One test file for the one statistics package: correlations, bootstrap CIs, paired
bootstrap/permutation, ICC and Krippendorff's alpha (Shrout & Fleiss 1979; Krippendorff 2011),
calibration, length bias, system-level statistics, pairwise accuracy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from capjudge.stats import (
    anova_mean_squares,
    best_of_n_accuracy,
    bootstrap_ci,
    calibrate,
    correlation_matrix,
    holm,
    icc,
    isotonic_fit,
    item_spread,
    kendall_tau_b,
    kendall_tau_c,
    krippendorff_alpha,
    length_bias,
    linear_map,
    mean_difference,
    paired_comparison,
    paired_permutation_test,
    pairwise_accuracy,
    partial_correlation,
    partial_spearman,
    pearson,
    pearson_fast,
    retest,
    spearman,
    split_indices,
    system_level,
    system_level_ci,
)


def test_correlations_match_scipy() -> None:
    rng = np.random.default_rng(1)
    human = rng.integers(1, 5, 200).astype(float)
    metric = human + rng.normal(0, 1.5, 200)
    assert kendall_tau_b(metric, human) == pytest.approx(
        stats.kendalltau(metric, human, variant="b").statistic)
    assert kendall_tau_c(metric, human) == pytest.approx(
        stats.kendalltau(metric, human, variant="c").statistic)
    assert pearson(metric, human) == pytest.approx(stats.pearsonr(metric, human).statistic)
    assert spearman(metric, human) == pytest.approx(stats.spearmanr(metric, human).statistic)


def test_kendall_tau_b_is_scipys_statistic_bit_for_bit() -> None:
    """The report's tau-b skips scipy's argument handling and p-value, not its arithmetic:
    equal to the last bit on ties, integers, lists, NaN, constants and tiny inputs."""
    import warnings

    rng = np.random.default_rng(7)
    cases: list[tuple[object, object]] = [([1, 2, 3, 4], [1, 3, 2, 4]), ([1.0, 2.0], [2.0, 1.0]),
                                          ([1, 1, 1], [1, 2, 3]), ([3, 1, 2], [3, 3, 3]),
                                          ([True, False, True], [1, 2, 3]),
                                          ([1.0, np.nan, 3.0], [1.0, 2.0, 3.0]), ([1], [1]),
                                          ([], [])]
    for n in (2, 3, 17, 138, 1000):
        human = rng.integers(1, 6, n)  # 1-5 ratings: many ties
        cases.append((human + rng.integers(-2, 3, n), human))
        cases.append((rng.normal(size=n), rng.normal(size=n).round(1)))
        cases.append((list(rng.integers(0, 3, n)), list(rng.integers(0, 3, n).astype(float))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy's small-sample warnings
        for x, y in cases:
            mine = kendall_tau_b(x, y)
            theirs = float(stats.kendalltau(x, y, variant="b").statistic)
            assert (np.isnan(mine) and np.isnan(theirs)) or mine == theirs, (x, y)
    with pytest.raises(ValueError):
        kendall_tau_b([1, 2, 3], [1, 2])


def test_kendall_hand_computed() -> None:
    # x = 1,2,3,4; y = 1,3,2,4: 5 concordant, 1 discordant pair -> tau = 4/6
    assert kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    # tau-c = 2(C-D)/(n^2 (m-1)/m), m = min(rows, cols) = 4 -> 2*4/(16*3/4) = 2/3
    assert kendall_tau_c([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(2 / 3)
    assert np.isnan(pearson([1, 1, 1], [1, 2, 3]))


def test_pairwise_accuracy_reports_ties_both_ways() -> None:
    res = pairwise_accuracy([3, 1, 2, 5], [1, 2, 2, 4], [True, True, False, False])
    # pair 1 right, pair 2 wrong, pair 3 tie, pair 4 wrong
    assert res.accuracy == pytest.approx(1 / 4)
    assert res.accuracy_ties_correct == pytest.approx(2 / 4)
    assert res.accuracy_ties_half == pytest.approx(1.5 / 4)
    assert res.ties == 1 and res.n == 4


def test_best_of_n_and_system_level_and_matrix() -> None:
    assert best_of_n_accuracy([[1, 3, 2], [5, 5, 1]], [[1, 2, 1], [4, 4, 1]]) == 1.0
    assert best_of_n_accuracy([[1, 3, 2], [5, 5, 1]], [[3, 2, 1], [4, 1, 1]]) == 0.0
    r, n = system_level([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 6, 5], ["a", "a", "b", "b", "c", "c"])
    assert n == 3 and r == pytest.approx(stats.pearsonr([1.5, 3.5, 5.5], [1.5, 3.5, 5.5])[0])
    m = correlation_matrix({"m": [1, 2, 3]}, {"h1": [1, 2, 3], "h2": [3, 2, 1]})
    assert m["m"]["h1"] == pytest.approx(1.0) and m["m"]["h2"] == pytest.approx(-1.0)


def test_bootstrap_ci_covers_the_estimate_and_clusters() -> None:
    rng = np.random.default_rng(0)
    human = rng.normal(size=300)
    metric = human + rng.normal(scale=1.0, size=300)
    lo, hi = bootstrap_ci(metric, human, pearson, n_boot=300)
    assert lo < pearson(metric, human) < hi and hi - lo < 0.3
    groups = np.repeat(np.arange(100), 3)
    glo, ghi = bootstrap_ci(metric, human, pearson, groups=groups, n_boot=300)
    assert glo < ghi


def test_paired_permutation_test() -> None:
    rng = np.random.default_rng(0)
    human = rng.normal(size=200)
    good = human + rng.normal(scale=0.3, size=200)
    bad = rng.normal(size=200)
    diff, p = paired_permutation_test(good, bad, human, n_perm=300)
    assert diff > 0.3 and p < 0.01
    diff, p = paired_permutation_test(good, good + 1e-9 * rng.normal(size=200), human,
                                      n_perm=300)
    assert p > 0.2


def test_pearson_fast_matches_scipy_and_its_edge_cases() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(3, 60))
        x, y = rng.integers(0, 10, n).astype(float), rng.normal(0, 1, n)
        assert pearson_fast(x, y) == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)
        assert pearson_fast(x, y) == pytest.approx(pearson(x, y), abs=1e-12)
    assert math.isnan(pearson_fast([1.0], [2.0]))  # fewer than two values
    assert math.isnan(pearson_fast([1, 1, 1], [1, 2, 3]))
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))
    assert pearson_fast([1, 2, 3], [3, 2, 1]) == -1.0  # clamped to [-1, 1]


NAN = math.nan

# Shrout & Fleiss (1979), Table 2: 6 targets rated by 4 judges.
SHROUT_FLEISS = np.array([[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6],
                          [10, 5, 6, 9], [6, 2, 4, 7]], float)

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", the worked example:
# 4 observers x 12 units with missing values (rows here are units).
KRIPPENDORFF = np.array([
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
]).T


# --------------------------------------------------------------------------------------------
# Test-retest


def test_icc_reproduces_shrout_and_fleiss() -> None:
    ms = anova_mean_squares(SHROUT_FLEISS)
    # Their Table 3: BMS 11.24, JMS 32.49, EMS 1.02, WMS 6.26.
    assert ms["bms"] == pytest.approx(11.24, abs=0.005)
    assert ms["jms"] == pytest.approx(32.49, abs=0.005)
    assert ms["ems"] == pytest.approx(1.02, abs=0.005)
    assert ms["wms"] == pytest.approx(6.26, abs=0.005)
    published = {"1,1": 0.17, "2,1": 0.29, "3,1": 0.71, "1,k": 0.44, "2,k": 0.62, "3,k": 0.91}
    for form, value in published.items():
        assert icc(SHROUT_FLEISS, form) == pytest.approx(value, abs=0.005), form  # type: ignore[arg-type]


def test_icc_hand_computed() -> None:
    # n = 3, k = 2: BMS = 4.5, JMS = 0, EMS = 0.5, WMS = 1/3.
    x = np.array([[1, 2], [3, 3], [5, 4]], float)
    assert icc(x, "2,1") == pytest.approx(4 / (5 - 1 / 3))  # = 6/7
    assert icc(x, "3,1") == pytest.approx(0.8)
    assert icc(x, "1,1") == pytest.approx(25 / 29)
    # A constant shift between repeats: consistency is perfect, absolute agreement is not;
    # ICC(2,1) = BMS / (BMS + k JMS / n) = 2 / (2 + 1) here.
    shifted = np.array([[1, 2], [2, 3], [3, 4]], float)
    assert icc(shifted, "3,1") == pytest.approx(1.0)
    assert icc(shifted, "2,1") == pytest.approx(2 / 3)
    # Items with a missing repeat are left out; too little data is NaN, not an error.
    assert icc(np.vstack([x, [[7, NAN]]]), "2,1") == pytest.approx(6 / 7)
    assert math.isnan(icc([[1, 2]], "2,1"))
    assert math.isnan(icc([[3, 3], [3, 3]], "2,1"))


def test_krippendorff_alpha_reproduces_the_worked_example() -> None:
    assert krippendorff_alpha(KRIPPENDORFF, "interval") == pytest.approx(0.849, abs=0.0005)
    assert krippendorff_alpha(KRIPPENDORFF, "nominal") == pytest.approx(0.743, abs=0.0005)


def test_krippendorff_alpha_hand_computed() -> None:
    assert krippendorff_alpha([[1, 1], [2, 2]]) == pytest.approx(1.0)
    # Values {1,2 | 2,1}: D_o = (2 + 2) / 4 = 1, D_e = 8 / 12; alpha = 1 - 1.5.
    assert krippendorff_alpha([[1, 2], [2, 1]]) == pytest.approx(-0.5)
    # A unit with one value is not pairable and changes nothing.
    assert krippendorff_alpha([[1, 2], [2, 1], [9, NAN]]) == pytest.approx(-0.5)
    assert math.isnan(krippendorff_alpha([[4, 4], [4, 4]]))  # no variation: undefined


def test_item_spread_and_retest_summary() -> None:
    spread = item_spread([[1, 3, NAN], [2, NAN, NAN]])
    assert spread[0] == {"repeats": 2, "mean": 2.0, "sd": pytest.approx(math.sqrt(2)),
                         "range": 2.0}
    assert spread[1] == {"repeats": 1, "mean": 2.0, "sd": None, "range": None}
    out = retest(SHROUT_FLEISS, n_boot=200, seed=3)
    assert out["icc2_1"].value == pytest.approx(icc(SHROUT_FLEISS, "2,1"))
    assert out["icc2_k"].value == pytest.approx(icc(SHROUT_FLEISS, "2,k"))
    assert out["alpha"].n == 6
    sds = SHROUT_FLEISS.std(axis=1, ddof=1)
    assert out["mean_sd"].value == pytest.approx(sds.mean())
    for est in out.values():
        assert est.low <= est.high
    assert out["mean_sd"].low <= out["mean_sd"].value <= out["mean_sd"].high
    assert retest(SHROUT_FLEISS, n_boot=200, seed=3) == out  # seeded: reproducible


def test_mean_difference_hand_computed() -> None:
    est = mean_difference([5, 7, 9], [4, 4, 4], n_boot=500, seed=0)
    assert est.value == pytest.approx(3.0) and est.n == 3
    assert 1.0 <= est.low <= 3.0 <= est.high <= 5.0  # resampled means of {1, 3, 5}
    one = mean_difference([10], [4], n_boot=100)
    assert one.value == 6 and math.isnan(one.low)  # one pair: no interval
    assert math.isnan(mean_difference([], []).value)


# --------------------------------------------------------------------------------------------
# Length bias


def test_partial_correlation_hand_computed() -> None:
    # r_xy = 0.6, r_xz = r_yz = 2/sqrt(5): (0.6 - 0.8) / (1 - 0.8) = -1. Within each level of
    # z, x and y go opposite ways.
    x, y, z = [1, 2, 3, 4], [2, 1, 4, 3], [1, 1, 2, 2]
    assert pearson(x, y) == pytest.approx(0.6)
    assert partial_correlation(x, y, z) == pytest.approx(-1.0)
    assert partial_spearman(x, y, z) == pytest.approx(-1.0)


def test_partial_correlation_equals_the_residual_correlation() -> None:
    rng = np.random.default_rng(1)
    z = rng.normal(size=50)
    x = z + rng.normal(size=50)
    y = 0.5 * z + 0.3 * x + rng.normal(size=50)
    design = np.column_stack([np.ones(50), z])
    rx = x - design @ np.linalg.lstsq(design, x, rcond=None)[0]
    ry = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
    assert partial_correlation(x, y, z) == pytest.approx(pearson(rx, ry))


def test_length_bias_finds_a_judge_that_likes_long_captions() -> None:
    rng = np.random.default_rng(0)
    human = rng.integers(1, 6, 120).astype(float)
    length = rng.integers(5, 60, 120).astype(float)
    fair = human * 20 + rng.normal(0, 5, 120)
    biased = human * 20 + length * 0.8 + rng.normal(0, 5, 120)
    fair_est = length_bias(fair, length, human, n_boot=300)["partial"]
    biased_est = length_bias(biased, length, human, n_boot=300)["partial"]
    assert fair_est.low < 0 < fair_est.high
    assert biased_est.low > 0.3


# --------------------------------------------------------------------------------------------
# Calibration


def test_isotonic_fit_hand_computed() -> None:
    mapping = isotonic_fit([1, 2, 3, 4], [1, 3, 2, 4])  # PAV pools (3, 2) into 2.5
    assert mapping.y == (1.0, 2.5, 2.5, 4.0)
    assert mapping([0, 2.5, 3.5, 10]).tolist() == [1.0, 2.5, 3.25, 4.0]
    tied = isotonic_fit([1, 1, 2], [1, 3, 0])  # x = 1: mean 2 (weight 2); then 0: pooled 4/3
    assert tied.x == (1.0, 2.0) and tied.y == pytest.approx((4 / 3, 4 / 3))
    assert linear_map([0, 50, 100], (0, 100), (1, 5)).tolist() == [1.0, 3.0, 5.0]


def test_split_is_seeded_disjoint_and_complete() -> None:
    fit, evaluate = split_indices(11, 0.5, seed=4)
    assert sorted([*fit, *evaluate]) == list(range(11)) and not set(fit) & set(evaluate)
    assert len(fit) == 6  # round(5.5) -> 6 (banker's rounding: 6 is even)
    again = split_indices(11, 0.5, seed=4)
    assert fit.tolist() == again[0].tolist()
    with pytest.raises(ValueError):
        split_indices(10, 1.0)


def test_calibration_improves_a_monotone_but_nonlinear_judge() -> None:
    rng = np.random.default_rng(2)
    score = rng.uniform(0, 100, 200)
    human = 1 + 4 * (score / 100) ** 3 + rng.normal(0, 0.1, 200)  # right order, wrong shape
    out = calibrate(score, human, seed=0, score_scale=(0, 100), n_boot=200)
    assert out["n_fit"] + out["n_eval"] == 200
    assert out["mae"]["after"].value < out["mae"]["before"].value / 2
    assert out["mae"]["after"].high < out["mae"]["before"].low  # the CIs do not overlap
    assert out["pearson"]["after"].value > out["pearson"]["before"].value
    with pytest.raises(ValueError):
        calibrate([1, 2, 3], [1, 2, 3])


# --------------------------------------------------------------------------------------------
# System level and comparing judges


def test_system_level_ci_matches_the_point_estimate() -> None:
    rng = np.random.default_rng(3)
    systems = [s for s in "abcd" for _ in range(15)]
    human = np.array([{"a": 4, "b": 3, "c": 2, "d": 1}[s] for s in systems], float)
    metric = human * 10 + rng.normal(0, 8, len(systems))
    est = system_level_ci(metric, human, systems, n_boot=300)
    value, n = system_level(metric.tolist(), human.tolist(), systems)
    assert est.value == pytest.approx(value) and est.n == n == 4
    assert est.low <= est.value <= est.high and est.low > 0.5
    two = system_level_ci([1, 2, 3, 4], [1, 2, 3, 4], ["a", "a", "b", "b"])
    assert math.isnan(two.value) and two.n == 2


def test_paired_comparison_tells_a_better_judge_apart() -> None:
    rng = np.random.default_rng(4)
    human = rng.integers(1, 6, 80).astype(float)
    good = human + rng.normal(0, 0.3, 80)
    poor = rng.normal(0, 1, 80)
    systems = [f"s{i % 4}" for i in range(80)]
    result = paired_comparison(good, poor, human, systems, n_boot=300, n_perm=300)
    assert result.difference.value == pytest.approx(result.a - result.b)
    assert result.difference.low > 0 and result.p_value < 0.01
    assert result.system_difference.n == 4
    _, p = paired_permutation_test(good, poor, human, n_perm=300)
    assert result.p_value == p  # the same test as `capjudge compare`
    same = paired_comparison(good, good, human, n_boot=100, n_perm=100)
    assert same.difference.value == 0 and same.difference.low == same.difference.high == 0
    assert same.p_value == 1.0


def test_holm_hand_computed() -> None:
    # Sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> running max.
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, NAN])[0] == 0.5 and math.isnan(holm([0.5, NAN])[1])
    assert holm([0.6, 0.7]) == [1.0, 1.0]
