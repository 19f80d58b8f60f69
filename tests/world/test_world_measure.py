"""Measurement helpers compute what they claim."""
import numpy as np

from scoring.world.measure import _pairwise, recall_at


def test_recall_at_k():
    perfect = np.eye(4)
    assert recall_at(perfect) == {"R@1": 1.0, "R@5": 1.0, "R@10": 1.0}
    # Query 0 ranks its image second, query 1 third; queries 2 and 3 are right.
    sim = np.array([[0.5, 0.9, 0.1, 0.0], [0.8, 0.1, 0.9, 0.0], [0, 0, 1, 0], [0, 0, 0, 1]], dtype=float)
    assert recall_at(sim, ks=(1, 2, 3)) == {"R@1": 0.5, "R@2": 0.75, "R@3": 1.0}


def test_pairwise_accuracy_per_error_kind():
    rows = [  # (lang, style, text, oracle, human, scene, kind)
        ("en", "short", "a", 1.0, 1.0, 0, "correct"), ("en", "short", "b", 0.3, 0.3, 0, "colour"),
        ("en", "short", "c", 0.3, 0.3, 0, "shape"), ("en", "short", "d", 1.0, 1.0, 1, "correct"),
        ("en", "short", "e", 0.3, 0.3, 1, "colour"),
    ]
    values = [0.9, 0.5, 0.9, 0.4, 0.6]
    assert _pairwise(rows, values, ("en",)) == {"en": {"colour": 0.5, "shape": 0.5}}


def test_perturbation_summary_compares_the_same_captions_on_both_sides():
    import pandas as pd
    import pytest

    from scoring.world.measure import perturbation_summary

    rows = [  # item, lang, op, noop, score: originals 1.0 and 3.0
        (0, "en", "original", False, 1.0), (1, "en", "original", False, 3.0),
        (0, "en", "removal", False, 0.5), (1, "en", "removal", True, 3.0),  # item 1: removal changed nothing
        (0, "en", "masking", False, 0.8), (1, "en", "masking", False, 2.4),
    ]
    long = pd.DataFrame(rows, columns=["item_id", "lang", "op", "noop", "score"]).assign(metric="M")
    summary = perturbation_summary(long, ("removal", "masking"))["en"]
    # Over all captions (PR-MCS Table 7): (0.5 + 3.0) / 2 = 1.75 against 2.0 -> -12.5 %.
    assert summary["removal"]["change_pct"] == pytest.approx(-12.5)
    # Without the no-op: 0.5 against its own original 1.0 -> -50 %, not 0.5 against 2.0 (-75 %).
    assert summary["removal"]["effective_change_pct"] == pytest.approx(-50.0)
    assert summary["removal"]["noop"] == 1 and summary["removal"]["n"] == 2
    assert summary["masking"]["change_pct"] == summary["masking"]["effective_change_pct"] == pytest.approx(-20.0)
