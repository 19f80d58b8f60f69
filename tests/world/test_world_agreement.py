"""scoring.world.agreement: the paired differences and error pairs behind bench_ratings,
bench_prmcs and bench_finetune, checked against hand computations and scipy."""
import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from scoring.world.agreement import (content_error_pairs, margin_over_best, pair_accuracy_difference,
                                     paired_difference, rating_table)
from scoring.world.scene import generate_scenes


def _table():
    # two scenes, English long captions, one German row that every English subset must leave out
    rows = [
        ("s1", "en", "long", "", "", 0.9, 0.8, 0.7),
        ("s1", "en", "long", "colour", "", 0.6, 0.5, 0.9),
        ("s1", "en", "long", "shape", "", 0.5, 0.8, 0.2),
        ("s1", "en", "long", "", "agreement", 0.7, 0.1, 0.4),
        ("s1", "en", "short", "", "", 0.4, 0.3, 0.3),
        ("s2", "en", "long", "", "", 0.8, 0.6, 0.6),
        ("s2", "en", "long", "relation", "", 0.3, 0.6, 0.1),
        ("s2", "en", "long", "colour", "word-order", 0.2, 0.9, 0.0),
        ("s2", "en", "short", "", "", 0.5, 0.2, 0.5),
        ("s2", "de", "long", "", "", 0.1, 0.4, 0.9),
    ]
    return pd.DataFrame(rows, columns=["scene", "lang", "style", "errors", "damage", "human", "A", "B"])


def test_content_error_pairs_pair_clean_correct_and_clean_wrong_captions_of_one_scene():
    table = _table()
    pairs = content_error_pairs(table, "en", "long")
    # s1: correct row 0 against the colour (1) and shape (2) errors; the damaged row 3 is in no pair.
    # s2: correct row 5 against the relation error (6); row 7 has damage; the German row 9 is out.
    assert sorted(zip(pairs["scene"], pairs["correct"], pairs["wrong"])) == [("s1", 0, 1), ("s1", 0, 2), ("s2", 5, 6)]


def test_pair_accuracy_difference_counts_ties_as_half_and_pairs_the_resamples():
    table = _table()
    pairs = content_error_pairs(table, "en", "long")
    est = pair_accuracy_difference(table, pairs, "A", "B", n_boot=200)
    # A: 0.8 > 0.5 right, 0.8 = 0.8 tie, 0.6 = 0.6 tie -> (1 + .5 + .5) / 3
    # B: 0.7 < 0.9 wrong, 0.7 > 0.2 right, 0.6 > 0.1 right -> 2 / 3
    assert est["A"].value == pytest.approx(100 * 2 / 3)
    assert est["B"].value == pytest.approx(100 * 2 / 3)
    assert est["difference"].value == pytest.approx(0.0)
    # resampling whole scenes: s1 alone gives A 75 - B 50 and s2 alone 50 - 100; every resample
    # is a mix of these two scenes, so the difference stays within those extremes and reaches both
    assert est["difference"].low == pytest.approx(-50) and est["difference"].high == pytest.approx(25)
    assert est["difference"].n == 2


def test_paired_difference_is_the_difference_of_scipy_tau_c_on_the_subset():
    rng = np.random.default_rng(3)
    n = 60
    table = pd.DataFrame({"scene": np.repeat([f"s{i}" for i in range(12)], 5), "lang": "en",
                          "style": np.tile(["short", "long", "short", "long", "short"], 12),
                          "human": rng.random(n)})
    table["good"] = table["human"] + 0.1 * rng.random(n)
    table["poor"] = rng.random(n)
    est = paired_difference(table, "good", "poor", "en", "short", n_boot=300)
    part = table[table["style"] == "short"]
    tau = {c: kendalltau(part[c], part["human"], variant="c").statistic for c in ("good", "poor")}
    assert est.value == pytest.approx(tau["good"] - tau["poor"])
    assert est.low < est.value < est.high
    assert est.n == 12
    same = paired_difference(table, "good", "good", "en", "all", n_boot=100)
    assert (same.value, same.low, same.high) == (0.0, 0.0, 0.0)
    best, margin = margin_over_best(table, "good", ["poor", "human"], "en", "short", n_boot=50)
    assert best == "human"  # the annotators' own mean agrees with itself at tau_c 1
    assert margin.value == pytest.approx(tau["good"] - kendalltau(part["human"], part["human"], variant="c").statistic)


def test_rating_table_names_each_candidates_errors_and_damage():
    table = rating_table(generate_scenes(1_000_000, 4), ("en",))
    assert {"errors", "damage"} <= set(table.columns)
    raters = table[["rater_0", "rater_1", "rater_2"]].mean(axis=1)
    np.testing.assert_allclose(table["human"], raters, rtol=0, atol=1e-12)
    # an undamaged, error-free caption is the oracle's best of its scene and style
    clean = table[(table["errors"] == "") & (table["damage"] == "")]
    assert len(clean)
    best = table.groupby(["scene", "style"])["oracle"].transform("max")
    assert (table.loc[clean.index, "oracle"] == best.loc[clean.index]).all()
    damaged = table[table["damage"] != ""]
    assert len(damaged) and (damaged["oracle"] < 1).all()


def test_the_annotators_mean_keeps_ties_that_the_ratings_have():
    """Ratings lie on a 0.05 grid, so equal rating sums must give one mean: numpy's float mean
    gave 0.35 as 0.3499999999999999 or 0.35000000000000003 by the order of the ratings, and
    Kendall's tau_c then counted tied captions as ordered (an audit: 107 distinct means for 61)."""
    from fractions import Fraction

    table = rating_table(generate_scenes(1_000_000, 12), ("en",))
    raters = table[["rater_0", "rater_1", "rater_2"]].to_numpy()
    exact = [sum(Fraction(round(20 * r), 20) for r in row) / 3 for row in raters]
    assert table["human"].nunique() == len(set(exact))
    assert all(abs(h - float(e)) < 1e-12 for h, e in zip(table["human"], exact))


def test_a_captions_simulated_ratings_do_not_depend_on_the_other_languages_asked_for():
    """A rated caption's key numbers it within its language: the same German caption got other
    ratings with `--langs de` than with `--langs en,de` (an audit: 272 of 289)."""
    scenes = generate_scenes(1_000_000, 3)
    alone = rating_table(scenes, ("de",))
    together = rating_table(scenes, ("en", "de"))
    together = together[together["lang"] == "de"].reset_index(drop=True)
    assert len(alone) == len(together) > 0
    assert alone["text"].tolist() == together["text"].tolist()
    assert alone["key"].tolist() == together["key"].tolist()
    assert alone[["rater_0", "rater_1", "rater_2"]].equals(together[["rater_0", "rater_1", "rater_2"]])
