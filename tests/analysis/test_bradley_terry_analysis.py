"""Bradley–Terry ranking of caption sources: closed forms, the likelihood's score equations,
ties as half wins, and the cluster bootstrap."""
from __future__ import annotations

import numpy as np
import pytest

from scoring.analysis.bradley_terry import BT_COLUMNS, bradley_terry, bradley_terry_ranking


def test_two_systems_strength_ratio_equals_the_wins_ratio():
    # 7 wins of A over B, 3 of B over A: the MLE is p_A / p_B = 7 / 3, shares 0.7 and 0.3.
    first = ["A"] * 7 + ["B"] * 3
    second = ["B"] * 7 + ["A"] * 3
    strengths = bradley_terry(first, second, [1] * 10)
    assert strengths == pytest.approx({"A": 0.7, "B": 0.3}, abs=1e-9)


def test_a_tie_is_half_a_win_for_each():
    # A beats B twice, B beats A once, two ties: W_A = 3, W_B = 2 -> shares 0.6 and 0.4.
    strengths = bradley_terry(["A", "B", "A", "A", "B"], ["B", "A", "B", "B", "A"], [1, 1, 0.5, 1, 0.5])
    assert strengths == pytest.approx({"A": 0.6, "B": 0.4}, abs=1e-9)


def test_order_of_a_comparison_does_not_matter():
    one = bradley_terry(["A", "B"], ["B", "C"], [1, 1])
    other = bradley_terry(["B", "C"], ["A", "B"], [0, 0])
    assert one == pytest.approx(other)


def test_three_systems_solve_the_likelihood_equations():
    # At the maximum of the likelihood each system's expected wins equal its observed wins:
    # W_i = sum_j n_ij p_i / (p_i + p_j), checked here with a plain loop.
    matches = [("A", "B", 1)] * 5 + [("B", "A", 1)] * 2 + [("B", "C", 1)] * 4 + [("C", "B", 1)] * 3 \
        + [("A", "C", 1)] * 6 + [("C", "A", 1)] * 1 + [("A", "C", 0.5)] * 2
    first, second, outcome = zip(*matches)
    p = bradley_terry(first, second, outcome)
    assert sum(p.values()) == pytest.approx(1.0)
    for system in "ABC":
        observed = sum(o if a == system else 1 - o for a, b, o in matches if system in (a, b))
        expected = sum(p[system] / (p[system] + p[b if a == system else a]) for a, b, _ in matches if system in (a, b))
        assert expected == pytest.approx(observed, rel=1e-7)
    assert p["A"] > p["B"] > p["C"]


def test_a_system_that_never_wins_has_strength_zero():
    p = bradley_terry(["A", "A", "B"], ["C", "C", "C"], [1, 1, 1])
    assert p["C"] == 0.0 and p["A"] > 0 and p["B"] > 0


def test_ranking_table_orders_systems_with_intervals_around_the_point():
    first = ["A"] * 30 + ["B"] * 30
    second = ["B"] * 30 + ["C"] * 30
    outcome = [1] * 24 + [0] * 6 + [1] * 18 + [0] * 12
    ranking = bradley_terry_ranking(first, second, outcome, n_boot=300, seed=3)
    table = ranking.table
    assert list(table.columns) == BT_COLUMNS
    assert list(table["system"]) == ["A", "B", "C"] and list(table["rank"]) == [1, 2, 3]
    assert list(table["wins"]) == [24.0, 6 + 18.0, 12.0] and list(table["comparisons"]) == [30, 60, 30]
    point = bradley_terry(first, second, outcome)
    assert list(table["strength"]) == pytest.approx([point[s] for s in "ABC"], abs=1e-8)
    assert (table["low"] <= table["strength"]).all() and (table["strength"] <= table["high"]).all()
    assert (table["high"] - table["low"] > 0.01).all()
    again = bradley_terry_ranking(first, second, outcome, n_boot=300, seed=3).table
    assert again.equals(table)


