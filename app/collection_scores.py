"""A collection as one wide table for the Analyze and Failure-cases tabs: the logged-in
account and the app's scorer handed to `annotation.score_store.collection_scores`, which
reads cached scores from the database and scores only what is missing."""
from __future__ import annotations

from typing import Callable

import pandas as pd

from app import engine


def collection_table(profile: str, user_state: dict | None, collection_name: str, metrics: list[str],
                     progress: Callable[..., object] | None = None) -> pd.DataFrame:
    """`collection_scores` of `collection_name` for the logged-in account (researcher/admin)."""
    from annotation.score_store import collection_scores

    from app.tabs.annotate import _db, acting_user

    if not collection_name:
        raise ValueError("Choose a collection.")
    with _db() as session:
        user = acting_user(session, user_state)
        return collection_scores(session, user, collection_name, engine.AppScorer(profile), metrics, progress)
