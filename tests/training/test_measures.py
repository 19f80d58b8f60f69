"""Each held-out number of a run is named, with the direction that is better and its scale;
an undefined one (NaN) says why instead of showing NaN or a bare delta."""
from __future__ import annotations

import math

from scoring.training.measures import HIGHER, LOWER, NEITHER, compare, describe

# The tiny PR-MCS run of issue 25: drop_en is NaN before training.
BEFORE = {"drop_de": -158.6227, "drop_en": math.nan, "drop_mean": math.nan, "mcs_original": 0.0052}
AFTER = {"drop_de": 7.9765, "drop_en": -226.3085, "drop_mean": -109.1658, "mcs_original": 0.0336}


def test_pr_mcs_rows_name_the_measure_its_direction_and_why_a_nan_has_no_change():
    rows = {row["key"]: row for row in compare(BEFORE, AFTER, "pr-mcs")}
    assert list(rows) == ["drop_de", "drop_en", "drop_mean", "mcs_original"]
    de = rows["drop_de"]
    assert de["better"] == HIGHER and de["measure"].startswith("% fall of MCS from original to perturbed caption, de")
    assert "%" in de["scale"] and de["change"] == 7.9765 + 158.6227 and de["verdict"] == "better"
    en = rows["drop_en"]
    assert en["before"] is None and en["after"] == -226.3085 and en["change"] is None
    assert en["verdict"] == ("no change to show: before undefined (the original captions' MCS averages about 0 "
                             "in this language, so a % change is undefined)")
    assert rows["drop_mean"]["verdict"] == "no change to show: before undefined (a language's drop is undefined)"
    assert rows["mcs_original"]["better"] == NEITHER and rows["mcs_original"]["verdict"].startswith("moved (neither")
    assert not any(isinstance(v, float) and math.isnan(v) for row in rows.values() for v in row.values())


def test_lower_is_better_measures_and_recipe_specific_meanings():
    assert describe("mse", "caplens-r").better == LOWER and "human rating" in describe("mse", "caplens-r").name
    assert "teacher" in describe("mse", "mcs-teacher").name
    [row] = compare({"mse": 0.30}, {"mse": 0.20}, "caplens-r")
    assert row["verdict"] == "better" and abs(row["change"] + 0.10) < 1e-12
    [row] = compare({"R@1": 0.5}, {"R@1": 0.25}, "pac-s")
    assert row["verdict"] == "worse" and describe("R@1").scale == "0 to 1"
    assert describe("pairwise_shape").name.startswith("pairwise accuracy against shape negatives")
    assert compare({"tau_c": 0.1}, {"tau_c": 0.1})[0]["verdict"] == "unchanged"


def test_umic_kinds_and_caplens_r_slices_are_named_with_higher_better():
    """The rows a new user saw as "neither (context)" with their raw key (issue 25): UMIC's
    negative kinds have hyphens, CapLens-R reports tau_c per language and caption style."""
    kinds = describe("pairwise_keyword-substitution")
    assert kinds.better == HIGHER and kinds.name.startswith("pairwise accuracy against keyword-substitution negatives")
    assert describe("pairwise_repeat-remove").undefined == "no held-out repeat-remove negatives"
    german, long = describe("tau_c_de", "caplens-r"), describe("tau_c_long", "caplens-r")
    assert german.name == "Kendall tau_c between the scores and the mean human ratings, German captions only"
    assert long.name.endswith("long captions only") and long.better == german.better == HIGHER
    assert german.scale == "−1 to 1 (0 = no relation)"
    [row] = compare({"tau_c_en": 0.30}, {"tau_c_en": 0.25}, "caplens-r")
    assert row["verdict"] == "worse"
    [row] = compare({"pairwise_repeat-remove": 0.5}, {"pairwise_repeat-remove": 0.75}, "umic")
    assert row["verdict"] == "better" and row["change"] == 0.25
