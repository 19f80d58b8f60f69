"""Disagreement-first rating priority (annotation.studies.queue_priority): values worked out by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest

from annotation.studies.queue_priority import disagreement, disagreement_first, rank_normalise

# Three metrics on four items. Normalised ranks (lowest 0, highest 1, ties averaged):
#   A: 0, 1/3, 2/3, 1      B: 0, 2/3, 1/3, 1      C: -, 0.75, 0.75, 0   (5 and 5 tie: rank 2.5 of 3)
SCORES = {"A": [0.1, 0.2, 0.3, 0.4], "B": [10, 30, 20, 40], "C": [None, 5, 5, 1]}


def test_rank_normalise_averages_ties_and_keeps_missing_values_missing():
    got = rank_normalise([5, None, 5, 1, float("nan")])
    assert got[[0, 2, 3]].tolist() == [0.75, 0.75, 0.0]
    assert np.isnan(got[[1, 4]]).all()
    assert rank_normalise([None, 7]).tolist()[1] == 0.5  # a lone value sits in the middle


def test_disagreement_is_the_spread_of_normalised_ranks():
    got = disagreement(SCORES)
    # item 0: A and B agree (C did not score it); items 1 and 2: {1/3, 2/3, 0.75}; item 3: {1, 1, 0}
    assert got[0] == 0.0
    assert got[1] == pytest.approx(math.sqrt(((1 / 3 - 7 / 12) ** 2 + (2 / 3 - 7 / 12) ** 2 + (0.75 - 7 / 12) ** 2) / 3))
    assert got[1] == pytest.approx(0.1800206, abs=1e-6) and got[2] == pytest.approx(got[1])
    assert got[3] == pytest.approx(math.sqrt(2) / 3)


def test_disagreement_first_orders_by_spread_ties_in_given_order_unscored_last():
    assert disagreement_first(["a", "b", "c", "d"], SCORES) == ["d", "b", "c", "a"]
    # the caller's order breaks the tie between b and c
    reordered = {m: [v[i] for i in (0, 2, 1, 3)] for m, v in SCORES.items()}
    assert disagreement_first(["a", "c", "b", "d"], reordered) == ["d", "c", "b", "a"]
    # an item only one metric scored has no disagreement and comes after one whose metrics agree:
    # A ranks 0, 1/2, 1 and B 0, 1, -, so the spreads are 0, 1/4 and none
    with_lone = {"A": [1, 2, 3], "B": [1, 2, None]}
    assert disagreement(with_lone)[:2].tolist() == [0.0, 0.25] and np.isnan(disagreement(with_lone)[2])
    assert disagreement_first([10, 11, 12], with_lone) == [11, 10, 12]
    assert disagreement_first([12, 10, 11], {"A": [3, 1, 2], "B": [None, 1, 2]}) == [11, 10, 12]
    assert disagreement_first([1, 2], {}) == [1, 2]
    with pytest.raises(ValueError, match="one value per item"):
        disagreement({"A": [1, 2], "B": [1]})
