"""Kendall tau-b/c, Pearson, Spearman against scipy, bootstrap intervals and paired tests."""
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from scoring.analysis.correlation import (
    average_ranks, bootstrap_estimate, compare_metrics, correlation_table, kendall_tau,
    paired_bootstrap_test, pearson, spearman, system_level_correlation, williams_test,
)


def _same(ours, reference):
    if math.isnan(reference):
        return math.isnan(ours)
    return ours == pytest.approx(reference, abs=1e-12)


tied_lists = st.integers(min_value=2, max_value=60).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 4), min_size=n, max_size=n),  # a coarse human scale: many ties
        st.lists(st.one_of(st.integers(0, 6), st.floats(-3, 3, allow_nan=False)), min_size=n, max_size=n),
    )
)


@settings(max_examples=300, deadline=None)
@given(tied_lists)
def test_kendall_b_and_c_match_scipy_with_ties(pair):
    x, y = (np.asarray(v, dtype=float) for v in pair)
    for variant in ("b", "c"):
        assert _same(kendall_tau(x, y, variant), stats.kendalltau(x, y, variant=variant)[0])


def test_kendall_on_a_known_small_example():
    # x ties (1,1); y ties (2,2): pairs (0,1) tie x, (2,3) tie y; C=4, D=0 of the other 4
    x = [1, 1, 2, 3]
    y = [1, 2, 3, 3]
    assert kendall_tau(x, y, "b") == pytest.approx(4 / math.sqrt(5 * 5))
    assert kendall_tau(x, y, "c") == pytest.approx(2 * 4 / (16 * (3 - 1) / 3))


def test_kendall_large_input_matches_scipy():
    rng = np.random.default_rng(3)
    human = rng.integers(1, 5, 5000).astype(float)
    metric = np.round(human + rng.normal(0, 1.5, 5000), 1)
    for variant in ("b", "c"):
        assert kendall_tau(metric, human, variant) == pytest.approx(stats.kendalltau(metric, human, variant=variant)[0], abs=1e-12)


def test_kendall_undefined_cases_are_nan():
    assert math.isnan(kendall_tau([1], [2]))
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3], "b"))
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3], "c"))
    with pytest.raises(ValueError, match="variant"):
        kendall_tau([1, 2], [1, 2], "a")
    with pytest.raises(ValueError, match="length"):
        kendall_tau([1, 2], [1, 2, 3])


@settings(max_examples=100, deadline=None)
@given(tied_lists)
def test_pearson_and_spearman_match_scipy(pair):
    x, y = (np.asarray(v, dtype=float) for v in pair)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        assert math.isnan(pearson(x, y)) and math.isnan(spearman(x, y))
        return
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-9)
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-9)


def test_average_ranks_share_ties():
    assert average_ranks([10, 20, 20, 5]).tolist() == [2.0, 3.5, 3.5, 1.0]


def test_bootstrap_is_seeded_and_brackets_the_value():
    rng = np.random.default_rng(0)
    human = rng.integers(1, 5, 300).astype(float)
    metric = human + rng.normal(0, 1, 300)
    first = bootstrap_estimate(metric, human, "kendall_c", n_boot=300, seed=7)
    again = bootstrap_estimate(metric, human, "kendall_c", n_boot=300, seed=7)
    other = bootstrap_estimate(metric, human, "kendall_c", n_boot=300, seed=8)
    assert first == again
    assert first.low != other.low
    assert first.low < first.value < first.high
    assert first.high - first.low < 0.2


def test_paired_bootstrap_tells_a_better_metric_apart():
    rng = np.random.default_rng(1)
    human = rng.integers(1, 5, 400).astype(float)
    good = human + rng.normal(0, 0.5, 400)
    poor = human + rng.normal(0, 3.0, 400)
    result = paired_bootstrap_test(human, good, poor, "kendall_b", n_boot=400, seed=0)
    assert result.difference > 0.2
    assert result.low > 0
    assert result.p_value < 0.01
    same = paired_bootstrap_test(human, good, good, "kendall_b", n_boot=100, seed=0)
    assert same.difference == 0 and same.p_value == 1.0


