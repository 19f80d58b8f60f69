"""A collection as one wide table: each caption with its human score and every metric's score.

Rows come from `annotation.exporters.captions_table` (researcher role, checked there); the
scores from the process-wide scorer, image by image. The Analyze and Failure-cases tabs
both read this table and hand it to `scoring.analysis`.
"""
from __future__ import annotations

from typing import Callable

import pandas as pd

from app import engine

Progress = Callable[..., object]
BATCH = 128
MEMO_LIMIT = 200_000

# (profile, metric, image sha256, caption, references, language) -> value. Collections are
# analysed again and again while ratings come in; only captions not seen before are scored.
_memo: dict[tuple, float | None] = {}


def collection_table(profile: str, user_state: dict | None, collection_name: str, metrics: list[str],
                     progress: Progress | None = None) -> pd.DataFrame:
    """Wide table: caption_id, image_id, image_file, candidate, lang, kind, parent_caption_id, op,
    human (mean overall rating, may be NaN), n_ratings, collection, then one column per metric."""
    from annotation.exporters import captions_table
    from annotation.workflows import get_collection
    from scoring.api import ScoreItem

    from app.tabs.annotate import _db, acting_user

    if not collection_name:
        raise ValueError("Choose a collection.")
    with _db() as session:
        user = acting_user(session, user_state)
        rows = captions_table(session, user, get_collection(session, collection_name))
    rows = [r for r in rows if r["kind"] != "reference"]
    if not rows:
        raise ValueError(f"Collection {collection_name!r} has no captions to analyse.")
    table = pd.DataFrame({
        "caption_id": [r["caption_id"] for r in rows],
        "image_id": [r["image_sha256"][:12] for r in rows],
        "image_file": [r["image_file"] for r in rows],
        "candidate": [r["caption"] for r in rows],
        "lang": [r["language"] for r in rows],
        "kind": [r["kind"] for r in rows],
        "parent_caption_id": [r["parent_caption_id"] for r in rows],
        "op": [r["perturbation_op"] or "original" for r in rows],
        "human": [r["human_score"] for r in rows],
        "n_ratings": [r["n_ratings"] for r in rows],
        "references": ["\n".join(r["references"]) for r in rows],
        "collection": collection_name,
    })
    def key(row: dict, metric: str) -> tuple:
        return (profile, metric, row["image_sha256"], row["caption"], tuple(row["references"]), row["language"])

    missing = [r for r in rows if any(key(r, m) not in _memo for m in metrics)]
    for start in range(0, len(missing), BATCH):
        if progress is not None:
            progress(start / len(missing), desc=f"scoring captions {start + 1}-{min(start + BATCH, len(missing))} "
                                                 f"of {len(missing)} not scored before")
        chunk = missing[start:start + BATCH]
        items = [ScoreItem(image=r["image_file"], candidate=r["caption"], references=list(r["references"]),
                           lang=r["language"], image_id=r["image_sha256"]) for r in chunk]
        results = engine.score_items(profile, items, metrics)
        for name in metrics:
            for row, value in zip(chunk, results[name].values):
                _memo[key(row, name)] = value
    if len(_memo) > MEMO_LIMIT:
        _memo.clear()  # rare; the next analysis simply scores again
    for name in metrics:
        table[name] = pd.to_numeric(pd.Series([_memo.get(key(r, name)) for r in rows], dtype="object"),
                                    errors="coerce")
    table["human"] = pd.to_numeric(table["human"], errors="coerce")
    return table
