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
