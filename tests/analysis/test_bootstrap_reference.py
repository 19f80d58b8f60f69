"""Bootstrap intervals and paired tests against a from-scratch reference: scipy's coefficient on
each resample of the documented resampling (numpy's `default_rng(seed).integers(0, n, (n_boot,
n))`), replicates that are undefined dropped, numpy percentiles at (1 - confidence) / 2 from
each end. The defaults (1,000 resamples, seed 0, 95 %) are checked by calling without them."""
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from scoring.analysis.correlation import (
    average_ranks, bootstrap_estimate, bootstrap_estimates, cluster_bootstrap, correlation_table, mean_estimate,
    paired_bootstrap_test, pearson, spearman, system_level_correlation,
)

NAMES = ("kendall_b", "kendall_c", "pearson", "spearman")


def scipy_coefficient(name, a, b) -> float:
    with warnings.catch_warnings():  # a constant resample: scipy warns and answers nan
        warnings.simplefilter("ignore")
        if name == "pearson":
            return float(stats.pearsonr(a, b).statistic)
        if name == "spearman":
            return float(stats.spearmanr(a, b).statistic)
        return float(stats.kendalltau(a, b, variant=name[-1]).statistic)


def resamples(n, n_boot=1000, seed=0):
    return np.random.default_rng(seed).integers(0, n, size=(n_boot, n))


def interval(values, confidence=0.95):
    values = np.asarray([v for v in values if not math.isnan(v)])
    tail = (1 - confidence) / 2 * 100
    return tuple(np.percentile(values, [tail, 100 - tail]))


def close(ours, reference):
    if math.isnan(reference):
        return math.isnan(ours)
    return ours == pytest.approx(reference, abs=1e-12)


@pytest.fixture
def scores():
    rng = np.random.default_rng(11)
    human = rng.integers(1, 6, 25).astype(float)  # a five-level scale: ties
    metric = np.round(human / 5 + rng.normal(0, 0.3, 25), 1)  # ties in the metric too
    return metric, human


def test_defaults_equal_a_scipy_bootstrap_of_every_coefficient(scores):
    x, y = scores
    got = bootstrap_estimates(x, y)
    index = resamples(x.size)
    for name in NAMES:
        low, high = interval([scipy_coefficient(name, x[i], y[i]) for i in index])
        estimate = got[name]
        assert close(estimate.value, scipy_coefficient(name, x, y)), name
        assert close(estimate.low, low) and close(estimate.high, high), name
        assert estimate.n == 25
    assert bootstrap_estimate(x, y) == got["kendall_c"]  # the single-coefficient form: tau-c by default


def test_settings_reach_the_interval(scores):
    x, y = scores
    index = resamples(x.size, 40, 9)
    low, high = interval([scipy_coefficient("pearson", x[i], y[i]) for i in index], 0.8)
    for estimate in (bootstrap_estimates(x, y, ["pearson"], n_boot=40, seed=9, confidence=0.8)["pearson"],
                     bootstrap_estimate(x, y, "pearson", n_boot=40, seed=9, confidence=0.8)):
        assert close(estimate.low, low) and close(estimate.high, high)


def test_a_missing_score_makes_its_resamples_undefined(scores):
    x, y = scores
    x = x.copy()
    x[3] = np.nan
    got = bootstrap_estimates(x, y, NAMES, n_boot=60, seed=2)
    index = resamples(x.size, 60, 2)
    for name in NAMES:
        kept = [scipy_coefficient(name, x[i], y[i]) for i in index]  # scipy: nan in, nan out
        assert sum(not math.isnan(v) for v in kept) > 5  # resamples without item 3 still count
        low, high = interval(kept)
        assert math.isnan(got[name].value)
        assert close(got[name].low, low) and close(got[name].high, high), name
    assert math.isnan(spearman([1, np.nan, 3, 4], [1, 2, 3, 5]))  # not 0.4: ranking put nan on top


