"""PR-MCS Table 7 layout on a tiny example computed by hand."""
import re

import numpy as np
import pandas as pd
import pytest

from scoring.analysis.robustness import format_table7, paired_changes, percent_change, robustness_table


def _scores():
    rows = []
    # English, metric M: originals 1.0 and 3.0 (mean 2.0)
    for item, score in (("a", 1.0), ("b", 3.0)):
        rows.append(dict(item_id=item, lang="en", metric="M", op="original", score=score))
    # repetition: 1.2, 2.8 -> mean 2.0 (0 %); removal: 0.5, 1.5 -> 1.0 (-50 %)
    # masking: 2.2, 2.6 -> 2.4 (+20 %, a miss, must not offset drops)
    for op, scores in (("repetition", (1.2, 2.8)), ("removal", (0.5, 1.5)), ("masking", (2.2, 2.6))):
        for item, score in zip("ab", scores):
            rows.append(dict(item_id=item, lang="en", metric="M", op=op, score=score))
    # a no-op perturbation that must be ignored
    rows.append(dict(item_id="a", lang="en", metric="M", op="removal", score=100.0, noop=True))
    # German: original 0.5, jumble 0.25 (-50 %)
    rows.append(dict(item_id="c", lang="de", metric="M", op="original", score=0.5))
    rows.append(dict(item_id="c", lang="de", metric="M", op="Jumble", score=0.25))
    frame = pd.DataFrame(rows)
    frame["noop"] = frame["noop"].fillna(False).astype(bool)
    return frame


def test_table7_matches_hand_computation():
    table = robustness_table(_scores()).set_index(["lang", "metric"])
    english = table.loc[("en", "M")]
    assert english["original"] == pytest.approx(2.0)
    assert english["repetition"] == pytest.approx(2.0) and english["repetition_change"] == pytest.approx(0.0)
    assert english["removal"] == pytest.approx(1.0) and english["removal_change"] == pytest.approx(-50.0)
    assert english["masking"] == pytest.approx(2.4) and english["masking_change"] == pytest.approx(20.0)
    # Average = mean of the op means, as in the paper: (2.0 + 1.0 + 2.4) / 3 = 1.8 -> -10 %
    assert english["average"] == pytest.approx(1.8)
    assert english["average_change"] == pytest.approx(-10.0)
    # only negative changes count toward robustness: (0 + 50 + 0) / 3
    assert english["robustness"] == pytest.approx(50 / 3)
    assert english["missed_ops"] == 2
    assert english["n_original"] == 2
    german = table.loc[("de", "M")]
    assert german["jumble_change"] == pytest.approx(-50.0)
    assert german["robustness"] == pytest.approx(50.0)


def test_paper_row_is_reproduced():
    """*MCS, English, PR-MCS Table 7: Average 1.05808 (-3.27%) from the five op means."""
    op_means = {"repetition": 1.0963, "removal": 1.0177, "masking": 0.987, "jumble": 1.0966, "substitution": 1.0928}
    rows = [dict(lang="en", metric="*MCS", op="original", score=1.0939)]
    rows += [dict(lang="en", metric="*MCS", op=op, score=mean) for op, mean in op_means.items()]
    table = robustness_table(pd.DataFrame(rows))
    assert table.loc[0, "average"] == pytest.approx(1.05808)
    assert round(table.loc[0, "average_change"], 2) == -3.27
    assert round(table.loc[0, "masking_change"], 2) == -9.77
    assert list(format_table7(table).columns) == [
        "lang", "metric", "Original", "Repetition", "Removal", "Masking", "Jumble", "Substitution", "Average", "Robustness"
    ]
    assert format_table7(table).loc[0, "Masking"] == "0.9870 (-9.77%)"


def test_formatting_and_errors():
    formatted = format_table7(robustness_table(_scores()))
    assert formatted.set_index("lang").loc["en", "Removal"] == "1.0000 (-50.00%)"
    assert formatted.set_index("lang").loc["de", "Removal"] == "-"
    with pytest.raises(ValueError, match="no perturbed"):
        robustness_table(pd.DataFrame({"lang": ["en"], "metric": ["M"], "op": ["original"], "score": [1.0]}))
    with pytest.raises(ValueError, match="column"):
        robustness_table(pd.DataFrame({"score": [1.0]}))
    assert percent_change(0.0, 1.0) != percent_change(0.0, 1.0)  # nan
    # BLEU's toolkit smoothing leaves originals below 5.6e-4 where no 4-gram matches: a % change
    # off them is undefined too (3.9e-5 -> 3.2e-5 is the COCO BLEU-4 of "a red ball on green grass
    # under a blue sky" and its repetition, which share no 4-gram with their references).
    assert np.isnan(percent_change(3e-9, 2e-8))
    assert np.isnan(percent_change(3.9281465085347674e-05, 3.170233138218017e-05))
    assert percent_change(0.002, 0.001) == pytest.approx(-50.0)
    assert percent_change(0.01, 0.005) == pytest.approx(-50.0)