def test_cluster_bootstrap_resamples_whole_pairs():
    # Every pair judged by five annotators who agree: resampling pairs (clusters) sees 20
    # independent outcomes, resampling judgments 100, so the cluster interval is wider.
    first, second, outcome, clusters = [], [], [], []
    for pair in range(20):
        for _ in range(5):
            first.append("A"), second.append("B"), outcome.append(1 if pair < 13 else 0), clusters.append(pair)
    by_pair = bradley_terry_ranking(first, second, outcome, clusters, n_boot=400).table.set_index("system")
    by_judgment = bradley_terry_ranking(first, second, outcome, n_boot=400).table.set_index("system")
    assert by_pair.loc["A", "strength"] == pytest.approx(0.65)
    width = lambda t: t.loc["A", "high"] - t.loc["A", "low"]  # noqa: E731
    assert width(by_pair) > 1.5 * width(by_judgment)
    assert bradley_terry_ranking(first, second, outcome, clusters, n_boot=400).n_clusters == 20


@pytest.mark.parametrize("first, second, outcome, message", [
    (["A"], ["A"], [1], "itself"),
    (["A"], ["B"], [2], "outcome"),
    (["A", "B"], ["B"], [1, 1], "one entry"),
    ([], [], [], "no comparisons"),
])
def test_bad_comparisons_are_refused(first, second, outcome, message):
    with pytest.raises(ValueError, match=message):
        bradley_terry(first, second, outcome)


def test_no_interval_without_two_clusters():
    table = bradley_terry_ranking(["A", "A"], ["B", "B"], [1, 0], clusters=[7, 7], n_boot=50).table
    assert np.isnan(table["low"]).all() and table["strength"].tolist() == pytest.approx([0.5, 0.5])


def test_two_system_interval_is_the_percentile_of_resampled_win_shares():
    # With two systems every resample's strength share is its share of A's wins, so the
    # interval is the 2.5th and 97.5th percentile of those shares over the same draws.
    outcome = np.array([1.0] * 13 + [0.0] * 6 + [0.5])
    first, second = ["A"] * outcome.size, ["B"] * outcome.size
    table = bradley_terry_ranking(first, second, outcome, n_boot=500, seed=11).table.set_index("system")
    draws = np.random.default_rng(11).integers(0, outcome.size, size=(500, outcome.size))
    shares = outcome[draws].mean(axis=1)
    assert table.loc["A", "strength"] == pytest.approx(13.5 / 20)
    assert [table.loc["A", "low"], table.loc["A", "high"]] == pytest.approx(np.percentile(shares, [2.5, 97.5]),
                                                                             abs=1e-6)
    assert [table.loc["B", "low"], table.loc["B", "high"]] == pytest.approx(
        np.percentile(1 - shares, [2.5, 97.5]), abs=1e-6)


def test_a_never_beaten_system_stops_at_max_iter_and_batched_fits_equal_single_ones():
    """A chain A > B > C that A never loses has no finite maximum: the fit stops at max_iter
    with A's share close to, not at, 1. The bootstrap fits all resamples at once; each row must
    be the fit it would get alone, whether it converged, ran out of iterations or vanished."""
    from scoring.analysis.bradley_terry import _fit

    chain = bradley_terry(["A", "B", "B"], ["B", "C", "C"], [1, 1, 0.5], max_iter=200)
    assert 0.9 < chain["A"] < 1.0 and chain["C"] > 0
    assert bradley_terry(["A", "B", "B"], ["B", "C", "C"], [1, 1, 0.5], max_iter=2000)["A"] > chain["A"]

    games_chain = np.array([[0, 1, 0], [1, 0, 2], [0, 2, 0]], float)
    games_all = np.array([[0, 2, 1], [2, 0, 1], [1, 1, 0]], float)
    cases = [(np.array([1.0, 2.0, 0.0]), games_all),   # C never wins: share 0, converges
             (np.array([1.0, 1.5, 0.5]), games_chain),  # A never loses: runs to max_iter
             (np.array([2.0, 1.0, 1.0]), games_all),    # converges
             (np.zeros(3), games_all)]                  # no wins at all: NaN
    batched = _fit(np.stack([w for w, _ in cases]), np.stack([g for _, g in cases]), 300, 1e-12)
    for row, (wins, games) in zip(batched, cases):
        np.testing.assert_array_equal(row, _fit(wins, games, 300, 1e-12))
    assert np.isnan(batched[3]).all() and batched[0][2] == 0.0 and 0.9 < batched[1][0] < 1.0