def _with_exact_correlations(r12: float, r13: float, r23: float, n: int, seed: int = 0):
    """Three columns of n values whose sample Pearson correlations are exactly r12, r13, r23:
    random data whitened to an identity sample covariance, then coloured by the target matrix."""
    target = np.array([[1.0, r12, r13], [r12, 1.0, r23], [r13, r23, 1.0]])
    data = np.random.default_rng(seed).normal(size=(n, 3))
    data -= data.mean(axis=0)
    data = data @ np.linalg.inv(np.linalg.cholesky(np.cov(data, rowvar=False))).T
    data = data @ np.linalg.cholesky(target).T
    assert np.corrcoef(data, rowvar=False) == pytest.approx(target, abs=1e-12)
    return data[:, 0], data[:, 1], data[:, 2]


def test_williams_test_reproduces_a_published_worked_example():
    """bruceR's `cor_diff` documentation (psychbruce.github.io/bruceR/reference/cor_diff.html)
    compares r(X,Y) = 0.20 with r(X,Z) = 0.45 where r(Y,Z) = 0.80 and N = 100, and prints
    "t(97) = -4.56, p = 1e-05" for the Williams (Steiger 1980) test. By hand: |R| = 0.2615,
    t = -0.25 sqrt(99 x 1.8) / sqrt(2 x 0.2615 x 99/97 + 0.325^2 x 0.2^3) = -4.564."""
    human, a, b = _with_exact_correlations(0.20, 0.45, 0.80, 100)
    result = williams_test(human, a, b)
    assert result.value_a == pytest.approx(0.20) and result.value_b == pytest.approx(0.45) and result.n == 100
    assert result.difference == pytest.approx(-0.25)
    t_from_p = stats.t.isf(result.p_value / 2, 97)  # the two-sided p read back as |t| on 97 df
    assert t_from_p == pytest.approx(4.564, abs=0.001)
    assert round(result.p_value, 5) == 1e-05


def test_williams_test_with_a_negative_r23_its_fields_and_its_smallest_size():
    """r12 = 0.5, r13 = 0.3, r23 = -0.4, n = 30, by hand: |R| = 1 - 0.25 - 0.09 - 0.16 + 2(0.5)(0.3)(-0.4)
    = 0.38 (checked with numpy's determinant below), mean r = 0.4, (1 - r23)^3 = 2.744, so
    t = 0.2 sqrt(29 x 0.6) / sqrt(2 x 0.38 x 29/27 + 0.16 x 2.744) = 0.834266 / 1.120418 = 0.74460.
    (1 - r23)^3 is large here, so the (r12 + r13)^2/4 term weighs on t (a mutant of the published
    example, where it is 0.008, moves t by less than 0.001.)"""
    target = np.array([[1.0, 0.5, 0.3], [0.5, 1.0, -0.4], [0.3, -0.4, 1.0]])
    assert np.linalg.det(target) == pytest.approx(0.38)
    human, a, b = _with_exact_correlations(0.5, 0.3, -0.4, 30)
    result = williams_test(human, a, b)
    assert stats.t.isf(result.p_value / 2, 27) == pytest.approx(0.74460, abs=1e-4)
    assert (result.coefficient, result.test, result.n) == ("pearson", "Williams t-test", 30)
    assert math.isnan(result.low) and math.isnan(result.high)
    smallest = williams_test(*_with_exact_correlations(0.5, 0.3, -0.4, 4))  # 4 items: df = 1
    assert smallest.n == 4 and 0 < smallest.p_value < 1
    with pytest.raises(ValueError, match="Williams' test needs at least 4 items"):
        williams_test([1.0, 2.0, 3.0], [1.0, 3.0, 2.0], [2.0, 1.0, 3.0])


def test_system_level_correlation_defaults_to_every_metric_column_in_sorted_groups():
    table = pd.DataFrame({
        "lang": ["en"] * 6 + ["de"] * 6,
        "system": ["s1", "s1", "s2", "s2", "s3", "s3"] * 2,
        "human": [1.0, 3.0, 2.0, 4.0, 5.0, 7.0] * 2,  # system means 2, 3, 6
        "A": [0.0, 0.2, 0.3, 0.3, 0.5, 0.7] * 2,      # system means 0.1, 0.3, 0.6
    })
    result = system_level_correlation(table, group_by=["lang"])
    assert result["lang"].tolist() == ["de", "en"] and result["metric"].tolist() == ["A", "A"]
    assert result["systems"].tolist() == [3, 3]
    # Pearson of (0.1, 0.3, 0.6) with (2, 3, 6) by hand: deviations (-0.2333, -0.0333, 0.2667) and
    # (-1.6667, -0.6667, 2.3333): 1.03333 / sqrt(0.126667 x 8.66667) = 0.98624
    assert result["pearson"].tolist() == pytest.approx([0.98624, 0.98624], abs=1e-5)


