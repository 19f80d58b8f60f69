"""Turning library results into what Gradio components display, with user text kept as text.

Rule for the whole app: captions, file names, user names and any other user-supplied text
go only into components that render plain text (Textbox, Dataframe "str" cells,
HighlightedText, JSON). Never into Markdown or HTML. Plotly hover labels interpret a few
HTML-like tags, so user text is escaped before it reaches a figure.

Two kinds of Dataframe cell are HTML, and both are built here only: a picture (`picture_cell`:
an <img> of a data URI the library made from pixels, checked to hold nothing else) and a
status icon (`status_cell`: a fixed icon whose tooltip is the status, HTML-escaped into an
attribute, where it can only be text).
"""
from __future__ import annotations

import html
import re
from typing import Iterable, Sequence

import pandas as pd
import plotly.graph_objects as go

from scoring.analysis.correlation import COEFFICIENT_LABELS
from scoring.perturb.ops import Perturbation, removed_words
from scoring.perturb.tokenize import joiner

CHANGED = "changed"
REMOVED = "removed"
REMOVAL_MARK = "⌫"


def plotly_text(text: str, limit: int = 120) -> str:
    """User text made inert for Plotly labels (which understand <br>, <b>, <a> …)."""
    shortened = text if len(text) <= limit else text[: limit - 1] + "…"
    return html.escape(shortened, quote=True)


def inert_captions(table: pd.DataFrame) -> pd.DataFrame:
    """Copy of `table` whose `candidate` captions are escaped for Plotly hover labels."""
    safe = table.copy()
    safe["candidate"] = safe["candidate"].map(plotly_text)
    return safe


def struck(text: str) -> str:
    """``text`` struck through in plain text (a combining long stroke after each character), so
    it shows in any component without markup."""
    return "".join(character + "\u0336" for character in text)


