"""Failure-case rankings on hand-made collection tables."""
import pandas as pd
import pytest

from scoring.analysis.failures import CASE_COLUMNS, disagreements, unmoved


def table() -> pd.DataFrame:
    rows = [  # caption_id, kind, parent, op, lang, human, metric
        (1, "candidate", None, "original", "en", 0.9, 0.1),   # metric underrates the best
        (2, "candidate", None, "original", "en", 0.5, 0.5),
        (3, "candidate", None, "original", "en", 0.1, 0.9),   # metric overrates the worst
        (4, "candidate", None, "original", "de", 0.2, 0.2),
        (5, "candidate", None, "original", "de", 0.8, 0.8),   # agrees within German
        (6, "perturbed", 1, "jumble", "en", None, 0.1),       # no change: missed
        (7, "perturbed", 2, "removal", "en", None, 0.25),     # -50 %
        (8, "perturbed", 3, "masking", "en", None, 0.99),     # +10 %: rose
        (9, "candidate", None, "original", "en", None, 0.3),  # unrated: not a disagreement
    ]
    frame = pd.DataFrame(rows, columns=["caption_id", "kind", "parent_caption_id", "op", "lang", "human", "M"])
    frame["image_id"] = "img"
    frame["image_file"] = "img.png"
    frame["candidate"] = [f"caption {i}" for i in frame["caption_id"]]
    frame["references"] = ""
    return frame


def test_disagreements_rank_the_largest_rank_gaps_first():
    cases = disagreements(table(), ["M"])
    assert list(cases["caption_id"][:2]) == [1, 3] or list(cases["caption_id"][:2]) == [3, 1]
    assert list(cases["caption_id"][2:]) == [2, 4, 5]
    gaps = cases.set_index("caption_id")["rank gap"]
    assert gaps[3] == pytest.approx(2 / 3) and gaps[1] == pytest.approx(-2 / 3)  # + overrates, - underrates
    assert gaps[[2, 4, 5]].tolist() == [0, 0, 0]
    assert set(CASE_COLUMNS) <= set(cases.columns)


def test_unmoved_puts_the_smallest_absolute_change_first():
    moved = unmoved(table(), ["M"])
    assert list(moved["caption_id"]) == [6, 8, 7]
    assert moved["change %"].tolist() == pytest.approx([0.0, 10.0, -50.0])
    assert moved.iloc[0]["candidate"] == "caption 6"


def test_unmoved_ranks_a_large_rise_after_a_small_drop_and_undefined_changes_last():
    rows = table()
    extra = pd.DataFrame([
        (10, "candidate", None, "original", "en", None, 0.0),   # an original scored 0
        (11, "perturbed", 10, "removal", "en", None, 0.2),     # change undefined
        (12, "perturbed", 2, "jumble", "en", None, 0.49),      # -2 %
        (13, "perturbed", 2, "repetition", "en", None, 11.17),  # +2134 %: moved a lot
    ], columns=["caption_id", "kind", "parent_caption_id", "op", "lang", "human", "M"])
    extra["image_id"], extra["image_file"], extra["references"] = "img", "img.png", ""
    extra["candidate"] = [f"caption {i}" for i in extra["caption_id"]]
    moved = unmoved(pd.concat([rows, extra], ignore_index=True), ["M"])
    assert list(moved["caption_id"]) == [6, 12, 8, 7, 13, 11]
    assert moved["change %"].iloc[4] == pytest.approx(2134.0)


def test_nothing_to_rank_gives_an_empty_table_with_the_case_columns():
    only_perturbed = table()[table()["kind"] == "perturbed"]
    assert disagreements(only_perturbed, ["M"]).empty
    assert unmoved(table()[table()["kind"] != "perturbed"], ["M"]).columns.tolist() == CASE_COLUMNS