def test_williams_test_is_antisymmetric_and_finds_a_clear_difference():
    rng = np.random.default_rng(2)
    human = rng.normal(size=200)
    a = human + rng.normal(0, 0.7, 200)
    b = human + rng.normal(0, 1.5, 200)
    result = williams_test(human, a, b)
    assert result.p_value < 0.001
    swapped = williams_test(human, b, a)
    assert swapped.difference == pytest.approx(-result.difference)
    assert swapped.p_value == pytest.approx(result.p_value)
    same = williams_test(human, a, a.copy())
    assert same.difference == 0


def test_correlation_table_groups_and_skips_missing_scores():
    table = pd.DataFrame({
        "lang": ["en"] * 4 + ["de"] * 4,
        "human": [1, 2, 3, 4, 1, 2, 3, 4],
        "CLIP-S": [0.1, 0.2, 0.3, 0.4, 0.4, 0.3, 0.2, 0.1],
        "BLEU-4": [0.1, None, 0.3, 0.2, 0.1, 0.2, 0.3, 0.4],
    })
    result = correlation_table(table, group_by=["lang"], n_boot=50)
    assert set(result["metric"]) == {"CLIP-S", "BLEU-4"}
    row = result.set_index(["lang", "metric"])
    assert row.loc[("en", "CLIP-S"), "kendall_b"] == pytest.approx(1.0)
    assert row.loc[("de", "CLIP-S"), "kendall_b"] == pytest.approx(-1.0)
    assert row.loc[("en", "BLEU-4"), "n"] == 3
    assert {"kendall_c_low", "kendall_c_high", "pearson", "spearman"} <= set(result.columns)
    with pytest.raises(ValueError, match="missing column"):
        correlation_table(table, ["nope"])


def test_compare_metrics_and_system_level():
    rng = np.random.default_rng(4)
    table = pd.DataFrame({"human": rng.integers(1, 5, 120).astype(float)})
    table["A"] = table["human"] + rng.normal(0, 0.5, 120)
    table["B"] = rng.normal(size=120)
    table["system"] = np.repeat(["s1", "s2", "s3", "s4"], 30)
    assert compare_metrics(table, "A", "B", n_boot=200).p_value < 0.05
    assert compare_metrics(table, "A", "B", coefficient_name="pearson", test="williams").test == "Williams t-test"
    with pytest.raises(ValueError, match="Pearson"):
        compare_metrics(table, "A", "B", test="williams")
    system = system_level_correlation(table, ["A", "B"])
    assert system.set_index("metric").loc["A", "systems"] == 4


def test_both_inversion_counters_agree_with_brute_force():
    from scoring.analysis.correlation import _count_inversions, _count_inversions_few_values

    rng = np.random.default_rng(5)
    for n, k in ((1, 1), (2, 2), (7, 3), (50, 5), (300, 40)):
        values = rng.integers(0, k, n)
        brute = sum(int(values[i] > values[j]) for i in range(n) for j in range(i + 1, n))
        assert _count_inversions(values) == brute
        assert _count_inversions_few_values(values, k) == brute


def test_kendall_with_many_distinct_values_on_both_sides():
    rng = np.random.default_rng(6)
    x = np.round(rng.normal(size=3000), 2)  # hundreds of distinct values, with ties
    y = np.round(x + rng.normal(size=3000), 2)
    for variant in ("b", "c"):
        assert kendall_tau(x, y, variant) == pytest.approx(stats.kendalltau(x, y, variant=variant)[0], abs=1e-12)


def test_system_level_per_group():
    table = pd.DataFrame({
        "lang": ["en"] * 6 + ["de"] * 6,
        "system": ["a", "a", "b", "b", "c", "c"] * 2,
        "human": [1, 1, 2, 2, 3, 3] * 2,
        "M": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6] + [0.6, 0.5, 0.4, 0.3, 0.2, 0.1],
    })
    result = system_level_correlation(table, ["M"], group_by=["lang"]).set_index("lang")
    assert result.loc["en", "kendall_b"] == pytest.approx(1.0)
    assert result.loc["de", "kendall_b"] == pytest.approx(-1.0)
    assert result.loc["en", "systems"] == 3


