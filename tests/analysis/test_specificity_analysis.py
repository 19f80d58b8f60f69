"""SR_pos / SR_neg (SPECS eq. 1-2) over detail-unit triplets."""
import pandas as pd
import pytest

from scoring.analysis.specificity import specificity_rate, specificity_table


def test_rates_follow_the_equations():
    # positive: extension must score higher (strictly); 2 of 4
    assert specificity_rate([0.2, 0.3, 0.4, 0.5], [0.3, 0.3, 0.1, 0.6], "pos") == pytest.approx(0.5)
    # negative: extension must score lower; 1 of 2
    assert specificity_rate([0.5, 0.5], [0.4, 0.6], "neg") == pytest.approx(0.5)
    with pytest.raises(ValueError, match="kind must be 'pos' or 'neg', got 'other'"):
        specificity_rate([1], [1], "other")


def test_table_per_metric():
    triplets = pd.DataFrame({
        "metric": ["A"] * 4 + ["B"] * 4,
        "kind": ["pos", "pos", "neg", "neg"] * 2,
        "base": [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5],
        "extended": [0.6, 0.7, 0.4, 0.45, 0.4, 0.6, 0.6, 0.4],
    })
    table = specificity_table(triplets).set_index("metric")
    assert table.loc["A", "sr_pos"] == 1.0 and table.loc["A", "sr_neg"] == 1.0
    assert table.loc["B", "sr_pos"] == 0.5 and table.loc["B", "sr_neg"] == 0.5
    assert table.loc["B", "specificity"] == 0.5 and table.loc["A", "n_pos"] == 2
    with pytest.raises(ValueError, match="kind"):
        specificity_table(triplets.assign(kind="maybe"))

