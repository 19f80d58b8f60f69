"""A collection whose rated captions all have the same mean human rating: the correlations are
undefined, which the report says, and the heat map is an empty figure instead of a crash
("cannot call `vectorize` on size 0 inputs")."""
from __future__ import annotations

import pandas as pd

from scoring.analysis import plots
from scoring.analysis.report import collection_report, constant_rating_languages, correlation_cells


def collection_table(human_en, human_de) -> pd.DataFrame:
    rows = [{"caption_id": i, "kind": "candidate", "lang": lang, "human": h, "CLIP-S": 0.1 * (i + 1),
             "parent_caption_id": None, "op": None}
            for i, (lang, h) in enumerate([("en", h) for h in human_en] + [("de", h) for h in human_de])]
    return pd.DataFrame(rows)


def test_all_equal_ratings_give_a_clear_report_and_an_empty_heat_map():
    report = collection_report(collection_table([0.5] * 4, []), ["CLIP-S"], n_boot=20)
    assert report.correlations["kendall_c"].isna().all()
    assert "In en every rated caption has the same mean human rating" in report.summary
    assert correlation_cells(report.correlations)["Kendall τc"].tolist() == ["—"]
    figure = plots.correlation_heatmap(report.correlations, "kendall_c")
    assert not figure.data and "No Kendall τc is defined" in figure.layout.title.text


def test_one_flat_language_leaves_the_others_measured():
    table = collection_table([0.5] * 3, [0.1, 0.4, 0.9])
    assert constant_rating_languages(table) == ["en"]
    report = collection_report(table, ["CLIP-S"], n_boot=20)
    figure = plots.correlation_heatmap(report.correlations, "kendall_c")
    assert list(figure.data[0].x) == ["de"]  # the flat language has no column of its own
    assert figure.data[0].z[0][0] == 1.0  # CLIP-S rises with the German ratings
    assert "In en every" in report.summary and "de" not in report.summary.split("In ", 1)[1].split(" every")[0]
