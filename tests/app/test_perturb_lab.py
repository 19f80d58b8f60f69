"""The Perturbation lab's library calls (`app.perturb_lab`): one caption perturbed and
scored before and after, as PR-MCS Table 7, with the tiny profile's real BLEU-1."""
from __future__ import annotations

import numpy as np
import pytest

from app.perturb_lab import (ALL_FIVE, caption_robustness, caption_robustness_cells, parse_critical, perturb_and_score,
                             perturb_caption)
from scoring.api import get_scorer

TEXT = "a red square on a white table"  # 7 words, its own reference: BLEU-1 = 1


def test_changes_follow_from_the_perturbed_words():
    perturbations = perturb_caption(TEXT, ALL_FIVE, 0.4, 0, "en", None)
    assert [p.op for p in perturbations] == ["repetition", "removal", "masking", "jumble", "substitution"]
    result = caption_robustness(get_scorer("tiny"), None, TEXT, perturbations, [TEXT], "en", ["BLEU-1", "CLIP-S"])
    row = result.table.set_index("metric").loc["BLEU-1"]
    assert row["original"] == pytest.approx(1.0)
    # Jumble keeps every word: unigram precision stays 1. Repetition adds words that are
    # clipped away: precision 7 / n. Removal keeps precision 1 but pays the brevity penalty.
    assert row["jumble_change"] == pytest.approx(0.0, abs=1e-9)
    repeated = len(perturbations[0].text.split())
    assert repeated > 7 and row["repetition_change"] == pytest.approx(100 * (7 / repeated - 1))
    assert row["removal_change"] < 0
    # CLIP-S needs an image these inputs lack: the /score API's status, and a message saying so.
    assert result.statuses == {"BLEU-1": "available", "CLIP-S": "available (needs an image for these rows)"}
    assert result.messages == ["CLIP-S: no value, needs an image (none given)."]
    assert result.summary(5, "en") == ("5 perturbation(s) of a caption in en; 1 of 2 metric(s) scored it (the "
                                       "others: see status).")  # not "scored by 2 metrics" (a trial)

    cells = caption_robustness_cells(result).set_index("metric")
    assert list(cells.columns) == ["status", "Original", "Repetition", "Removal", "Masking", "Jumble", "Substitution",
                                   "Average", "Robustness", "status in words"]
    assert cells.loc["BLEU-1", "Original"] == "1.0000"
    assert cells.loc["BLEU-1", "Jumble"] == "1.0000 (+0.00%)"
    assert (cells.loc["CLIP-S"].drop(["status", "status in words"]) == "-").all()
    assert cells.loc["CLIP-S", "status in words"] == "available (needs an image for these rows)"
    # The Score tab's icons: a caveat (⚠) is seen beside the metric, its words on hover.
    assert ">✓<" in cells.loc["BLEU-1", "status"] and ">⚠<" in cells.loc["CLIP-S", "status"]
    assert 'title="available (needs an image for these rows)"' in cells.loc["CLIP-S", "status"]


def test_no_image_and_no_references_say_what_is_needed():
    perturbations = perturb_caption(TEXT, "jumble", None, 0, "en", None)
    result = caption_robustness(get_scorer("tiny"), None, TEXT, perturbations, [], "en", ["BLEU-1", "CLIP-S"])
    # Each metric names what it needs itself ("an image or references" for both read as a contradiction)
    assert result.statuses == {"BLEU-1": "available (needs references for these rows)",
                               "CLIP-S": "available (needs an image for these rows)"}
    assert result.messages == ["CLIP-S: no value, needs an image (none given).",
                               "BLEU-1: no value, needs references (none given)."]


def test_cider_from_one_images_references_is_not_meaningful_as_in_the_score_tab():
    from scoring.metrics.base import MetricUnavailable
    from scoring.metrics.coco import ptb_tokenize

    try:
        ptb_tokenize(["a test"])
    except MetricUnavailable as exc:
        pytest.skip(str(exc))
    perturbations = perturb_caption(TEXT, "jumble", None, 0, "en", None)
    result = caption_robustness(get_scorer("tiny"), None, TEXT, perturbations, [TEXT], "en", ["CIDEr"])
    assert result.statuses["CIDEr"].startswith(
        "available; not meaningful: document frequencies from the references of one image")
    assert "this batch: 1 reference set(s)" in result.statuses["CIDEr"]


def test_one_operation_has_no_average_and_unavailable_metrics_say_why():
    perturbations = perturb_caption(TEXT, "removal", None, 3, "en", None)
    result = caption_robustness(get_scorer("tiny"), None, TEXT, perturbations, [TEXT], "en", ["BLEU-1", "SPICE"])
    cells = caption_robustness_cells(result).set_index("metric")
    assert "Average" not in cells.columns and "Removal" in cells.columns
    assert cells.loc["SPICE", "status in words"].startswith("unavailable: ") and ">✗<" in cells.loc["SPICE", "status"]
    assert cells.loc["SPICE", "Original"] == "-"



