"""A stored collection analysed for the logged-in account: its scores (cached, or scored now
and cached), the correlation and robustness report, and its failure cases.

Each function reads the collection in one transaction as the acting account (researcher or
admin, checked by `annotation.score_store.collection_scores`) and hands the table to the
pure measures of `scoring.analysis.report`.
"""
from __future__ import annotations

from typing import Callable, Sequence

import pandas as pd

from annotation.acting import acting
from annotation.score_store import collection_scores
from scoring.analysis.report import CollectionReport, collection_report, failure_cases

Progress = Callable[..., object]


def collection_scores_for(account_id: int | None, collection: str, scorer, metrics: Sequence[str],
                          progress: Progress | None = None) -> pd.DataFrame:
    """`collection_scores` of `collection` with `scorer`, as the account `account_id`."""
    if not collection:
        raise ValueError("Choose a collection.")
    with acting(account_id) as (session, user):
        return collection_scores(session, user, collection, scorer, list(metrics), progress)


def analyse_collection(account_id: int | None, collection: str, scorer, metrics: Sequence[str], n_boot: int = 200,
                       progress: Progress | None = None) -> CollectionReport:
    """Correlation with the human ratings per language and robustness to the stored
    perturbations; ValueError when fewer than two captions are rated."""
    table = collection_scores_for(account_id, collection, scorer, metrics, progress)
    return collection_report(table, list(metrics), n_boot=n_boot)


def collection_failure_cases(account_id: int | None, collection: str, scorer, metrics: Sequence[str], mode: str,
                             progress: Progress | None = None) -> pd.DataFrame:
    """`scoring.analysis.report.failure_cases` of the collection (`mode`: DISAGREE or UNMOVED)."""
    return failure_cases(collection_scores_for(account_id, collection, scorer, metrics, progress), list(metrics), mode)