def test_mean_estimate_interval_does_not_depend_on_how_resamples_are_chunked(monkeypatch):
    import scoring.analysis.correlation as correlation

    values = np.random.default_rng(3).normal(5.0, 1.0, 2000)
    values[::100] = np.nan  # dropped, not counted
    whole = correlation.mean_estimate(values, n_boot=500)
    assert whole.n == 1980 and whole.value == pytest.approx(np.nanmean(values), abs=1e-12)
    # The percentile interval of a mean is about ±1.96 standard errors wide.
    assert whole.high - whole.low == pytest.approx(2 * 1.96 / np.sqrt(1980), rel=0.2)
    assert whole.low < whole.value < whole.high
    monkeypatch.setattr(correlation, "BOOTSTRAP_CELLS", 1980 * 7)  # 7 resamples at a time
    assert correlation.mean_estimate(values, n_boot=500) == whole
    assert math.isnan(correlation.mean_estimate([1.0], n_boot=500).low)


# Written after mutation testing (benchmarks/mutation.py): values that surviving mutants changed.

def test_inversion_counter_on_short_reversed_runs():
    from scoring.analysis.correlation import _count_inversions

    # every pair of a strictly decreasing run is an inversion: n (n - 1) / 2
    for n in (2, 3, 4, 5, 8, 9):
        assert _count_inversions(np.arange(n)[::-1].copy()) == n * (n - 1) // 2
    assert _count_inversions(np.array([0, 1])) == 0 and _count_inversions(np.array([1, 0])) == 1
    assert kendall_tau([1, 2], [2, 1], "b") == -1.0


def test_mean_estimate_edge_cases():
    from scoring.analysis.correlation import mean_estimate

    empty = mean_estimate([float("nan")])
    assert math.isnan(empty.value) and math.isnan(empty.low) and math.isnan(empty.high) and empty.n == 0
    one = mean_estimate([0.3, float("nan")])
    assert one.value == 0.3 and math.isnan(one.low) and math.isnan(one.high) and one.n == 1
    no_resamples = mean_estimate([0.0, 1.0], n_boot=0)
    assert no_resamples.value == 0.5 and math.isnan(no_resamples.low) and math.isnan(no_resamples.high)
    assert no_resamples.n == 2
    two = mean_estimate([0.0, 1.0], n_boot=200)  # two values are enough for an interval
    assert two.low == 0.0 and two.high == 1.0 and two.n == 2  # resamples (0,0) and (1,1) both occur
    single_resample = mean_estimate([0.0, 1.0, 2.0], n_boot=1)
    assert single_resample.low == single_resample.high  # one resample mean: a zero-width interval
    # a call without options is the documented 1000 resamples with seed 0
    values = np.random.default_rng(8).normal(size=50)
    assert mean_estimate(values) == mean_estimate(values, n_boot=1000, seed=0)


def test_mean_estimate_interval_matches_the_normal_approximation():
    """For the mean of 400 values the percentile-bootstrap 95 % interval is close to
    mean +- 1.96 s / sqrt(n) (s with ddof 0, as the bootstrap resamples the sample itself):
    width within 5 %, and about symmetric around the mean."""
    from scoring.analysis.correlation import mean_estimate

    x = np.random.default_rng(4).normal(2.0, 3.0, 400)
    estimate = mean_estimate(x, n_boot=4000, seed=1)
    half = 1.959964 * x.std() / math.sqrt(x.size)
    assert estimate.value == pytest.approx(x.mean())
    assert estimate.high - estimate.low == pytest.approx(2 * half, rel=0.05)
    assert estimate.high - estimate.value == pytest.approx(estimate.value - estimate.low, rel=0.1)
    # 90 %: z = 1.644854
    narrower = mean_estimate(x, n_boot=4000, seed=1, confidence=0.90)
    assert narrower.high - narrower.low == pytest.approx(2 * 1.644854 * x.std() / math.sqrt(x.size), rel=0.05)