def test_every_resample_keeps_every_compared_system_on_one_scale():
    # A beats B 24:16; C ties once with A and once with B. Resampling all 42 comparisons
    # together dropped C from ~11 % of resamples, whose shares were renormalised over A and B
    # (A ~0.6 instead of ~0.4), so A's interval reached 0.667 around a point of 0.402.
    # Resampled within each pair of systems, C's two ties are in every resample, and only the
    # A-B stratum varies: a resample with k wins of A out of 40 is the fit of A k + 0.5,
    # B 40 - k + 0.5, computed here one by one from the same draws.
    first, second = ["A"] * 40 + ["A", "B"], ["B"] * 40 + ["C", "C"]
    outcome = [1.0] * 24 + [0.0] * 16 + [0.5, 0.5]
    ranking = bradley_terry_ranking(first, second, outcome, n_boot=200, seed=0)
    table = ranking.table.set_index("system")
    assert table.loc["A", "strength"] == pytest.approx(0.4018, abs=1e-4)
    draws = np.random.default_rng(0).integers(0, 40, size=(200, 40))  # the A-B stratum comes first
    shares = []
    for k in (draws < 24).sum(axis=1):
        fit = bradley_terry(first, second, [1.0] * k + [0.0] * (40 - k) + [0.5, 0.5])
        shares.append([fit[s] for s in "ABC"])
    expected = np.percentile(np.array(shares), [2.5, 97.5], axis=0)
    for column, system in enumerate("ABC"):
        assert [table.loc[system, "low"], table.loc[system, "high"]] == pytest.approx(expected[:, column], abs=1e-6)
    assert table.loc["A", "high"] < 0.55
    assert ranking.warning is None and ranking.groups == [["A", "B", "C"]]


def test_systems_never_compared_across_groups_are_ranked_within_groups_with_a_warning():
    # A-B and C-D-E never meet: strengths across the two groups are not identified. Each group
    # is fitted on its own: A beats B 9:1, so 0.9 and 0.1; C, D, E solve their own equations.
    first = ["A"] * 10 + ["C"] * 10 + ["C"] * 10 + ["D"] * 10
    second = ["B"] * 10 + ["D"] * 10 + ["E"] * 10 + ["E"] * 10
    outcome = [1.0] * 9 + [0.0] + [1.0] * 6 + [0.0] * 4 + [1.0] * 6 + [0.0] * 4 + [1.0] * 5 + [0.0] * 5
    ranking = bradley_terry_ranking(first, second, outcome, n_boot=100)
    table = ranking.table.set_index("system")
    assert ranking.groups == [["A", "B"], ["C", "D", "E"]]
    assert ranking.warning is not None and "2 groups never compared" in ranking.warning
    assert table["group"].to_dict() == {"A": 1, "B": 1, "C": 2, "D": 2, "E": 2}
    assert table.loc[["A", "B"], "strength"].tolist() == pytest.approx([0.9, 0.1], abs=1e-8)
    second_group = bradley_terry(first[10:], second[10:], outcome[10:])
    # The one-fit function agrees: each group's shares sum to 1 on their own.
    both = bradley_terry(first, second, outcome)
    assert [both["A"], both["B"]] == pytest.approx([0.9, 0.1], abs=1e-8)
    assert [both[s] for s in "CDE"] == pytest.approx([second_group[s] for s in "CDE"], abs=1e-8)
    assert table.loc[["C", "D", "E"], "strength"].tolist() == pytest.approx(
        [second_group[s] for s in "CDE"], abs=1e-8)
    assert table.loc["C", "rank"] == 1 and table.loc["A", "rank"] == 1
    # Another loser in the first group does not move the second group's shares.
    more = bradley_terry_ranking(first + ["A"] * 10, second + ["B2"] * 10, outcome + [1.0] * 9 + [0.0],
                                 n_boot=0).table.set_index("system")
    assert more.loc[["C", "D", "E"], "strength"].tolist() == pytest.approx(
        table.loc[["C", "D", "E"], "strength"].tolist(), abs=1e-10)
