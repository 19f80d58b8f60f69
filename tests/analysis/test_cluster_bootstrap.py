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
