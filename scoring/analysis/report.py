"""A collection's measures as the app shows them, over a `collection_scores` table: the
correlation with the human ratings per language, the robustness to its stored perturbations,
and its failure cases, with the readable cells the tables display.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Callable, Sequence

import pandas as pd

from scoring.metrics.base import one_word_note

from .failures import disagreements, unmoved
from .robustness import format_table7, robustness_table
from .correlation import COEFFICIENT_LABELS, COEFFICIENTS
from .run import unavailable_text
from .tables import collection_correlations, correlation_rows, rated_captions, robustness_input

DISAGREE = "metric and humans disagree"
UNMOVED = "perturbation barely moved the metric"
ANY = "(any)"
# What a case table shows, the columns that decide a case first (they stay in view on a narrow
# screen); the image file and references stay in the rows for opening the case.
CASE_CELLS = ["metric", "lang", "metric score", "human", "rank gap", "change %", "op", "candidate", "caption_id",
              "image_id"]
# Perturbation cases have no human rating: their change and operation decide, so they come first.
UNMOVED_CELLS = ["metric", "lang", "change %", "op", "metric score", "human", "rank gap", "candidate", "caption_id",
                 "image_id"]
MODE_CELLS = ("human", "rank gap", "change %", "op")  # filled by one kind of case only


@dataclass(frozen=True)
class CorrelationFilters:
    """Which rows a collection's correlation takes, the same for the Analyze tab and
    `caplens analyze correlation --collection` (`collection_report` applies them).

    Always: the collection's candidate captions (not references, not perturbed captions) with
    at least one overall rating; the overall rating only (fluency, relevance and
    descriptiveness are not used); metric values of the scorer's own checkpoints; one
    correlation per language. `per_rating`: each overall rating is its own row (as Flickr8k
    papers count judgments); otherwise one row per caption with its mean overall rating."""

    per_rating: bool = False
    n_boot: int = 200
    seed: int = 0
    coefficients: tuple[str, ...] = COEFFICIENTS

    def describe(self) -> str:
        human = ("each overall rating is one row (a caption rated by 3 people counts 3 times)" if self.per_rating
                 else "one row per caption, human = the mean of its overall ratings")
        intervals = (f"95 % intervals from {self.n_boot} bootstrap resamples (seed {self.seed})" if self.n_boot
                     else "no intervals")
        return ("Filters: candidate captions with at least one overall rating (references and perturbed captions "
                f"left out); {human}; fluency, relevance and descriptiveness not used; metric scores of this "
                f"profile's checkpoints; per language; {intervals}.")


@dataclass
class CollectionReport:
    """`table`: the `collection_scores` table; `rows`: the rows correlated (`correlation_rows`
    under `filters`); `correlations`: `correlation_table` per language; `robustness`: the
    numeric Table-7 frame of the stored perturbations (None when the collection has none);
    `unavailable`: {metric: reason} for metrics that could not score."""

    table: pd.DataFrame
    correlations: pd.DataFrame
    robustness: pd.DataFrame | None
    rows: pd.DataFrame | None = None
    filters: CorrelationFilters = CorrelationFilters()
    unavailable: dict[str, str] | None = None

    @property
    def summary(self) -> str:
        rated = rated_captions(self.table)
        text = f"{len(self.table)} captions, {len(rated)} with human ratings"
        if self.rows is not None and self.filters.per_rating:
            text += f" ({len(self.rows)} overall ratings)"
        text += "."
        flat = constant_rating_languages(self.table)
        if flat:
            text += (f" In {', '.join(flat)} every rated caption has the same mean human rating, so no correlation "
                     "with it is defined there (shown as —) until the ratings differ.")
        shown = self.correlations[self.correlations["n"] > 0] if "n" in self.correlations else self.correlations
        notes = language_notes(self.table, zip(shown["metric"], shown["lang"]))
        if notes:
            text += " " + notes
        if self.unavailable:
            text += " " + unavailable_text(self.unavailable)
        return text

    def scatter(self, metric: str, display: Callable[[pd.DataFrame], pd.DataFrame] = lambda rows: rows):
        """The metric against the human score over exactly the rows correlated (`rows`: no
        perturbed caption, one point per rating with `filters.per_rating`), so that the figure's
        n and τc count what the table counts. `display` readies the rows for showing (the app
        escapes caption text)."""
        from .plots import metric_vs_human_scatter

        return metric_vs_human_scatter(display(self.rows), metric, hover_cols=("image_id", "candidate"),
                                       color_col="lang")


def constant_rating_languages(table: pd.DataFrame) -> list[str]:
    """Languages whose rated captions (two or more) all have one mean human rating."""
    rated = rated_captions(table)
    spread = rated.groupby("lang")["human"].agg(["count", "nunique"])
    return [str(lang) for lang, row in spread.iterrows() if row["count"] >= 2 and row["nunique"] == 1]


def metric_languages(scorer, metrics: Sequence[str]) -> dict[str, dict]:
    """Per metric (as named in `metrics`): the languages it was made for (None: any) and those in
    which it reads a whole caption as one word, from its `MetricInfo`; a scores table keeps this in
    attrs["metric_languages"] for `language_notes`."""
    out = {}
    for metric in metrics:
        info = scorer.info(metric)
        out[metric] = {"languages": info.languages, "one_word": info.one_word_languages}
    return out


def language_notes(table: pd.DataFrame, shown: Iterable[tuple[str, str]]) -> str:
    """What to know before reading these (metric, language) values, as the Score tab says it for
    one batch: metrics made for other languages, and word-overlap metrics that read a caption in a
    language written without spaces as one word. "" when nothing applies."""
    known = table.attrs.get("metric_languages", {})
    foreign: dict[tuple, list[str]] = defaultdict(list)
    whole: dict[str, list[str]] = defaultdict(list)
    order = {metric: k for k, metric in enumerate(known)}  # the registry's order, as the tables show them
    for metric, lang in sorted(set(shown), key=lambda pair: (order.get(pair[0], 0), str(pair[1]))):
        info = known.get(metric)
        if not info or not isinstance(lang, str):
            continue
        if info["languages"] and lang not in info["languages"]:
            foreign[tuple(info["languages"])].append((metric, lang))
        if lang in info["one_word"]:
            whole[lang].append(metric)
    notes = []
    for made_for, pairs in foreign.items():
        metrics = list(dict.fromkeys(m for m, _ in pairs))
        langs = sorted({lang for _, lang in pairs})
        notes.append(f"{', '.join(metrics)} {'was' if len(metrics) == 1 else 'were'} made for {', '.join(made_for)}; "
                     f"shown here for {', '.join(langs)} as well.")
    notes.extend(f"{', '.join(metrics)}: {one_word_note(lang)}." for lang, metrics in whole.items())
    return " ".join(notes)


def collection_report(table: pd.DataFrame, metrics: Sequence[str], n_boot: int | None = None, *,
                      filters: CorrelationFilters | None = None,
                      ratings: pd.DataFrame | None = None) -> CollectionReport:
    """Correlations under `filters` (ValueError when fewer than two rows are rated) and
    robustness. `ratings` (caption_id, rater, human) is needed when `filters.per_rating`."""
    filters = filters or CorrelationFilters(**({} if n_boot is None else {"n_boot": n_boot}))
    if filters.per_rating and ratings is None:
        raise ValueError("per-rating correlation needs the collection's ratings")
    ratings = ratings if filters.per_rating else None
    unavailable = dict(table.attrs.get("unavailable", {}))
    available = [m for m in metrics if m not in unavailable]
    if not available:
        raise ValueError(" ".join(["No chosen metric could be scored.", unavailable_text(unavailable)]).strip())
    correlations = collection_correlations(table, available, filters.n_boot, ratings=ratings,
                                           coefficients=filters.coefficients, seed=filters.seed)
    long = robustness_input(table, available)
    return CollectionReport(table, correlations, None if long is None else robustness_table(long),
                            correlation_rows(table, ratings), filters, unavailable)


def _interval(value, low, high) -> str:
    if pd.isna(value):
        return "—"
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def correlation_cells(correlations: pd.DataFrame) -> pd.DataFrame:
    """Per language and metric: n and each coefficient with its bootstrap 95 % interval."""
    shown = correlations[["lang", "metric", "n"]].copy()
    for name, label in COEFFICIENT_LABELS.items():
        shown[label] = [_interval(v, lo, hi) for v, lo, hi in
                        zip(correlations[name], correlations[f"{name}_low"], correlations[f"{name}_high"])]
    return shown


def robustness_cells(robustness: pd.DataFrame | None) -> pd.DataFrame | None:
    """PR-MCS Table 7 cells of the numeric robustness frame (None stays None)."""
    return None if robustness is None else format_table7(robustness)


def failure_cases(table: pd.DataFrame, metrics: Sequence[str], mode: str) -> pd.DataFrame:
    """DISAGREE: rated captions by |rank gap| between metric and humans; UNMOVED: perturbed
    captions whose score moved least."""
    if mode not in (DISAGREE, UNMOVED):
        raise ValueError(f"unknown kind of failure case {mode!r}")
    cases = disagreements(table, metrics) if mode == DISAGREE else unmoved(table, metrics)
    cases.attrs["metric_languages"] = table.attrs.get("metric_languages", {})
    return cases


def case_filters(rows: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The language and operation choices of a case table, ANY first."""
    return ([ANY, *sorted(rows["lang"].dropna().unique())], [ANY, *sorted(rows["op"].dropna().unique())])


