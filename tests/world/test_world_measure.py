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