def highlight_spans(text: str, spans: Iterable[tuple[int, int]], label: str = CHANGED,
                    mark_removals: bool = False, removed: Sequence[str] = (), separator: str = " "
                    ) -> list[tuple[str, str | None]]:
    """Split `text` into HighlightedText segments, labelling the character spans that changed.

    Overlapping or out-of-range spans are clipped and merged, so a faulty span never hides
    or duplicates part of the caption. A zero-width span marks where words were removed;
    with `mark_removals` it shows as a segment labelled REMOVED: the k-th one shows `removed[k]`
    (the words removed there) struck through, or REMOVAL_MARK when they are not given (these
    segments are then the only text not in `text`).
    """
    clipped = [(min(max(0, s), len(text)), min(max(0, e), len(text))) for s, e in spans]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(span for span in clipped if span[1] > span[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    removals = sorted({s for s, e in clipped if s == e and not any(a < s < b for a, b in merged)}) if mark_removals else []
    cuts = sorted(merged + [(r, r) for r in removals])
    segments: list[tuple[str, str | None]] = []
    cursor, removal = 0, 0
    for start, end in cuts:
        if start > cursor:
            segments.append((text[cursor:start], None))
        if start == end:
            gone = removed[removal] if removal < len(removed) and len(removed) == len(removals) else ""
            # Kept apart from the kept words by the language's separator: after it, or before it at the end.
            shown = (struck(gone) + separator if start < len(text) else separator + struck(gone)) if gone \
                else REMOVAL_MARK
            segments.append((shown, REMOVED))
            removal += 1
        else:
            segments.append((text[start:end], label))
        cursor = max(cursor, end)
    if cursor < len(text) or not segments:
        segments.append((text[cursor:], None))
    return segments


def perturbation_segments(perturbation: Perturbation) -> list[tuple[str, str | None]]:
    """A perturbed caption for HighlightedText: changed words marked, removed ones struck through."""
    return highlight_spans(perturbation.text, perturbation.changed_spans, mark_removals=True,
                           removed=removed_words(perturbation), separator=joiner(perturbation.lang))


# Before anything is scored a table shows these headers (Gradio's default would be "1 | 2 | 3").
PICTURE = "picture"
PAIR_COLUMNS = ["#", PICTURE, "image", "caption", "lang", "truncated by"]
PAIR_DATATYPES = ["str", "html", "str", "str", "str", "str"]
# The status as an icon (its words in the tooltip) beside the metric, one "#n" column per pair
# after it, then the backbone and the status in words (for a phone, where nothing hovers).
METRIC_ROW_COLUMNS = ["metric", "status", "backbone", "status in words"]
# Text symbols (not emoji, which a machine without an emoji font draws as empty boxes), coloured.
STATUS_ICONS = {"ok": ("✓", "#15803d"), "note": ("⚠", "#b45309"), "unavailable": ("✗", "#b91c1c")}
_DATA_URI = re.compile(r"data:image/(jpeg|png);base64,[A-Za-z0-9+/]+=*")
TABLE7_COLUMNS = ["metric", "Original", "Average", "Robustness"]  # one column per operation goes before Average
# The Perturbation lab's table: Table 7 with the Score tab's status icon and words.
LAB_COLUMNS = ["metric", "status", *TABLE7_COLUMNS[1:], "status in words"]
CORRELATION_COLUMNS = ["lang", "metric", "n", *COEFFICIENT_LABELS.values()]


def empty_table(columns: Sequence[str]) -> pd.DataFrame:
    """A table with no rows yet and the headers it will have."""
    return pd.DataFrame(columns=list(columns))


def format_score(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def rounded_table(table: pd.DataFrame | None, digits: int = 4) -> pd.DataFrame | None:
    """A result table as shown: floats to `digits` places (the CSV download keeps them all)."""
    if table is None:
        return None
    shown = table.copy()
    for column in shown.select_dtypes(include="float").columns:
        shown[column] = shown[column].round(digits)
    return shown


def short_image_name(name: str, limit: int = 28) -> str:
    """An image's name for a table cell: a stored image's content-hash name (64 hex digits) as
    its first 12 digits, and any other name over `limit` characters as its start and end
    around "…", keeping the extension, so a long name cannot widen the table."""
    name = str(name or "")
    stem, dot, suffix = name.rpartition(".") if "." in name else (name, "", "")
    if len(stem) == 64 and all(c in "0123456789abcdef" for c in stem.lower()):
        return f"{stem[:12]}…{dot}{suffix}"
    if len(name) <= limit:
        return name
    tail = f"{dot}{suffix}" if len(suffix) <= 5 else ""
    keep = limit - len(tail) - 1
    core = stem if tail else name
    return f"{core[: keep - keep // 3]}…{core[len(core) - keep // 3:]}{tail}"


# Where a file name may wrap besides its spaces and hyphens: after an underscore (a browser
# never breaks there, so "sunset_panorama_IMG8842.png" broke inside "panorama" at the edge of a
# 390 px phone's image column) and after short_image_name's "…" (so a stored image's shortened
# hash may wrap before its extension).
# A zero-width space marks the place; a part too long for the column still breaks where it must.
NAME_BREAKS = re.compile(r"([_…])(?=.)")
WORD_BREAK = "\u200b"


def wrappable_name(name: str) -> str:
    """`name` for a table cell, with a zero-width space after each underscore and "…" (not at
    its end), so that it wraps between its parts."""
    return NAME_BREAKS.sub(rf"\1{WORD_BREAK}", name)


def column_widths(columns: Sequence[str], wide: Sequence[str] = ("status",),
                  icons: Sequence[str] = ()) -> list[str]:
    """Pixel widths for a Dataframe's columns that fit each header's longest word, so headers
    such as "Robustness" never break mid-word; score cells ("0.5327 (-12.34%)") fit too,
    `wide` columns (free text) get room to wrap, and `icons` columns (a `status_cell`) fit
    their header."""
    widths = []
    for column in columns:
        if column in icons:
            widths.append("72px")
        elif column in wide:
            widths.append("280px")
        else:
            longest = max((len(word) for word in str(column).split()), default=1)
            widths.append(f"{max(16, longest) * 8 + 28}px")
    return widths


def picture_cell(uri: str | None) -> str:
    """A picture for an "html" Dataframe cell: `uri` must be a base64 JPEG/PNG data URI (the
    library's `thumbnail_data_uri`), so the cell holds nothing but the image; "" without one."""
    if not uri:
        return ""
    if not _DATA_URI.fullmatch(uri):
        raise ValueError("a picture cell takes a base64 image data URI only")
    return f'<img src="{uri}" alt="" style="max-height:56px;max-width:72px;display:block">'


def status_kind(status: str) -> str:
    """"ok" (available), "note" (available, but with a caveat: not meaningful, or needs an input
    these rows lack) or "unavailable"."""
    if status.startswith("unavailable"):
        return "unavailable"
    return "ok" if status == "available" else "note"


def status_cell(status: str) -> str:
    """The status as an icon for an "html" Dataframe cell, its words as the tooltip."""
    words = html.escape(status, quote=True)
    icon, colour = STATUS_ICONS[status_kind(status)]
    return f'<span title="{words}" aria-label="{words}" style="color:{colour};font-weight:bold">{icon}</span>'


_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~])")


def md_escape(text: str) -> str:
    """`text` shown as itself in Markdown: each character Markdown reads as markup backslash-escaped."""
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", text)


def status_notes(availability: Sequence[dict]) -> str:
    """Markdown: one line per status that is not plain "available", its icon, the metrics that
    have it and the status in words (escaped: a reason can quote a caption). Metrics with the same
    words share a line: captions in several languages gave sixteen lines of one note."""
    by_words: dict[str, list[str]] = {}
    for row in availability:
        words = row.get("status", "")
        if words and status_kind(words) != "ok":
            by_words.setdefault(words, []).append(row["metric"])
    return "\n".join(f"- {STATUS_ICONS[status_kind(words)][0]} **{', '.join(md_escape(m) for m in metrics)}**: "
                     f"{md_escape(words)}" for words, metrics in by_words.items())


def score_tables(frame: pd.DataFrame, metric_columns: Sequence[str], availability: Sequence[dict],
                 thumbnails: dict[str, str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The score table split for reading: the scored pairs (#, the image's picture from
    `thumbnails` by name, its name shortened and able to wrap between its parts, caption,
    language, truncation), and one row per metric with its status as an icon beside its name,
    a column per pair, the backbone and the status in words last."""
    pairs = frame[[c for c in PAIR_COLUMNS if c != PICTURE]].copy()
    pairs.insert(1, PICTURE, [picture_cell((thumbnails or {}).get(name)) for name in frame["image"]])
    pairs["image"] = pairs["image"].map(lambda name: wrappable_name(short_image_name(name)))
    status = {row["metric"]: row for row in availability}
    rows = []
    for metric in metric_columns:
        words = status.get(metric, {}).get("status", "")
        row = {"metric": metric, "status": status_cell(words) if words else ""}
        for number, value in zip(frame["#"], frame[metric]):
            row[f"#{number}"] = None if value is None or pd.isna(value) else format_score(value)
        row["backbone"] = status.get(metric, {}).get("backbone", "")
        row["status in words"] = words
        rows.append(row)
    columns = [*METRIC_ROW_COLUMNS[:2], *[f"#{n}" for n in frame["#"]], *METRIC_ROW_COLUMNS[2:]]
    return pairs, pd.DataFrame(rows, columns=columns)


def metric_table_datatypes(columns: Sequence[str]) -> list[str]:
    """The per-metric tables' column types (the Score tab's, the Perturbation lab's): the status
    icon is HTML, the rest text."""
    return ["html" if c == "status" else "str" for c in columns]


def lab_table_options(columns: Sequence[str]) -> dict:
    """gr.Dataframe settings of the Perturbation lab's score table: the metric and its status icon
    pinned while the operations scroll, the status words wide enough to wrap."""
    columns = list(columns)
    return {"datatype": metric_table_datatypes(columns), "pinned_columns": 2,
            "column_widths": column_widths(columns, wide=("status in words",), icons=("status",))}


def series_labels(frame: pd.DataFrame, limit: int = 32) -> list[str]:
    """A legend label per scored row: its number, as the tables' "#n" columns name it, and its
    caption, shortened; the image's name is added where the same caption is scored for several
    images."""
    def short(text: str) -> str:
        return text if len(text) <= limit else text[: limit - 1] + "…"

    captions = list(frame["caption"])
    labels = []
    for number, caption, image in zip(frame["#"], captions, frame["image"]):
        label = f"#{number} {short(str(caption))}"
        if captions.count(caption) > 1 and image:
            label = f"{label} ({short(str(image))})"
        labels.append(label)
    return labels


def scores_bar_chart(frame: pd.DataFrame, metric_columns: Sequence[str], title: str,
                     ranges: dict[str, tuple[float, float]] | None = None) -> go.Figure:
    """Grouped bars: one group per metric, one bar per scored (image, caption) row, named by
    its caption. With `ranges` (metric -> attainable range) a bar is the score's share of its
    metric's range, so CIDEr-D (0-10) and CLIP-S (0-2.5) sit beside BLEU (0-1) on one axis
    instead of flattening it; the hover gives the score itself."""
    ranges = ranges or {}
    top = {m: (ranges[m][1] if m in ranges and ranges[m][1] > 0 else 1.0) for m in metric_columns}
    fig = go.Figure()
    for label, (_, row) in zip(series_labels(frame), frame.iterrows()):
        values = [row.get(m) for m in metric_columns]
        if all(v is None or pd.isna(v) for v in values):
            continue
        raw = [None if v is None or pd.isna(v) else float(v) for v in values]
        fig.add_bar(
            name=plotly_text(label),
            x=list(metric_columns),
            y=[None if v is None else v / top[m] for v, m in zip(raw, metric_columns)],
            customdata=[[v, top[m]] for v, m in zip(raw, metric_columns)],
            hovertext=[plotly_text(f"#{row['#']} {row['image']} · {row['caption']}")] * len(metric_columns),
            hovertemplate="%{x}: %{customdata[0]:.4f} of at most %{customdata[1]:g}<br>%{hovertext}<extra></extra>",
        )
    # The legend goes under the plot, so a narrow screen (a phone) keeps the bars their width;
    # the metric names are the axis (no axis title to collide with the legend), upright when there
    # are many, so that 18 of them still stand apart on a phone's 290 px. The legend is pinned to
    # the figure's bottom edge and the bottom margin holds the longest name's labels above it: a
    # legend placed at a share of the plot's height ran through long names ("CapLens-R@world-...").
    upright = len(metric_columns) > 8
    longest = max((len(str(m)) for m in metric_columns), default=0)
    labels_px = int(7 * longest * (1.0 if upright else 0.72)) + 16
    legend_px = 30 + 22 * len(fig.data)  # one entry a row at worst, as on a phone
    fig.update_layout(
        barmode="group",
        title=title,
        yaxis_title="share of the metric's range" if ranges else "score",
        xaxis=dict(tickangle=-90 if upright else -45, automargin=True),
        legend=dict(title="caption", orientation="h", yref="container", yanchor="bottom", y=0, xanchor="left", x=0),
        margin=dict(l=40, r=10, t=50, b=labels_px + legend_px),
        height=320 + labels_px + legend_px,
    )
    return fig
