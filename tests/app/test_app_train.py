"""The Train tab's before/after table: every row says what it measures, which way is better,
its scale, and a change in words; no NaN and no bare delta reach the page."""
from __future__ import annotations

import math
from types import SimpleNamespace

from app.tabs.train import RESULT_COLUMNS, result_table
from scoring.training.measures import compare


def test_the_result_table_of_the_tiny_pr_mcs_run_explains_itself():
    before = {"drop_de": -158.6227, "drop_en": math.nan, "mcs_original": 0.0052}
    after = {"drop_de": 7.9765, "drop_en": -226.3085, "mcs_original": 0.0336}
    table = result_table(SimpleNamespace(comparison=compare(before, after, "pr-mcs")))
    assert list(table.columns) == RESULT_COLUMNS
    rows = table.set_index("held-out measure").to_dict("index")
    assert rows["drop_de"]["better"] == "higher ↑" and rows["drop_de"]["change"] == "+166.6 (better)"
    assert rows["drop_de"]["before"] == "-158.6" and rows["drop_de"]["after"] == "7.976"
    assert rows["drop_en"]["before"] == "undefined" and rows["drop_en"]["change"].startswith(
        "no change to show: before undefined (the original captions' MCS averages about 0")
    assert rows["mcs_original"]["better"] == "neither (context)"
    text = table.to_string().lower()
    assert "nan" not in text and "none" not in text


def test_the_learning_curve_plots_held_out_tau_c_against_ratings():
    from app.tabs.train import learning_curve_figure

    curve = {"unit": "ratings", "points": [{"budget": 507, "tau_c": 0.21}, {"budget": 2004, "tau_c": 0.33},
                                           {"budget": 8010, "tau_c": None}, {"budget": 31998, "tau_c": 0.52}]}
    figure = learning_curve_figure(SimpleNamespace(learning_curve=curve))
    (trace,) = figure.data
    assert list(trace.x) == [507, 2004, 31998] and list(trace.y) == [0.21, 0.33, 0.52]
    assert figure.layout.xaxis.title.text == "ratings" and figure.layout.xaxis.type == "log"
    assert learning_curve_figure(None).data == ()


def test_delete_names_the_version_only_when_the_job_registered_one():
    """A smoke run kept in scratch registers nothing: its Delete must not promise to delete a version."""
    from types import SimpleNamespace

    from app.tabs.train import delete_label

    assert delete_label(SimpleNamespace(metric_name=None)) == "Delete this job"
    assert delete_label(None) == "Delete this job"
    assert delete_label(SimpleNamespace(metric_name="PR-MCS@world-2026-11-26")) == \
        "Delete this job and its version PR-MCS@world-2026-11-26"
