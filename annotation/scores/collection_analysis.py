"""A stored collection analyzed for an account: its scores (cached, or scored now and
cached), the correlation and robustness report, and its failure cases.

`collection_analysis` is the one path from a collection to its correlation with the human
ratings: the Analyze tab (`analyse_collection`, as the logged-in account) and
`caplens analyze correlation --collection` (as the CLI's account) both call it, so both
correlate the same rows (`scoring.analysis.report.CorrelationFilters`) with the same scores.
Each call reads the collection in one transaction as a researcher or admin (checked by
`annotation.scores.score_store.collection_scores`).
"""
from __future__ import annotations

from typing import Callable, Sequence

import pandas as pd

from annotation.people.acting import acting, chosen_collection
from annotation.scores.score_store import collection_ratings, collection_scores
from scoring.analysis.report import CollectionReport, CorrelationFilters, collection_report, failure_cases

Progress = Callable[..., object]
CORRELATING = "correlating with the human ratings (bootstrap intervals) and tabulating the perturbations"


def collection_scores_for(account_id: int | None, collection: str, scorer, metrics: Sequence[str],
                          progress: Progress | None = None) -> pd.DataFrame:
    """`collection_scores` of `collection` with `scorer`, as the account `account_id`."""
    chosen_collection(account_id, collection)
    with acting(account_id) as (session, user):
        return collection_scores(session, user, collection, scorer, list(metrics), progress)


def collection_analysis(session, user, collection: str, scorer, metrics: Sequence[str],
                        filters: CorrelationFilters | None = None,
                        progress: Progress | None = None) -> CollectionReport:
    """Correlation with the human ratings per language under `filters` (default: one row per
    rated candidate caption, its mean overall rating) and robustness to the stored
    perturbations, with `scorer`'s cached or new scores; ValueError when fewer than two rows
    are rated or no metric can score."""
    filters = filters or CorrelationFilters()
    table = collection_scores(session, user, collection, scorer, list(metrics), progress)
    ratings = collection_ratings(session, user, collection) if filters.per_rating else None
    if progress is not None:
        progress(1.0, desc=CORRELATING)
    return collection_report(table, list(metrics), filters=filters, ratings=ratings)


def analyse_collection(account_id: int | None, collection: str, scorer, metrics: Sequence[str],
                       filters: CorrelationFilters | None = None,
                       progress: Progress | None = None) -> CollectionReport:
    """`collection_analysis` as the account `account_id` (the Analyze tab's login)."""
    chosen_collection(account_id, collection)
    with acting(account_id) as (session, user):
        return collection_analysis(session, user, collection, scorer, metrics, filters, progress)


def collection_failure_cases(account_id: int | None, collection: str, scorer, metrics: Sequence[str], mode: str,
                             progress: Progress | None = None) -> pd.DataFrame:
    """`scoring.analysis.report.failure_cases` of the collection (`mode`: DISAGREE or UNMOVED)."""
    return failure_cases(collection_scores_for(account_id, collection, scorer, metrics, progress), list(metrics), mode)