def test_intervals_where_a_bootstrap_cannot_run_or_says_nothing(scores):
    x, y = scores
    for estimate in bootstrap_estimates(x, y, n_boot=0).values():
        assert math.isnan(estimate.low) and math.isnan(estimate.high) and estimate.n == 25
    assert bootstrap_estimates(x, y, ["pearson"], n_boot=0)["pearson"].value == pytest.approx(pearson(x, y))
    one = bootstrap_estimate([1.0], [2.0], "pearson")
    assert math.isnan(one.value) and math.isnan(one.low) and math.isnan(one.high) and one.n == 1
    # Two items: a resample is the pair itself (r = 1) or one item twice (undefined, dropped).
    two = bootstrap_estimate([0.1, 0.7], [1.0, 2.0], "pearson")
    assert (two.low, two.high, two.n) == (1.0, 1.0, 2)
    # One resample: its value is both ends of the interval.
    seed = next(s for s in range(50) if len(set(resamples(25, 1, s)[0])) > 2)
    single = bootstrap_estimate(x, y, "spearman", n_boot=1, seed=seed)
    expected = scipy_coefficient("spearman", x[resamples(25, 1, seed)[0]], y[resamples(25, 1, seed)[0]])
    assert close(single.low, expected) and close(single.high, expected)
    # A constant metric: every resample undefined.
    flat = bootstrap_estimate(np.ones(25), y, "kendall_b")
    assert math.isnan(flat.low) and math.isnan(flat.high) and flat.n == 25


def test_paired_test_defaults_equal_a_scipy_paired_bootstrap(scores):
    metric_a, human = scores
    metric_b = np.round(metric_a + np.random.default_rng(4).normal(0, 0.4, 25), 1)
    got = paired_bootstrap_test(human, metric_a, metric_b)
    differences = np.array([scipy_coefficient("kendall_c", metric_a[i], human[i])
                            - scipy_coefficient("kendall_c", metric_b[i], human[i]) for i in resamples(25)])
    differences = differences[~np.isnan(differences)]
    low, high = interval(differences)
    p_value = min(1.0, 2 * min((differences <= 0).mean(), (differences >= 0).mean()))
    assert (got.coefficient, got.test, got.n) == ("kendall_c", "paired bootstrap", 25)
    assert close(got.value_a, scipy_coefficient("kendall_c", metric_a, human))
    assert close(got.value_b, scipy_coefficient("kendall_c", metric_b, human))
    assert close(got.difference, got.value_a - got.value_b)
    assert close(got.low, low) and close(got.high, high) and close(got.p_value, p_value)
    assert 0 < got.p_value < 1
    undefined = paired_bootstrap_test(np.ones(25), metric_a, metric_b)  # a constant human score
    assert math.isnan(undefined.low) and math.isnan(undefined.high) and math.isnan(undefined.p_value)


def test_cluster_and_mean_defaults_equal_their_bootstraps():
    rng = np.random.default_rng(5)
    values = rng.normal(size=30)
    clusters = np.repeat(np.arange(10), 3)
    got = cluster_bootstrap(lambda index: float(values[index].mean()), clusters)
    members = [np.flatnonzero(clusters == c) for c in range(10)]
    low, high = interval([values[np.concatenate([members[c] for c in draw])].mean() for draw in resamples(10)])
    assert close(got.value, values.mean()) and close(got.low, low) and close(got.high, high) and got.n == 10
    mean = mean_estimate(values)
    low, high = interval(values[resamples(30)].mean(axis=1))
    assert close(mean.value, values.mean()) and close(mean.low, low) and close(mean.high, high) and mean.n == 30


def test_correlation_table_settings_columns_and_groups():
    table = pd.DataFrame({
        "rating": [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 2, 4],
        "A": [0.1, 0.3, 0.2, 0.6, 0.9, 0.2, 0.1, 0.5, 0.4, 0.8, "n/a", 0.7],  # text: coerced, dropped
        "lang": ["fr", "fr", "fr", "fr", "fr", "en", "en", "en", "en", "en", None, None],
    })
    table["A"] = table["A"].astype(object)
    rows = correlation_table(table, ["A"], human_col="rating", group_by=["lang"], n_boot=50, seed=4, confidence=0.9)
    assert list(rows["lang"].fillna("none")) == ["en", "fr", "none"]  # sorted; the missing language kept
    assert list(rows["n"]) == [5, 5, 1]
    en = table[table["lang"] == "en"]
    expected = bootstrap_estimates(en["A"].astype(float), en["rating"], n_boot=50, seed=4, confidence=0.9)
    for name, estimate in expected.items():
        assert close(rows.loc[0, name], estimate.value)
        assert close(rows.loc[0, f"{name}_low"], estimate.low) and close(rows.loc[0, f"{name}_high"], estimate.high)
    numeric = pd.DataFrame({"rating": [1, 2, 3, 4, 5, 3], "A": [0.2, 0.1, 0.5, 0.4, 0.8, 0.3],
                            "B": [1, 3, 2, 5, 4, 4]})
    plain = correlation_table(numeric, human_col="rating")  # every numeric column but the human one
    assert list(plain["metric"]) == ["A", "B"]
    defaults = bootstrap_estimates(numeric["A"], numeric["rating"])
    assert close(plain.loc[0, "kendall_c_low"], defaults["kendall_c"].low)
    assert close(plain.loc[0, "pearson_high"], defaults["pearson"].high)
    with pytest.raises(ValueError, match="^no metric columns to correlate$"):
        correlation_table(numeric[["rating"]], human_col="rating")
    systems = system_level_correlation(numeric.assign(system=["s1", "s1", "s2", "s2", "s3", "s3"]),
                                       human_col="rating")
    assert list(systems["metric"]) == ["A", "B"]


