"""Length buckets, the SPECS length switch, and the Plotly figures the app shows."""
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from scoring.analysis.correlation import correlation_table
from scoring.analysis.length import bucket_labels, length_bucket_table, length_switched_metric
from scoring.analysis.plots import (
    correlation_heatmap, length_bucket_lines, metric_vs_human_scatter, robustness_drop_bars,
)
from scoring.analysis.robustness import robustness_table


@pytest.fixture
def scored():
    rng = np.random.default_rng(0)
    n = 200
    lengths = rng.integers(5, 120, n)
    human = rng.normal(size=n)
    # CLIP-S tracks humans on short captions only, SPECS on long ones
    clip = np.where(lengths < 60, human + rng.normal(0, 0.3, n), rng.normal(size=n)) * 2.5
    specs = np.where(lengths >= 60, human + rng.normal(0, 0.3, n), rng.normal(size=n))
    return pd.DataFrame({"human": human, "CLIP-S": clip, "SPECS": specs, "n_tokens": lengths,
                         "lang": rng.choice(["en", "de"], n), "image_id": np.arange(n).astype(str),
                         "candidate": ["a caption"] * n})


def test_buckets_and_switch(scored):
    assert list(bucket_labels([0, 19, 20, 300], (0, 20, 60, float("inf")))) == ["0-19", "0-19", "20-59", "60+"]
    table = length_bucket_table(scored, ["CLIP-S", "SPECS"], edges=(0, 60, float("inf")))
    short = table[table["bucket"] == "0-59"].set_index("metric")
    long = table[table["bucket"] == "60+"].set_index("metric")
    assert short.loc["CLIP-S", "pearson"] > 0.8 > abs(short.loc["SPECS", "pearson"])
    assert long.loc["SPECS", "pearson"] > 0.8 > abs(long.loc["CLIP-S", "pearson"])
    combined = length_switched_metric(scored)
    scored["combined"] = combined
    overall = correlation_table(scored, ["CLIP-S", "SPECS", "combined"], n_boot=0).set_index("metric")
    assert overall.loc["combined", "pearson"] > max(overall.loc["CLIP-S", "pearson"], overall.loc["SPECS", "pearson"])
    with pytest.raises(ValueError, match="normalise"):
        length_switched_metric(scored, normalise="minmax")


def test_figures(scored):
    scatter = metric_vs_human_scatter(scored, "CLIP-S", jitter=0.1)
    assert isinstance(scatter, go.Figure) and len(scatter.data) == 2  # one trace per language
    assert "candidate" in scatter.data[0].hovertemplate
    correlations = correlation_table(scored, ["CLIP-S", "SPECS"], group_by=["lang"], n_boot=0)
    heat = correlation_heatmap(correlations, "pearson")
    assert heat.data[0].z.shape == (2, 2)
    # Named as the table names it, two decimals at a size a phone can read, the colour bar under the grid.
    assert heat.layout.title.text == "Pearson r by metric and language"
    assert all(len(t.split(".")[-1]) == 2 for t in heat.data[0].text.ravel() if t) and heat.data[0].textfont.size == 11
    assert heat.data[0].colorbar.orientation == "h"
    with pytest.raises(ValueError, match="lang"):
        correlation_heatmap(correlation_table(scored, ["CLIP-S"], n_boot=0))
    scores = pd.DataFrame({
        "lang": ["en", "en", "en", "de", "de", "de"], "metric": ["M"] * 6,
        "op": ["original", "removal", "jumble"] * 2, "score": [1.0, 0.5, 1.1, 1.0, 0.8, 0.9],
    })
    bars = robustness_drop_bars(robustness_table(scores))
    assert {trace.name for trace in bars.data} == {"en", "de"}
    lines = length_bucket_lines(length_bucket_table(scored, ["CLIP-S"]))
    assert isinstance(lines, go.Figure)


def test_drop_chart_clips_outliers_and_says_their_value():
    from scoring.analysis.plots import drop_axis_limit

    changes = [-5.0, -12.0, 3.0, -20.0, -8.0, 1.0, -15.0, -2.0, -6.0, -10.0, 4012.0]
    table = pd.DataFrame({"lang": ["en"], "metric": ["M"]}
                         | {f"op{i}_change": [v] for i, v in enumerate(changes)})
    limit = drop_axis_limit(pd.Series(changes))
    assert limit == pytest.approx(1.5 * 20.0)  # 90th percentile of |change| is 20
    bars = robustness_drop_bars(table, [f"op{i}" for i in range(len(changes))])
    assert tuple(bars.layout.yaxis.range) == pytest.approx((-33.0, 33.0))
    assert max(bars.data[0].y) == pytest.approx(30.0)  # the outlier's bar stops at the clip
    assert "+4012% (clipped)" in list(bars.data[0].text)
    assert "clipped at ±30%" in bars.layout.title.subtitle.text
    assert drop_axis_limit(pd.Series([-5.0, -12.0, 3.0])) is None  # nothing far out: no clipping


def test_every_drop_panel_names_its_operations():
    ops = ["repetition", "removal", "masking", "jumble", "substitution"]
    table = pd.DataFrame([{"lang": "en", "metric": m} | {f"{op}_change": -5.0 * (i + 1) for i, op in enumerate(ops)}
                          for m in ("CLIP-S", "PAC-S", "MCS", "PR-MCS")])
    bars = robustness_drop_bars(table, ops)
    axes = [bars.layout[name] for name in bars.layout if name.startswith("xaxis")]
    assert len(axes) == 6  # a grid of two rows of three panels for four metrics
    assert all(axis.showticklabels and axis.tickangle == -45 for axis in axes)


@pytest.mark.parametrize("metrics", [4, 17])
def test_drop_panels_keep_95_px_between_rows_whatever_their_number(metrics):
    """A fixed fraction of the height gave 17 metrics' panels a third of the chart and empty bands."""
    ops = ["repetition", "removal", "masking", "jumble", "substitution"]
    table = pd.DataFrame([{"lang": "en", "metric": f"M{k}"} | {f"{op}_change": -5.0 for op in ops}
                          for k in range(metrics)])
    bars = robustness_drop_bars(table, ops)
    layout = bars.layout
    plotted = layout.height - layout.margin.t - layout.margin.b
    rows = sorted({tuple(layout[name].domain) for name in layout if name.startswith("yaxis")}, reverse=True)
    assert len(rows) == -(-metrics // 3)
    gaps = [(upper[0] - lower[1]) * plotted for upper, lower in zip(rows, rows[1:])]
    assert all(g == pytest.approx(95, abs=1) for g in gaps), gaps
    panel = (rows[0][1] - rows[0][0]) * plotted
    assert panel >= 120, panel  # each panel keeps room for its bars
    assert layout.legend.y < 0  # under the panels
