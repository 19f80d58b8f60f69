"""The scene bootstrap resamples whole clusters: checked against an enumerable case."""
import math

import numpy as np
import pytest

from scoring.analysis.correlation import cluster_bootstrap_estimate


def mean_x(x, y):
    return float(np.mean(x))


def test_two_clusters_give_the_enumerated_interval():
    # clusters A = items {1, 2}, B = item {3}; a draw is AA, AB, BA or BB (each 1/4):
    # mean x = 1.5 (AA), 2.0 (AB, BA: items 1, 2, 3), 3.0 (BB).  The 2.5th and 97.5th
    # percentiles of that distribution are 1.5 and 3.0; the point estimate is 2.0.
    x = np.array([1.0, 2.0, 3.0])
    est = cluster_bootstrap_estimate(x, x, ["A", "A", "B"], statistic=mean_x, n_boot=2000, seed=1)
    assert (est.value, est.low, est.high, est.n) == (2.0, 1.5, 3.0, 2)
    # Split into three one-item clusters, a draw of item 1 three times (p = 1/27 > 2.5 %) gives 1.0.
    items = cluster_bootstrap_estimate(x, x, ["A", "B", "C"], statistic=mean_x, n_boot=2000, seed=1)
    assert items.low == 1.0 and items.n == 3


def test_one_cluster_has_no_interval_and_mismatched_lengths_are_refused():
    est = cluster_bootstrap_estimate([1.0, 2.0], [1.0, 2.0], ["a", "a"], statistic=mean_x)
    assert est.n == 1 and math.isnan(est.low) and math.isnan(est.high)
    with pytest.raises(ValueError, match="clusters has 1 entries for 2 items"):
        cluster_bootstrap_estimate([1.0, 2.0], [1.0, 2.0], ["a"])


# Written after mutation testing (benchmarks/mutation.py): values that surviving mutants changed.

def test_defaults_seed_and_the_coefficient_of_x_against_y():
    from scoring.analysis.correlation import kendall_tau

    rng = np.random.default_rng(2)
    x = rng.normal(size=40)
    y = x + rng.normal(0, 1.0, 40)
    clusters = np.repeat(np.arange(10), 4)
    est = cluster_bootstrap_estimate(x, y, clusters)
    assert est.value == pytest.approx(kendall_tau(x, y, "c")) and est.n == 10  # kendall_c of x against y
    assert est == cluster_bootstrap_estimate(x, y, clusters, "kendall_c", n_boot=1000, seed=0, confidence=0.95)
    assert est.low != cluster_bootstrap_estimate(x, y, clusters, seed=1).low
    assert est.low < est.value < est.high


def test_one_cluster_keeps_its_point_and_one_resample_gives_a_zero_width_interval():
    one = cluster_bootstrap_estimate([1.0, 2.0], [1.0, 2.0], ["a", "a"], statistic=mean_x)
    assert one.value == 1.5 and one.n == 1
    single = cluster_bootstrap_estimate([1.0, 2.0, 3.0], [0.0] * 3, ["a", "b", "c"], statistic=mean_x, n_boot=1)
    assert single.value == 2.0 and single.low == single.high and single.n == 3


def test_resamples_that_are_all_nan_leave_the_point_without_an_interval():
    calls = []

    def first_call_only(x, y):  # the point estimate is a number, every resample NaN
        calls.append(1)
        return 1.0 if len(calls) == 1 else math.nan

    est = cluster_bootstrap_estimate([1.0, 2.0, 3.0], [0.0] * 3, ["a", "b", "c"], statistic=first_call_only,
                                     n_boot=50)
    assert est.value == 1.0 and math.isnan(est.low) and math.isnan(est.high) and est.n == 3
    assert len(calls) == 51


def test_singleton_clusters_give_the_normal_approximation_of_the_mean():
    """400 one-item clusters: the cluster bootstrap of the mean is the item bootstrap, whose
    95 % interval is close to mean +- 1.96 s / sqrt(n): width within 6 %, about symmetric."""
    x = np.random.default_rng(4).normal(2.0, 3.0, 400)
    est = cluster_bootstrap_estimate(x, x, np.arange(400), statistic=mean_x, n_boot=2000, seed=1)
    half = 1.959964 * x.std() / math.sqrt(x.size)
    assert est.high - est.low == pytest.approx(2 * half, rel=0.06)
    assert est.high - est.value == pytest.approx(est.value - est.low, rel=0.15)


@pytest.mark.parametrize("with_nan", [False, True])
def test_every_coefficient_at_once_equals_each_one_resampled_alone(with_nan):
    """`cluster_bootstrap_estimates` (Pearson and Spearman as weighted sums over all resamples,
    Kendall from dense ranks) gives each coefficient the interval `cluster_bootstrap_estimate`
    gives it alone on the same resamples, with ties in both columns and a cluster drawn twice."""
    from scoring.analysis.correlation import cluster_bootstrap_estimates

    rng = np.random.default_rng(5)
    clusters = rng.integers(0, 40, 150).astype(str)
    x = np.round(rng.random(150), 1)
    y = np.round(x + rng.normal(scale=0.3, size=150), 1)
    if with_nan:
        x[3] = np.nan
    names = ["pearson", "spearman", "kendall_b", "kendall_c"]
    together = cluster_bootstrap_estimates(x, y, clusters, names, n_boot=250, seed=2)
    for name in names:
        alone = cluster_bootstrap_estimate(x, y, clusters, name, n_boot=250, seed=2)
        assert together[name].value == pytest.approx(alone.value, nan_ok=True)
        assert (together[name].low, together[name].high) == pytest.approx((alone.low, alone.high), abs=1e-12, nan_ok=True)
        assert together[name].n == 150


def test_a_correlation_table_with_a_cluster_column_resamples_whole_images():
    """Rows of one image (one caption rated three times) are not independent: with `cluster_col`
    the table's interval is the image bootstrap's and wider than the row bootstrap's."""
    import pandas as pd

    from scoring.analysis.correlation import cluster_bootstrap_estimates, correlation_table

    rng = np.random.default_rng(8)
    score = rng.random(80)
    table = pd.DataFrame({"image_id": np.repeat(np.arange(80), 3).astype(str), "m": np.repeat(score, 3),
                          "human": np.round(np.repeat(score, 3) + rng.normal(scale=0.4, size=240), 1)})
    rows = correlation_table(table, ["m"], coefficients=["kendall_c"], n_boot=300).iloc[0]
    images = correlation_table(table, ["m"], coefficients=["kendall_c"], n_boot=300, cluster_col="image_id").iloc[0]
    expected = cluster_bootstrap_estimates(table["m"], table["human"], table["image_id"], ["kendall_c"], n_boot=300)
    assert (images["kendall_c_low"], images["kendall_c_high"]) == pytest.approx(
        (expected["kendall_c"].low, expected["kendall_c"].high))
    assert images["kendall_c"] == rows["kendall_c"] and images["n"] == rows["n"] == 240
    assert images["kendall_c_high"] - images["kendall_c_low"] > 1.1 * (rows["kendall_c_high"] - rows["kendall_c_low"])