def test_a_metric_whose_original_scores_0_is_said_to_have_no_bars():
    """Off a zero original no change in % is defined, so the chart has no bar for it: a new
    user saw MCS and PR-MCS missing from it without a word. BLEU-1 against a reference that
    shares no word with the caption scores 0."""
    perturbations = perturb_caption(TEXT, ALL_FIVE, 0.4, 0, "en", None)
    result = caption_robustness(get_scorer("tiny"), None, TEXT, perturbations, ["zebra"], "en", ["BLEU-1", "ROUGE-L"])
    originals = result.table.set_index("metric")["original"]
    assert originals["BLEU-1"] == pytest.approx(0, abs=1e-9) and originals["ROUGE-L"] == 0.0  # (BLEU: 1e-16)
    assert result.messages == ["BLEU-1, ROUGE-L: the original scores 0, so no change in % is defined; left out of "
                               "the chart (the table shows the scores)."]
    kept = caption_robustness(get_scorer("tiny"), None, TEXT, perturbations, [TEXT], "en", ["BLEU-1"])
    assert kept.messages == []

def test_inputs_as_typed():
    assert parse_critical("man; white shirt\nhorse ;") == ["man", "white shirt", "horse"]
    assert parse_critical("  ") is None
    with pytest.raises(ValueError, match="Enter a caption"):
        perturb_caption("   ", ALL_FIVE, 0.4, 0, "en", None)


def test_a_lab_run_detects_the_language_and_keeps_perturbations_when_scoring_fails():
    scorer = get_scorer("tiny")
    run = perturb_and_score(scorer, "ein Mann fährt mit dem Fahrrad über die Brücke", "removal", None, 0, "auto",
                            None, references=["ein Mann fährt Fahrrad"], metrics=["BLEU-1"])
    assert run.lang == "de" and [p.lang for p in run.perturbations] == ["de"]
    # BLEU's PTB tokenizer is English's: the status says so for a German caption
    assert run.problem is None and run.robustness.statuses == {"BLEU-1": "available; made for en: 1 of 1 caption(s) are in de"}
    unscored = perturb_and_score(scorer, TEXT, ALL_FIVE, 0.4, 0, "en", None, metrics=["NOPE"])
    assert len(unscored.perturbations) == 5 and unscored.robustness is None
    assert unscored.problem.startswith("unknown metric 'NOPE'")
    assert perturb_and_score(scorer, TEXT, "jumble", None, 0, "en", None).robustness is None  # no metric chosen


def test_each_operation_takes_its_own_default_p_from_the_library():
    from app.perturb_lab import lab_default_p, operation_choices
    from scoring.perturb.ops import ALL_OPS, DEFAULT_P, canonical_op

    defaults = {p.op: p.p for p in perturb_caption(TEXT, ALL_FIVE, None, 0, "en", None)}
    # Removal drops each word with 0.6 (PR-MCS Algorithm 1 keeps it with 0.4), not 0.4.
    assert defaults == {"repetition": 0.4, "removal": 0.6, "masking": 0.4, "jumble": None, "substitution": None}
    assert lab_default_p("removal") == DEFAULT_P["removal"] == 0.6 and lab_default_p(ALL_FIVE) is None
    # A number given applies to every operation that takes one.
    assert {p.op: p.p for p in perturb_caption(TEXT, ALL_FIVE, 0.25, 0, "en", None)}["removal"] == 0.25
    # One list of operations: the menu has jumble once and no "permutation", which stays an alias.
    assert operation_choices() == [ALL_FIVE, *ALL_OPS] and "permutation" not in operation_choices()
    assert canonical_op("Permutation") == "jumble"
    (alias,) = perturb_caption(TEXT, "permutation", None, 5, "en", None)
    (jumble,) = perturb_caption(TEXT, "jumble", None, 5, "en", None)
    assert alias == jumble and alias.op == "jumble"
    with pytest.raises(ValueError, match="aliases: permutation"):
        canonical_op("shuffle")


def test_a_noop_operation_has_no_change_in_the_table():
    # One distinct word: jumble cannot change the order; repetition still does.
    text = "dog dog dog"
    perturbations = perturb_caption(text, "all", None, 0, "en", None)
    jumble = next(p for p in perturbations if p.op == "jumble")
    assert jumble.noop
    result = caption_robustness(get_scorer("tiny"), None, text, perturbations, [text], "en", ["BLEU-1"])
    row = result.table.set_index("metric").loc["BLEU-1"]
    assert np.isnan(row["jumble"]) and row["jumble_n"] == 0
    assert caption_robustness_cells(result).set_index("metric").loc["BLEU-1", "Jumble"] == "-"
