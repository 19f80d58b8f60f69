"""Plotly figures over the analysis tables (the app's Analyze tab calls these).

Every function takes a table produced by this package (or the wide score table) and returns a
`plotly.graph_objects.Figure`; none reads files or the database.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from .correlation import COEFFICIENT_LABELS, kendall_tau


def metric_vs_human_scatter(
    table: pd.DataFrame,
    metric: str,
    *,
    human_col: str = "human",
    hover_cols: Sequence[str] = ("image_id", "candidate"),
    color_col: str | None = "lang",
    jitter: float = 0.0,
    seed: int = 0,
) -> go.Figure:
    """Metric score (x) against human score (y), hovering shows image and caption.

    Human scales are coarse (1-4, 1-5), so `jitter` adds seeded uniform noise of that
    half-width to the y position only (the hover still shows the true score).
    """
    missing = [c for c in [metric, human_col] if c not in table.columns]
    if missing:
        raise ValueError(f"missing column(s) {', '.join(missing)}")
    data = table.dropna(subset=[metric, human_col]).copy()
    data["_y"] = data[human_col].astype(float)
    if jitter:
        data["_y"] += np.random.default_rng(seed).uniform(-jitter, jitter, len(data))
    hover = [c for c in hover_cols if c in data.columns] + [human_col]
    color = color_col if color_col and color_col in data.columns and data[color_col].nunique() > 1 else None
    tau = kendall_tau(data[metric], data[human_col], "c") if len(data) > 1 else float("nan")
    figure = px.scatter(
        data, x=metric, y="_y", color=color, hover_data={c: True for c in hover} | {"_y": False},
        labels={"_y": human_col, metric: metric},
        # Two lines, so a phone's width shows the numbers; τc pooled over every language drawn
        # says so, beside a table that gives it per language.
        title=(f"{metric} vs. {human_col}<br><sup>n={len(data)}, Kendall τc={tau:.3f}"
               f"{f' over all {data[color].nunique()} languages' if color == color_col and color_col == 'lang' else ''}"
               "</sup>"),
    )
    figure.update_traces(marker={"size": 6, "opacity": 0.6})
    return figure


def robustness_drop_bars(robustness: pd.DataFrame, ops: Sequence[str] | None = None) -> go.Figure:
    """Grouped bars of % change per operation, one colour per language, one panel per metric.

    Takes `robustness_table(...)` output; bars below zero are drops (the metric noticed).
    """
    if ops is None:
        ops = [c[: -len("_change")] for c in robustness.columns if c.endswith("_change") and c != "average_change"]
    if not ops:
        raise ValueError("robustness table has no '<op>_change' columns")
    keys = [c for c in ("lang", "metric") if c in robustness.columns]
    long = robustness.melt(id_vars=keys, value_vars=[f"{op}_change" for op in ops], var_name="op", value_name="change")
    long["op"] = long["op"].str[: -len("_change")]
    # Metrics with no defined change anywhere (unavailable, or a zero original) would only add
    # empty panels.
    long = long.dropna(subset=["change"])
    if long.empty:
        return go.Figure(layout={"title": "No metric has a defined score change (unavailable, or zero on the originals)"})
    facet = "metric" if "metric" in long and long["metric"].nunique() > 1 else None
    wrap = 3  # three panels a row: their titles ("RefCLIP-S", "CapLens-R") stay apart on a phone
    panels = long["metric"].nunique() if facet else 1
    # A few outliers (UMIC-C off a near-zero original: thousands of %) would flatten every other
    # bar; the axis stops at the clip and those bars say their value on hover and above them.
    limit = drop_axis_limit(long["change"])
    long["shown"] = long["change"].clip(-limit, limit) if limit is not None else long["change"]
    long["clipped"] = [f"{v:+.0f}% (clipped)" if limit is not None and abs(v) > limit else "" for v in long["change"]]
    rows = -(-panels // wrap)
    height, top, bottom = 300 + 220 * rows, 100, 150
    plotted = height - top - bottom  # plotly gives spacing and the legend's place in fractions of this
    figure = px.bar(
        long, x="op", y="shown", color="lang" if "lang" in long else None, barmode="group",
        facet_col=facet, facet_col_wrap=wrap if facet else 0,
        # 95 px between rows: the slanted operation names, then the next panel's title
        facet_row_spacing=min(0.5 / max(rows - 1, 1), 95 / plotted),
        labels={"shown": "change (%)", "op": ""}, text="clipped",
        hover_data={"change": ":.2f", "shown": False, "clipped": False},
        height=height,
    )
    # A short title with the details under it, so that it fits a phone's width.
    figure.update_layout(
        title={"text": "Score change under perturbation",
               "subtitle": {"text": "negative = detected" + (f"; axis clipped at ±{limit:.0f}%" if limit is not None
                                                             else "")}},
        margin={"t": top, "r": 10, "b": bottom},
        # Under the panels, past the operation names, not beside them: on a phone a legend at the
        # side took a third of the width.
        legend={"orientation": "h", "yanchor": "top", "y": -80 / plotted, "x": 0, "title": None})
    figure.for_each_annotation(lambda a: a.update(text=a.text.split("=", 1)[-1], font_size=11))
    # Every panel names its operations, each of them: on a phone plotly kept them on the bottom
    # row only and dropped the ones that did not fit level.
    figure.update_xaxes(showticklabels=True, tickangle=-45, tickfont_size=10)
    if limit is not None:
        figure.update_yaxes(range=[-1.1 * limit, 1.1 * limit])
        figure.update_traces(textposition="inside", insidetextanchor="end", textfont_size=9)
    figure.add_hline(y=0, line_width=1, line_color="black")
    return figure


def drop_axis_limit(changes: pd.Series, quantile: float = 0.9, factor: float = 1.5) -> float | None:
    """Where a % change axis stops: `factor` times the `quantile` of the absolute changes
    (at least 10 %) when the largest lies beyond it, else None (no clipping needed)."""
    values = pd.to_numeric(changes, errors="coerce").abs().dropna()
    if values.empty:
        return None
    limit = max(factor * float(values.quantile(quantile)), 10.0)
    return limit if float(values.max()) > limit else None


def correlation_heatmap(correlations: pd.DataFrame, value: str = "kendall_c") -> go.Figure:
    """Metric x language heat map of one coefficient from `correlation_table(...)` output
    grouped by `lang` (other group columns are averaged over)."""
    missing = [c for c in ["metric", "lang", value] if c not in correlations.columns]
    if missing:
        raise ValueError(f"correlation table lacks column(s) {', '.join(missing)}; group it by 'lang'")
    grid = correlations.pivot_table(index="metric", columns="lang", values=value, aggfunc="mean")
    label = COEFFICIENT_LABELS.get(value, value)
    if grid.empty:  # every coefficient undefined (e.g. all human ratings equal): nothing to colour
        return go.Figure(layout={"title": f"No {label} is defined for any metric and language (see the status)"})
    # Two decimals at a fixed size, the colour bar under the grid and the languages above it, so
    # that on a phone (about 300 px) the cells keep the width and their numbers stay legible.
    figure = go.Figure(
        go.Heatmap(
            z=grid.to_numpy(), x=list(grid.columns), y=list(grid.index), colorscale="RdBu", zmid=0,
            text=np.vectorize(lambda v: "" if np.isnan(v) else f"{v:.2f}")(grid.to_numpy()),
            texttemplate="%{text}", textfont={"size": 11},
            colorbar={"title": {"text": label, "side": "top"}, "orientation": "h", "y": -0.02, "yanchor": "top",
                      "thickness": 12},
        )
    )
    figure.update_layout(title=f"{label} by metric and language", xaxis={"side": "top"},
                         margin={"l": 10, "r": 10, "t": 90, "b": 10}, height=200 + 24 * len(grid.index))
    return figure


def length_bucket_lines(buckets: pd.DataFrame, value: str = "pearson") -> go.Figure:
    """Correlation per caption-length bucket, one line per metric (SPECS Figure 3)."""
    missing = [c for c in ["bucket", "metric", value] if c not in buckets.columns]
    if missing:
        raise ValueError(f"bucket table lacks column(s) {', '.join(missing)}")
    figure = px.line(
        buckets, x="bucket", y=value, color="metric", markers=True, hover_data=["n"] if "n" in buckets else None,
        labels={"bucket": "caption length (tokens)", value: value}, title=f"{value} by caption length",
    )
    return figure
