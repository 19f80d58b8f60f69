"""The failure-case table as the tab shows it: the deciding columns first, and with any metric
each caption once, with its worst metric."""
from __future__ import annotations

import pandas as pd

from scoring.analysis.report import ANY, CASE_CELLS, case_cells, case_status, filter_cases


def cases() -> pd.DataFrame:
    """Three captions, worst first (as disagreements() orders them); caption 1 fails two metrics."""
    rows = [(1, "en", "CLIP-S", 0.9, 0.1, 0.8), (1, "en", "BLEU-4", 0.7, 0.1, 0.6), (2, "de", "CLIP-S", 0.2, 0.9, -0.5),
            (3, "en", "BLEU-4", 0.5, 0.2, 0.3), (2, "de", "BLEU-4", 0.6, 0.9, -0.2)]
    return pd.DataFrame([dict(caption_id=c, image_id=f"im{c}", candidate=f"caption {c}", lang=lang, op=None, metric=m,
                              **{"metric score": s, "human": h, "rank gap": g, "change %": None},
                              image_file=f"/x/{c}.png", references="") for c, lang, m, s, h, g in rows])


def test_any_metric_shows_each_caption_once_with_its_worst_metric():
    shown = filter_cases(cases(), ANY, ANY, ANY, 10)
    assert shown[["caption_id", "metric"]].values.tolist() == [[1, "CLIP-S"], [2, "CLIP-S"], [3, "BLEU-4"]]
    assert filter_cases(cases(), "BLEU-4", ANY, ANY, 10)["caption_id"].tolist() == [1, 3, 2]
    assert filter_cases(cases(), ANY, "de", ANY, 10)[["caption_id", "metric"]].values.tolist() == [[2, "CLIP-S"]]


def test_the_deciding_columns_come_first():
    shown = case_cells(filter_cases(cases(), ANY, ANY, ANY, 10))
    assert list(shown.columns) == ["metric", "lang", "metric score", "human", "rank gap", "candidate", "caption_id",
                                   "image_id"]  # no change % or operation: a disagreement has neither
    assert list(case_cells(cases(), compact=False).columns) == CASE_CELLS  # the API's rows keep one shape
    assert "image_file" not in shown.columns and shown.loc[0, "rank gap"] == 0.8


def test_perturbation_cases_put_the_change_and_the_operation_first():
    """A perturbation case has no human rating or rank gap: its change % and operation decide it,
    so they come right after the metric and language (in view on a 390 px phone)."""
    rows = pd.DataFrame({"caption_id": [1, 2], "image_id": [1, 1], "candidate": ["a b", "c d"], "lang": ["en", "de"],
                         "op": ["jumble", "removal"], "metric": ["MCS", "MCS"], "metric score": [0.51234, 0.4],
                         "human": [None, None], "rank gap": [None, None], "change %": [-0.04321, 1.0]})
    shown = case_cells(rows)
    assert list(shown.columns)[:6] == ["metric", "lang", "change %", "op", "metric score", "candidate"]
    assert "human" not in shown.columns and "rank gap" not in shown.columns
    assert shown.loc[0, "change %"] == -0.043 and shown.loc[1, "op"] == "removal"
    assert list(case_cells(rows.assign(**{"rank gap": [0.5, -0.2]})).columns)[:3] == ["metric", "lang", "metric score"]


def test_the_status_counts_captions_with_any_metric_and_cases_with_one():
    rows = cases()
    anything = filter_cases(rows, ANY, ANY, ANY, 2)
    assert case_status(rows, filter_cases(rows, ANY, ANY, ANY, len(rows)), len(anything), ANY, ANY, ANY) == (
        "3 caption(s), each once with its worst metric, of 5 cases over all metrics; showing the first 2.")
    bleu = filter_cases(rows, "BLEU-4", "en", ANY, len(rows))
    assert case_status(rows, bleu, len(bleu), "BLEU-4", "en", ANY) == (
        "2 case(s) with metric BLEU-4, language en, of 5 cases over all metrics; showing the first 2.")