def test_wrong_shapes_name_the_argument():
    with pytest.raises(ValueError, match="^x must be one-dimensional"):
        pearson([[1.0, 2.0]], [1.0, 2.0])
    with pytest.raises(ValueError, match="^y must be one-dimensional"):
        pearson([1.0, 2.0], [[1.0, 2.0]])
    with pytest.raises(ValueError, match="^values must be one-dimensional"):
        average_ranks([[1.0, 2.0]])


def test_continuous_scores_and_a_two_level_human_scale():
    """Many distinct values (the resamples' rank codes spread wider than their number of
    values, the scan that closes the gaps), and a binary human score (tau-c with two classes)."""
    rng = np.random.default_rng(8)
    x, y = rng.normal(size=100), rng.normal(size=100)
    y = x + y
    index = resamples(100, 30, 1)
    got = bootstrap_estimates(x, y, ["kendall_b", "kendall_c"], n_boot=30, seed=1)
    for name in ("kendall_b", "kendall_c"):
        low, high = interval([scipy_coefficient(name, x[i], y[i]) for i in index])
        assert close(got[name].low, low) and close(got[name].high, high), name
    default = bootstrap_estimate(x, y)  # 1,000 resamples, seed 0, tau-c
    low, high = interval([scipy_coefficient("kendall_c", x[i], y[i]) for i in resamples(100)])
    assert close(default.low, low) and close(default.high, high)
    binary = (y > 0).astype(float)
    got = bootstrap_estimates(x, binary, ["kendall_c"], n_boot=30, seed=1)["kendall_c"]
    low, high = interval([scipy_coefficient("kendall_c", x[i], binary[i]) for i in index])
    assert close(got.value, scipy_coefficient("kendall_c", x, binary)) and close(got.low, low) and close(got.high, high)
    flat = bootstrap_estimate(np.ones(25), np.arange(25.0), "kendall_b")
    assert math.isnan(flat.value)


def test_wrappers_pass_their_settings_on():
    from scoring.analysis.correlation import cluster_bootstrap_estimate, compare_metrics, metric_columns

    rng = np.random.default_rng(6)
    human = rng.integers(1, 6, 40).astype(float)
    a, b = human + rng.normal(0, 1, 40), human + rng.normal(0, 2, 40)
    clusters = np.repeat(np.arange(20), 2)
    assert cluster_bootstrap_estimate(a, human, clusters, "pearson", n_boot=60, seed=2, confidence=0.5) == \
        cluster_bootstrap(lambda i: pearson(a[i], human[i]), clusters, n_boot=60, seed=2, confidence=0.5)
    table = pd.DataFrame({"human": human, "A": a, "B": b})
    assert compare_metrics(table, "A", "B", n_boot=60, seed=3) == \
        paired_bootstrap_test(human, a, b, "kendall_c", n_boot=60, seed=3)
    assert metric_columns(table) == ["A", "B"]
    rows = correlation_table(table)  # 40 items of many values: the defaults decide the interval
    defaults = bootstrap_estimates(a, human)
    assert close(rows.loc[0, "kendall_c_low"], defaults["kendall_c"].low)
    assert close(rows.loc[0, "spearman_high"], defaults["spearman"].high)
    systems = system_level_correlation(table.assign(system=np.repeat(["s1", "s2", "s3", "s4"], 10)), ["B"])
    assert list(systems["metric"]) == ["B"]


def test_error_texts():
    from scoring.analysis.correlation import coefficient, williams_test

    with pytest.raises(ValueError, match=r"^unknown coefficient 'tau'; choose from kendall_b, kendall_c, pearson, "
                                         r"spearman$"):
        coefficient("tau")
    with pytest.raises(ValueError, match=r"^missing column\(s\) 'C'; table has human, A$"):
        correlation_table(pd.DataFrame({"human": [1.0, 2.0], "A": [0.1, 0.2]}), ["A", "C"])
    with pytest.raises(ValueError, match=r"^Williams' test needs at least 4 items"):
        williams_test([1, 2, 3], [1, 2, 3], [3, 2, 1])
