"""A collection's measures as the app shows them, over a `collection_scores` table: the
correlation with the human ratings per language, the robustness to its stored perturbations,
and its failure cases, with the readable cells the tables display.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from .failures import CASE_COLUMNS, disagreements, unmoved
from .robustness import format_table7, robustness_table
from .tables import collection_correlations, rated_captions, robustness_input

COEFFICIENT_LABELS = {"kendall_c": "Kendall τc", "kendall_b": "Kendall τb", "pearson": "Pearson r",
                      "spearman": "Spearman ρ"}
DISAGREE = "metric and humans disagree"
UNMOVED = "perturbation barely moved the metric"
ANY = "(any)"
# What a case table shows; the image file and references stay for opening the case.
CASE_CELLS = CASE_COLUMNS[:CASE_COLUMNS.index("image_file")]


@dataclass
class CollectionReport:
    """`correlations`: `correlation_table` per language; `robustness`: the numeric Table-7
    frame of the stored perturbations (None when the collection has none)."""

    table: pd.DataFrame
    correlations: pd.DataFrame
    robustness: pd.DataFrame | None

    @property
    def summary(self) -> str:
        text = f"{len(self.table)} captions, {int(self.table['human'].notna().sum())} with human ratings."
        flat = constant_rating_languages(self.table)
        if flat:
            text += (f" In {', '.join(flat)} every rated caption has the same mean human rating, so no correlation "
                     "with it is defined there (shown as —) until the ratings differ.")
        return text


def constant_rating_languages(table: pd.DataFrame) -> list[str]:
    """Languages whose rated captions (two or more) all have one mean human rating."""
    rated = rated_captions(table)
    spread = rated.groupby("lang")["human"].agg(["count", "nunique"])
    return [str(lang) for lang, row in spread.iterrows() if row["count"] >= 2 and row["nunique"] == 1]


def collection_report(table: pd.DataFrame, metrics: Sequence[str], n_boot: int = 200) -> CollectionReport:
    """Correlations (ValueError when fewer than two captions are rated) and robustness."""
    correlations = collection_correlations(table, metrics, n_boot=n_boot)
    long = robustness_input(table, metrics)
    return CollectionReport(table, correlations, None if long is None else robustness_table(long))


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
    return disagreements(table, metrics) if mode == DISAGREE else unmoved(table, metrics)


def case_filters(rows: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The language and operation choices of a case table, ANY first."""
    return ([ANY, *sorted(rows["lang"].dropna().unique())], [ANY, *sorted(rows["op"].dropna().unique())])


def filter_cases(rows: pd.DataFrame, metric: str, lang: str, op: str, limit: int) -> pd.DataFrame:
    """The first `limit` cases of this metric, language and operation (ANY: all)."""
    for column, wanted in (("metric", metric), ("lang", lang), ("op", op)):
        if wanted != ANY:
            rows = rows[rows[column] == wanted]
    return rows.head(limit).reset_index(drop=True)


def case_cells(rows: pd.DataFrame) -> pd.DataFrame:
    """The case columns a table shows, numbers rounded to 3 digits."""
    shown = rows.reindex(columns=CASE_CELLS).copy()
    for column in ("metric score", "human", "rank gap", "change %"):
        shown[column] = pd.to_numeric(shown[column], errors="coerce").round(3)
    return shown
