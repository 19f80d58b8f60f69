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



def test_grammar_blind_ceiling_reads_content_not_grammar():
    import pytest

    from scoring.world.captions import scene_captions
    from scoring.world.errors import GRAMMAR_PENALTY, candidates_for, oracle_score
    from scoring.world.measure import _kendall_c, grammar_blind_ceiling
    from scoring.world.sets import split_scenes

    scenes = split_scenes("heldout", 8)
    oracle, damaged = [], 0
    for scene in scenes:
        for per_lang in scene_captions(scene, ("en",)).values():
            for cand in candidates_for(scene, per_lang["en"].description, ("en",)):
                oracle.append(cand.oracle.score)
                if cand.damage:  # the blind score gives back exactly the grammar penalty
                    damaged += 1
                    assert oracle_score(scene, cand.caption).score == pytest.approx(cand.oracle.score + GRAMMAR_PENALTY)
    assert damaged > 0
    ceiling = grammar_blind_ceiling(scenes)
    assert set(ceiling) == {"all", "short", "long"}
    # Blind to the grammar penalty, the best content metric sits far below the oracle's own
    # ranking on long captions; a bug that scored the full oracle would reach it.
    assert ceiling["long"] < 0.5 < _kendall_c(oracle, oracle)
    assert 0.0 < ceiling["all"] < 0.9
