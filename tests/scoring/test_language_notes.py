"""The "made for" and "one word" notes of the Analyze summary and the failure-case status: what
to know before reading a metric's value in a language it was not made for."""
from __future__ import annotations

import pandas as pd

from scoring.analysis.report import ANY, case_status, collection_report, filter_cases, language_notes, metric_languages


def test_metric_languages_come_from_the_registry(tiny_scorer):
    known = metric_languages(tiny_scorer, ["CLIP-S", "bleu-4", "CIDEr-D", "MCS"])
    assert known == {"CLIP-S": {"languages": ("en",), "one_word": ()},
                     "bleu-4": {"languages": ("en",), "one_word": ("ja", "zh", "th")},
                     "CIDEr-D": {"languages": ("en",), "one_word": ("ja", "zh", "th")},
                     "MCS": {"languages": None, "one_word": ()}}


def _table():
    rows = [(1, "en", 0.9, 0.2, 0.3, 0.5), (2, "en", 0.4, 0.5, 0.1, 0.2), (3, "en", 0.6, 0.4, 0.7, 0.9),
            (4, "ja", 0.9, 0.0, 0.1, 0.6), (5, "ja", 0.3, 0.0, 0.4, 0.1), (6, "ja", 0.5, 0.0, 0.2, 0.3)]
    table = pd.DataFrame([dict(caption_id=c, image_id=f"im{c}", image_file=f"/x/{c}.png", candidate=f"caption {c}",
                               lang=lang, kind="candidate", parent_caption_id=None, op="original", human=h,
                               n_ratings=3, references="a ref", collection="c", **{"BLEU-4": b, "CLIP-S": s, "MCS": m})
                          for c, lang, h, b, s, m in rows])
    table.attrs["metric_languages"] = {"BLEU-4": {"languages": ("en",), "one_word": ("ja", "zh", "th")},
                                       "CLIP-S": {"languages": ("en",), "one_word": ()},
                                       "MCS": {"languages": None, "one_word": ()}}
    return table


def test_the_notes_name_each_metric_outside_its_languages_and_unspaced_word_overlap():
    table = _table()
    assert language_notes(table, [("BLEU-4", "en"), ("CLIP-S", "en"), ("MCS", "ja")]) == ""
    assert language_notes(table, [("MCS", "ja"), ("CLIP-S", "ja"), ("BLEU-4", "ja"), ("BLEU-4", "en")]) == (
        "BLEU-4, CLIP-S were made for en; shown here for ja as well. BLEU-4: each ja caption is read as one word "
        "(ja is written without spaces, and the COCO toolkit splits words at spaces), so the ja values are not word "
        "overlap.")


def test_the_analyze_summary_and_the_failure_status_carry_the_notes():
    table = _table()
    report = collection_report(table, ["BLEU-4", "CLIP-S", "MCS"], n_boot=20)
    assert report.summary.startswith("6 captions, 6 with human ratings. BLEU-4, CLIP-S were made for en; shown here "
                                     "for ja as well. BLEU-4: each ja caption is read as one word")
    english = collection_report(table[table["lang"] == "en"].copy(), ["BLEU-4", "CLIP-S", "MCS"], n_boot=20)
    assert english.summary == "3 captions, 3 with human ratings."
    from scoring.analysis.report import DISAGREE, failure_cases

    cases = failure_cases(table, ["BLEU-4", "CLIP-S", "MCS"], DISAGREE)
    mcs = filter_cases(cases, "MCS", ANY, ANY, 100)
    assert case_status(cases, mcs, len(mcs), "MCS", ANY, ANY).endswith("showing the first 6.")
    bleu_ja = filter_cases(cases, "BLEU-4", "ja", ANY, 100)
    assert case_status(cases, bleu_ja, len(bleu_ja), "BLEU-4", "ja", ANY).endswith(
        "BLEU-4 was made for en; shown here for ja as well. BLEU-4: each ja caption is read as one word (ja is "
        "written without spaces, and the COCO toolkit splits words at spaces), so the ja values are not word overlap.")
