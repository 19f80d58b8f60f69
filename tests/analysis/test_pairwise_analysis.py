"""Pascal-50S and FOIL accuracy on hand-made sets."""
import numpy as np
import pandas as pd
import pytest

from scoring.analysis.pairwise import (
    foil_accuracy, foil_table, human_preference, pascal50s_accuracy, pascal50s_table,
)

# category, votes for A, votes for B, metric score of A, of B, hand-judged credit
HAND_MADE = [
    ("HC", 30, 18, 0.9, 0.5, 1.0),   # humans A, metric A
    ("HC", 10, 38, 0.8, 0.7, 0.0),   # humans B, metric A
    ("HI", 48, 0, 0.9, 0.1, 1.0),
    ("HI", 0, 48, 0.2, 0.6, 1.0),
    ("HM", 24, 24, 0.5, 0.5, 0.5),   # human tie (coin) and metric tie: half either way
    ("HM", 40, 8, 0.3, 0.3, 0.5),    # metric tie counts half
    ("MM", 20, 28, 0.4, 0.6, 1.0),
    ("MM", 25, 23, 0.1, 0.2, 0.0),
    ("MM", 5, 43, 0.9, 0.8, 0.0),
]


def _pairs():
    frame = pd.DataFrame(HAND_MADE, columns=["category", "votes_a", "votes_b", "M_a", "M_b", "credit"])
    return frame


def test_hand_made_pascal_set_gives_the_expected_accuracy():
    pairs = _pairs()
    result = pascal50s_accuracy(pairs["category"], pairs["votes_a"], pairs["votes_b"], pairs["M_a"], pairs["M_b"])
    assert result["HC"] == pytest.approx(0.5)
    assert result["HI"] == pytest.approx(1.0)
    assert result["HM"] == pytest.approx(0.5)
    assert result["MM"] == pytest.approx(1 / 3)
    assert result["mean"] == pytest.approx((0.5 + 1.0 + 0.5 + 1 / 3) / 4)
    expected_by_category = pairs.groupby("category")["credit"].mean()
    for category, value in expected_by_category.items():
        assert result[category] == pytest.approx(value)


def test_pascal_table_accepts_numeric_categories_and_several_metrics():
    pairs = _pairs()
    pairs["category"] = pairs["category"].map({"HC": 1, "HI": 2, "HM": 3, "MM": 4})
    pairs["Oracle_a"] = pairs["votes_a"]
    pairs["Oracle_b"] = pairs["votes_b"]
    table = pascal50s_table(pairs, ["M", "Oracle"]).set_index("metric")
    assert table.loc["M", "mean"] == pytest.approx((0.5 + 1.0 + 0.5 + 1 / 3) / 4)
    # scoring by the votes themselves is right everywhere except the human tie (metric tie: half)
    assert table.loc["Oracle", "HM"] == pytest.approx(0.75)
    assert table.loc["Oracle", "HC"] == 1.0 and table.loc["Oracle", "n"] == 9


def test_human_ties_are_broken_by_a_seeded_coin():
    ties = np.full(2000, 10)
    first = human_preference(ties, ties, seed=3)
    assert np.array_equal(first, human_preference(ties, ties, seed=3))
    assert not np.array_equal(first, human_preference(ties, ties, seed=4))
    assert 0.45 < first.mean() < 0.55
    assert human_preference([3, 1], [1, 3]).tolist() == [1.0, 0.0]


def test_bad_pascal_input_is_rejected():
    with pytest.raises(ValueError, match="category"):
        pascal50s_accuracy(["XX"], [1], [0], [1.0], [0.0])
    with pytest.raises(ValueError, match="lacks column"):
        pascal50s_table(_pairs(), ["Missing"])


def test_foil_accuracy_counts_ties_half_and_skips_missing():
    assert foil_accuracy([0.9, 0.5, 0.4, np.nan], [0.1, 0.5, 0.6, 0.2]) == pytest.approx((1 + 0.5 + 0) / 3)
    pairs = pd.DataFrame({"CLIP-S_correct": [0.9, 0.8], "CLIP-S_foil": [0.7, 0.85]})
    table = foil_table(pairs, ["CLIP-S"])
    assert table.loc[0, "accuracy"] == pytest.approx(0.5) and table.loc[0, "n"] == 2