def filter_cases(rows: pd.DataFrame, metric: str, lang: str, op: str, limit: int) -> pd.DataFrame:
    """The first `limit` cases of this metric, language and operation (ANY: all). With any
    metric a caption shows once, with its worst metric (its first row: the rows come worst first)."""
    for column, wanted in (("metric", metric), ("lang", lang), ("op", op)):
        if wanted != ANY:
            rows = rows[rows[column] == wanted]
    if metric == ANY:
        rows = rows.drop_duplicates("caption_id", keep="first")
    return rows.head(limit).reset_index(drop=True)


def case_status(rows: pd.DataFrame, matching: pd.DataFrame, shown: int, metric: str, lang: str, op: str) -> str:
    """What the table holds, against all the cases found: with any metric a caption shows once,
    so the count is of captions, not of metric-caption cases."""
    chosen = ", ".join(f"{label} {value}" for label, value in (("metric", metric), ("language", lang),
                                                               ("operation", op)) if value != ANY)
    unit = "case(s)" if metric != ANY else "caption(s), each once with its worst metric"
    where = f" with {chosen}" if chosen else ""
    notes = language_notes(rows, zip(matching["metric"], matching["lang"])) if len(matching) else ""
    return (f"{len(matching)} {unit}{where}, of {len(rows)} cases over all metrics; showing the first {shown}."
            + (f" {notes}" if notes else ""))


def case_cells(rows: pd.DataFrame, compact: bool = True) -> pd.DataFrame:
    """The case columns a table shows, the deciding ones first (CASE_CELLS, or UNMOVED_CELLS for
    perturbation cases: a change but no rank gap), numbers rounded to 3 digits. A column that
    no case fills (a disagreement's change % and operation, a perturbation's human rating and
    rank gap) is left out when `compact`, so a narrow screen shows what decides; the API keeps
    every column, so its rows have one shape."""
    def filled(column: str) -> bool:
        return column in rows and pd.to_numeric(rows[column], errors="coerce").notna().any()

    perturbation = filled("change %") and not filled("rank gap")
    cells = UNMOVED_CELLS if perturbation else CASE_CELLS
    if compact and len(rows):
        cells = [c for c in cells if c not in MODE_CELLS or (c in rows and rows[c].notna().any())]
    shown = rows.reindex(columns=cells).copy()
    for column in ("metric score", "human", "rank gap", "change %"):
        if column in shown:
            shown[column] = pd.to_numeric(shown[column], errors="coerce").round(3)
    return shown