def test_mean_estimate_resamples_every_item_including_the_first():
    from scoring.analysis.correlation import mean_estimate

    # one outlier first: resamples that draw it have a mean of at least 100 / 20 = 5
    estimate = mean_estimate([100.0] + [0.0] * 19, n_boot=500, seed=0)
    assert estimate.value == 5.0 and estimate.low == 0.0 and estimate.high >= 10.0


def test_compare_metrics_coerces_text_drops_rows_and_is_seeded():
    rng = np.random.default_rng(11)
    human = rng.normal(size=60)
    table = pd.DataFrame({"human": human, "A": human + rng.normal(0, 0.5, 60),
                          "B": (human + rng.normal(0, 2.0, 60)).astype(object)})
    table.loc[3, "B"] = "n/a"  # a cell that is not a number: that item is left out, not an error
    result = compare_metrics(table, "A", "B", n_boot=300)
    assert result.n == 59 and result.coefficient == "kendall_c"
    assert result == compare_metrics(table, "A", "B", n_boot=300)  # seeded: the same call, the same interval
    assert compare_metrics(table, "A", "B", n_boot=300, coefficient_name="pearson").coefficient == "pearson"
    default = compare_metrics(table, "A", "B")
    assert default == compare_metrics(table, "A", "B", n_boot=1000, seed=0, coefficient_name="kendall_c")
    assert default.low != compare_metrics(table, "A", "B", seed=1).low  # the seed decides the resamples
    with pytest.raises(ValueError, match=r"^test must be 'bootstrap' or 'williams', got 'ttest'$"):
        compare_metrics(table, "A", "B", test="ttest")
    with pytest.raises(ValueError, match=r"^Williams' test compares Pearson correlations; use coefficient 'pearson'$"):
        compare_metrics(table, "A", "B", test="williams")


def test_system_level_correlation_correlates_the_per_system_means():
    # systems a, b, c; metric means 0.2, 0.5, 0.4; human means 1.5, 3.5, 3.0 (NaN rows dropped)
    table = pd.DataFrame({
        "system": ["a", "a", "b", "b", "c", "c", "c"],
        "M": [0.1, 0.3, 0.4, 0.6, 0.4, None, 0.4],
        "human": [1.0, 2.0, 3.0, 4.0, 3.0, 9.0, 3.0],
    })
    row = system_level_correlation(table, ["M"]).iloc[0]
    assert row["systems"] == 3
    means_m, means_h = [0.2, 0.5, 0.4], [1.5, 3.5, 3.0]
    assert row["pearson"] == pytest.approx(stats.pearsonr(means_m, means_h)[0])
    assert row["spearman"] == pytest.approx(1.0) and row["kendall_b"] == pytest.approx(1.0)


@pytest.mark.parametrize("human_levels", [5, 90])  # a rating scale; a mean of ratings with many values
def test_every_bootstrap_resample_equals_scipy_on_that_resample(human_levels):
    """The bootstrap computes its resamples from the full sample's dense ranks (codes with gaps),
    Pearson and Spearman for all resamples at once: each resample's value still equals scipy's
    on the resampled lists, ties, gaps and constant resamples included."""
    from scoring.analysis.correlation import _bootstrap_indices, _bootstrap_samples

    rng = np.random.default_rng(3)
    x = np.round(rng.normal(size=40), 1)  # ties in the metric
    y = rng.integers(0, human_levels, size=40) / (human_levels - 1)
    index = np.vstack([_bootstrap_indices(40, 30, 5), np.zeros((1, 40), dtype=int)])  # the last: constant
    samples = _bootstrap_samples(x, y, ["kendall_b", "kendall_c", "pearson", "spearman"], index)
    for row, i in enumerate(index[:-1]):
        a, b = x[i], y[i]
        assert samples["kendall_b"][row] == pytest.approx(stats.kendalltau(a, b, variant="b").statistic, abs=1e-12)
        assert samples["kendall_c"][row] == pytest.approx(stats.kendalltau(a, b, variant="c").statistic, abs=1e-12)
        assert samples["pearson"][row] == pytest.approx(stats.pearsonr(a, b).statistic, abs=1e-12)
        assert samples["spearman"][row] == pytest.approx(stats.spearmanr(a, b).statistic, abs=1e-12)
    assert all(math.isnan(samples[name][-1]) for name in samples)
