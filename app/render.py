"""Turning library results into what Gradio components display, with user text kept as text.

Rule for the whole app: captions, file names, user names and any other user-supplied text
go only into components that render plain text (Textbox, Dataframe "str" cells,
HighlightedText, JSON). Never into Markdown or HTML. Plotly hover labels interpret a few
HTML-like tags, so user text is escaped before it reaches a figure.
"""
from __future__ import annotations

import html
from typing import Iterable, Sequence

import pandas as pd
import plotly.graph_objects as go

CHANGED = "changed"


def plotly_text(text: str, limit: int = 120) -> str:
    """User text made inert for Plotly labels (which understand <br>, <b>, <a> …)."""
    shortened = text if len(text) <= limit else text[: limit - 1] + "…"
    return html.escape(shortened, quote=True)


def highlight_spans(text: str, spans: Iterable[tuple[int, int]], label: str = CHANGED) -> list[tuple[str, str | None]]:
    """Split `text` into HighlightedText segments, labelling the character spans that changed.

    Overlapping or out-of-range spans are clipped and merged, so a faulty span never hides
    or duplicates part of the caption.
    """
    clean = sorted((max(0, s), min(len(text), e)) for s, e in spans if e > s)
    merged: list[tuple[int, int]] = []
    for start, end in clean:
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    segments: list[tuple[str, str | None]] = []
    cursor = 0
    for start, end in merged:
        if start > cursor:
            segments.append((text[cursor:start], None))
        segments.append((text[start:end], label))
        cursor = end
    if cursor < len(text) or not segments:
        segments.append((text[cursor:], None))
    return segments


def format_score(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def percent_change(before: float | None, after: float | None) -> float | None:
    """Relative change in %, as PR-MCS Table 7 prints it; None when undefined."""
    if before is None or after is None or before == 0:
        return None
    return (after - before) / abs(before) * 100.0


def availability_frame(rows: Sequence[dict]) -> pd.DataFrame:
    """One row per metric: backbone and whether it ran (or why not)."""
    return pd.DataFrame(rows, columns=["metric", "backbone", "status"])


def scores_bar_chart(frame: pd.DataFrame, metric_columns: Sequence[str], title: str) -> go.Figure:
    """Grouped bars: one group per metric, one bar per scored (image, caption) row."""
    fig = go.Figure()
    for _, row in frame.iterrows():
        values = [row.get(m) for m in metric_columns]
        if all(v is None or pd.isna(v) for v in values):
            continue
        fig.add_bar(
            name=str(row["#"]),
            x=list(metric_columns),
            y=[None if v is None or pd.isna(v) else v for v in values],
            hovertext=[plotly_text(f"{row['image']} · {row['caption']}")] * len(metric_columns),
            hovertemplate="%{x}: %{y:.4f}<br>%{hovertext}<extra>#%{fullData.name}</extra>",
        )
    fig.update_layout(
        barmode="group",
        title=title,
        xaxis_title="metric",
        yaxis_title="score",
        legend_title="row",
        margin=dict(l=40, r=10, t=50, b=40),
        height=380,
    )
    return fig


def drop_bar_chart(rows: Sequence[dict], title: str) -> go.Figure:
    """Bars of % change per metric and operation (negative = the metric noticed the damage)."""
    fig = go.Figure()
    ops = list(dict.fromkeys(r["operation"] for r in rows))
    for op in ops:
        mine = [r for r in rows if r["operation"] == op]
        fig.add_bar(name=op, x=[r["metric"] for r in mine], y=[r["change %"] for r in mine])
    fig.update_layout(
        barmode="group",
        title=title,
        xaxis_title="metric",
        yaxis_title="change vs original (%)",
        margin=dict(l=40, r=10, t=50, b=40),
        height=380,
    )
    return fig