def test_paired_changes_link_each_perturbation_to_its_original():
    changes = paired_changes(_scores()[lambda f: ~f["noop"]])
    removal_a = changes[(changes["op"] == "removal") & (changes["item_id"] == "a")]
    assert removal_a["change"].iloc[0] == pytest.approx(-50.0)


def test_detection_rates_count_only_drops():
    from scoring.analysis.robustness import detection_rates

    rates = detection_rates(_scores()).set_index(["lang", "op"])
    # removal: a 1.0 -> 0.5, b 3.0 -> 1.5 both drop; masking: a rises, b falls; repetition: a rises, b falls
    assert rates.loc[("en", "removal"), "detected"] == 1.0 and rates.loc[("en", "removal"), "n"] == 2
    assert rates.loc[("en", "masking"), "detected"] == 0.5
    assert rates.loc[("de", "jumble"), "detected"] == 1.0


def test_each_op_is_compared_with_the_originals_of_the_captions_it_changed():
    """A no-op perturbation leaves its original out of that op's comparison, on both sides."""
    rows = [dict(item_id="a", op="original", score=1.0), dict(item_id="b", op="original", score=3.0),
            dict(item_id="a", op="removal", score=0.5), dict(item_id="b", op="removal", score=3.0, noop=True),
            dict(item_id="a", op="permutation", score=0.9), dict(item_id="b", op="jumble", score=2.7)]
    frame = pd.DataFrame(rows).assign(lang="en", metric="M")
    frame["noop"] = frame["noop"].fillna(False).astype(bool)
    row = robustness_table(frame).iloc[0]
    assert row["original"] == pytest.approx(2.0)
    # Removal changed only "a": 0.5 against a's 1.0 (-50 %), not against the mean 2.0 (-75 %).
    assert row["removal_original"] == pytest.approx(1.0) and row["removal_n"] == 1
    assert row["removal_change"] == pytest.approx(-50.0)
    # "permutation" is jumble's alias: one column, both captions.
    assert "permutation" not in row.index and row["jumble_n"] == 2
    assert row["jumble_change"] == pytest.approx(-10.0)
    # Average: (0.5 + 1.8) / 2 against (1.0 + 2.0) / 2.
    assert row["average_change"] == pytest.approx(100 * (1.15 - 1.5) / 1.5)
    # Without item_id the no-op rows cannot be paired: refused rather than compared unevenly.
    with pytest.raises(ValueError, match="item_id"):
        robustness_table(frame.drop(columns=["item_id"]))


def test_a_change_measured_against_only_the_changed_captions_names_its_base():
    """Paired rows: substitution changed caption 2 only, so its change is against caption 2's
    original (0.4), not the Original column's mean of both (0.7); the cell says so, where a
    new user read '0.4000 (+0.00%)' beside 'Original 0.7000' as a wrong number."""
    rows = [dict(lang="en", metric="M", op="original", item_id=1, score=1.0),
            dict(lang="en", metric="M", op="original", item_id=2, score=0.4),
            dict(lang="en", metric="M", op="substitution", item_id=2, score=0.4),
            dict(lang="en", metric="M", op="removal", item_id=1, score=0.5),
            dict(lang="en", metric="M", op="removal", item_id=2, score=0.2)]
    cells = format_table7(robustness_table(pd.DataFrame(rows))).loc[0]
    assert cells["Original"] == "0.7000"
    assert cells["Substitution"] == "0.4000 (+0.00% vs 0.4000)"
    assert cells["Removal"] == "0.3500 (-50.00%)"  # against both captions' originals: no base named
    # The reading printed under the app's table quotes a cell of this very shape.
    from scoring.analysis.robustness import TABLE7_READING

    shape = r"\d\.\d{4} \([+-]\d+\.\d{2}% vs \d\.\d{4}\)"
    assert re.fullmatch(shape, cells["Substitution"])
    assert re.fullmatch(shape, re.search(r'"([^"]+)"', TABLE7_READING).group(1))


