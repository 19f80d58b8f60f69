"""Measurement helpers compute what they claim."""
import numpy as np

from scoring.world.measure import _pairwise, recall_at


def test_recall_at_k():
    perfect = np.eye(4)
    assert recall_at(perfect) == {"R@1": 1.0, "R@5": 1.0, "R@10": 1.0}
    # Query 0 ranks its image second, query 1 third; queries 2 and 3 are right.
    sim = np.array([[0.5, 0.9, 0.1, 0.0], [0.8, 0.1, 0.9, 0.0], [0, 0, 1, 0], [0, 0, 0, 1]], dtype=float)
    assert recall_at(sim, ks=(1, 2, 3)) == {"R@1": 0.5, "R@2": 0.75, "R@3": 1.0}
    # Ties are a random order, not the query's: an encoder that scores every image alike is at
    # chance (K / N), where counting only the images scored higher gave R@1 = 1.0.
    assert recall_at(np.zeros((4, 4)), ks=(1, 2, 4)) == {"R@1": 0.25, "R@2": 0.5, "R@4": 1.0}


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


def _perturbation_frame():
    """Three scenes, one English caption each, two operations; scene 2's removal changed nothing."""
    import pandas as pd

    rows = []  # scene, item, lang, op, noop, M
    for item, (original, removal, masking, noop) in enumerate([(1.0, 0.5, 0.8, False), (3.0, 3.0, 2.4, True),
                                                                 (2.0, 1.0, 1.0, False)]):
        rows += [(f"s{item}", item, "en", "original", False, original), (f"s{item}", item, "en", "removal", noop, removal),
                 (f"s{item}", item, "en", "masking", False, masking)]
    rows.append(("s0", 9, "ja", "original", False, 5.0))  # another language is left out
    rows.append(("s0", 9, "ja", "removal", False, 0.0))
    rows.append(("s0", 9, "ja", "masking", False, 0.0))
    return pd.DataFrame(rows, columns=["scene", "item_id", "lang", "op", "noop", "M"])


def test_drop_estimates_agree_with_the_table_and_a_hand_computation():
    import pytest

    from scoring.world.measure import drop_estimates, perturbation_summary

    frame = _perturbation_frame()
    est = drop_estimates(frame, "M", "en", ["removal", "masking"], n_boot=200)
    # removal over all captions: (0.5 + 3.0 + 1.0) / 3 against 6 / 3 -> 25 % drop;
    # over the changed ones: 1.5 against 3.0 -> 50 %. masking: 4.2 against 6.0 -> 30 %.
    assert est["ops"]["removal"]["all"].value == pytest.approx(25.0)
    assert est["ops"]["removal"]["changed"].value == pytest.approx(50.0)
    assert est["ops"]["removal"]["changed_captions"] == 2
    assert est["ops"]["masking"]["all"].value == est["ops"]["masking"]["changed"].value == pytest.approx(30.0)
    assert est["mean"].value == pytest.approx(27.5)
    assert est["weakest_op"] == "masking" and est["weakest"].value == pytest.approx(30.0)
    assert est["mean"].n == 3  # resampled by scene
    assert est["mean"].low < 27.5 < est["mean"].high
    # the same points as the PR-MCS Table 7 summary of the same rows
    long = frame[frame["lang"] == "en"].rename(columns={"M": "score"}).drop(columns="scene").assign(metric="M")
    table = perturbation_summary(long, ("removal", "masking"))["en"]
    for op in ("removal", "masking"):
        assert -table[op]["change_pct"] == pytest.approx(est["ops"][op]["all"].value)
        assert -table[op]["effective_change_pct"] == pytest.approx(est["ops"][op]["changed"].value)


def test_drop_estimates_resample_whole_scenes():
    """Every resample keeps a scene's original with its perturbations: with one scene drawn three
    times the drop is that scene's own, so the interval spans the scenes' own drops."""
    import pytest

    from scoring.world.measure import drop_estimates

    est = drop_estimates(_perturbation_frame(), "M", "en", ["removal", "masking"], n_boot=400)
    masking = est["ops"]["masking"]["all"]
    # per scene 20 %, 20 %, 50 %: 8 of 27 draws hold no scene 2 (20 %), 1 of 27 only scene 2 (50 %)
    assert (masking.low, masking.high) == (pytest.approx(20.0), pytest.approx(50.0))
    # the mean's low end: removal's changed-or-not drop is 0 % when only scene 1 is drawn (no-op)
    assert est["mean"].low == pytest.approx(10.0)


def test_perturbation_rows_score_each_caption_and_its_five_operations():
    """The long frame behind `perturbation` and `bench_prmcs`: every caption once as the original,
    then once per PR-MCS operation, each row scored by every metric that runs."""
    from scoring.api import Scorer
    from scoring.perturb.ops import PRMCS_OPS
    from scoring.world.measure import perturbation, perturbation_rows
    from scoring.world.render import render_scene
    from scoring.world.scene import generate_scenes

    scenes = generate_scenes(2_000_000, 2)
    images = [render_scene(s, 32) for s in scenes]
    scorer = Scorer("tiny", "cpu")
    frame, unavailable = perturbation_rows(scorer, scenes, images, ("en", "ja"), 0, ("MCS", "PR-MCS"))
    assert unavailable == {}
    originals = frame[frame["op"] == "original"]
    assert set(originals["lang"]) == {"en", "ja"} and set(originals["scene"]) == {s.scene_id for s in scenes}
    assert len(frame) == 6 * len(originals)
    assert (frame.groupby("item_id")["op"].apply(list) == [["original", *PRMCS_OPS]] * len(originals)).all()
    assert frame.loc[frame["op"] == "original", "noop"].eq(False).all()
    assert np.isfinite(frame[["MCS", "PR-MCS"]].to_numpy()).all()
    # perturbation() summarises the same rows
    summary = perturbation(scorer, scenes, images, ("en",), 0, ("MCS",))
    assert summary["captions"] == (originals["lang"] == "en").sum()
    english = frame[frame["lang"] == "en"]
    masking = english[english["op"] == "masking"]
    assert summary["MCS"]["en"]["masking"]["after"] == round(masking["MCS"].mean(), 4)