def test_the_zero_rule_at_its_edges():
    """No change in % off a missing, infinite or ~0 original; 1e-3 itself is a number."""
    from scoring.analysis.robustness import NEGLIGIBLE_ORIGINAL, undefined_change

    assert undefined_change(None) and undefined_change(float("inf")) and undefined_change(float("nan"))
    assert undefined_change(-5e-4) and not undefined_change(-2e-3)
    assert not undefined_change(NEGLIGIBLE_ORIGINAL)
    assert percent_change(NEGLIGIBLE_ORIGINAL, 2 * NEGLIGIBLE_ORIGINAL) == pytest.approx(100.0)


def test_scores_read_as_text_and_a_missing_noop_flag_counts_as_a_change():
    """Scores stored as text are numbers, an unscorable one ("n/a") is left out, a row with an
    empty field elsewhere (model) still counts, and a missing no-op flag is a perturbation."""
    rows = [dict(lang="en", metric="M", op="original", item_id=1, score="1.0", noop=None, model=None),
            dict(lang="en", metric="M", op="original", item_id=2, score="0.5", noop=False, model="m"),
            dict(lang="en", metric="M", op="removal", item_id=1, score="0.5", noop=None, model=None),
            dict(lang="en", metric="M", op="removal", item_id=2, score="n/a", noop=False, model="m")]
    table = robustness_table(pd.DataFrame(rows)).loc[0]
    assert table["original"] == pytest.approx(0.75) and table["n_original"] == 2
    assert table["removal"] == pytest.approx(0.5) and table["removal_original"] == pytest.approx(1.0)
    assert table["removal_change"] == pytest.approx(-50.0)


def test_paired_views_name_what_they_lack_and_follow_the_item_column():
    from scoring.analysis.robustness import detection_rates

    with pytest.raises(ValueError, match=r"^paired changes need column\(s\) item_id, score$"):
        paired_changes(pd.DataFrame({"lang": ["en"], "metric": ["M"], "op": ["original"]}))
    renamed = _scores().rename(columns={"item_id": "caption"})
    rates = detection_rates(renamed, item_col="caption").set_index(["lang", "op"])
    assert rates.loc[("en", "removal"), "detected"] == 1.0 and rates.loc[("en", "masking"), "detected"] == 0.5
    unpaired = pd.DataFrame([dict(lang="en", metric="M", op="removal", item_id="a", score=0.5, noop=None)])
    with pytest.raises(ValueError, match="^no perturbed caption could be paired with its original$"):
        detection_rates(unpaired)
    # a missing no-op flag is a perturbation here too
    flagged = _scores().assign(noop=lambda f: f["noop"].astype(object).where((f["op"] != "removal") | f["noop"], None))
    assert detection_rates(flagged).set_index(["lang", "op"]).loc[("en", "removal"), "n"] == 2


def test_table7_edges_robustness_ties_and_tables_without_originals_or_flags():
    from scoring.analysis.robustness import detection_rates

    formatted = format_table7(robustness_table(_scores())).set_index("lang")
    # the mean fall over ops, a rise counting 0: repetition 0 %, removal -50 %, masking +20 % -> 50 / 3
    assert formatted.loc["en", "Robustness"] == "16.67"
    rows = [dict(lang="en", metric="Z", op="original", item_id=1, score=0.0),
            dict(lang="en", metric="Z", op="removal", item_id=1, score=0.2)]
    zero = format_table7(robustness_table(pd.DataFrame(rows))).loc[0]
    assert zero["Removal"] == "-"  # a change off a zero original is no number
    with pytest.raises(ValueError, match=r"^no original captions in the table \(op == 'original'\)$"):
        robustness_table(pd.DataFrame(rows[1:]))
    tie = pd.DataFrame([dict(lang="en", metric="M", op="original", item_id=1, score=0.5),
                        dict(lang="en", metric="M", op="removal", item_id=1, score=0.5)])  # no noop column
    assert detection_rates(tie).loc[0, "detected"] == 0.0  # equal to its original: not noticed


def test_a_group_without_originals_is_skipped_and_the_next_ones_kept():
    rows = [dict(lang="de", metric="M", op="removal", item_id=9, score=0.1),  # no German original
            dict(lang="en", metric="M", op="original", item_id=1, score=1.0),
            dict(lang="en", metric="M", op="removal", item_id=1, score=0.5)]
    table = robustness_table(pd.DataFrame(rows))
    assert table["lang"].tolist() == ["en"] and table.loc[0, "removal_change"] == pytest.approx(-50.0)
