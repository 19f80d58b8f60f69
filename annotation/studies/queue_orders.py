"""The orders a collection's rating queue can serve items in, and setting a collection's order.

* `least-rated` (default): items with the fewest ratings first, a per-annotator shuffle
  among equals (`annotation.studies.tasks.queue_order`).
* `disagreement-first`: still fewest ratings first, but among equals the caption on which the
  collection's stored metric scores disagree most (`annotation.studies.queue_priority`, rank-normalised
  spread over metrics) comes first, so each rating teaches the most; captions with scores
  from fewer than two metrics follow in the least-rated order. Scores are read from the
  MetricScore store (`annotation.scores.score_store.stored_scores`: fill it with Analyze or
  `caplens db import-scores`); with none stored the order is the least-rated one.
"""
from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from annotation.people.accounts import RESEARCH_ROLES, require_role
from annotation.captions import get_collection, in_collection
from annotation.studies.queue_priority import disagreement_first
from db.models import Caption, Collection, MetricScore, User

LEAST_RATED = "least-rated"
DISAGREEMENT_FIRST = "disagreement-first"
QUEUE_ORDERS = (LEAST_RATED, DISAGREEMENT_FIRST)


def validate_queue_order(order: str) -> str:
    if order not in QUEUE_ORDERS:
        raise ValueError(f"unknown queue order {order!r}; choose {' or '.join(QUEUE_ORDERS)}")
    return order


def set_queue_order(session: Session, user: User, collection_name: str, order: str) -> Collection:
    """Make the rating queue of `collection_name` serve items in `order` (researcher or admin)."""
    require_role(user, *RESEARCH_ROLES)
    collection = get_collection(session, collection_name)
    collection.queue_order = validate_queue_order(order)
    session.flush()
    return collection


def by_disagreement(session: Session, user: User, collection: Collection,
                    eligible: list[tuple[int, int, bool]]) -> list[int]:
    """The caption ids of `eligible` ((caption id, rating count, held by this annotator) in
    the least-rated order) re-ordered disagreement-first: the one the annotator holds a lease
    on stays first, then fewest ratings, then the largest disagreement."""
    from annotation.scores.score_store import stored_scores  # score_store imports the importer, which imports tasks
    from annotation.studies.tasks import queue_order

    if not eligible:
        return []
    # Priorities over all of the collection's rateable captions, so they do not drift as items get rated.
    rateable = list(session.scalars(select(Caption.id).where(in_collection(collection), Caption.kind != "reference")
                                    .order_by(queue_order(user), Caption.id)))
    scores = _stored_scores_once(session, collection, rateable, stored_scores)
    rank = {c: i for i, c in enumerate(disagreement_first(rateable, {m: [v.get(c) for c in rateable]
                                                                      for m, v in scores.items()}))}
    return [c for c, _, _ in sorted(eligible, key=lambda row: (not row[2], row[1], rank.get(row[0], len(rank))))]


# A collection's stored scores as the queue last read them, under a stamp of the store; each
# next_item call of the disagreement-first order (inside its writing transaction) would
# otherwise read every score of the collection again.
_scores_read: dict[tuple, dict] = {}


def _stored_scores_once(session: Session, collection: Collection, rateable: list[int], read) -> dict:
    """`read(session, rateable)`, reused while the collection's captions and their stored
    scores are unchanged (same captions, same count, newest row and newest computation)."""
    in_coll = select(Caption.id).where(in_collection(collection))
    stamp = tuple(session.execute(select(func.count(MetricScore.id), func.max(MetricScore.id),
                                         func.max(MetricScore.computed_at))
                                  .where(MetricScore.caption_id.in_(in_coll))).one())
    key = (str(session.get_bind().url), collection.id, hash(tuple(sorted(rateable))), stamp)
    if key not in _scores_read:
        if len(_scores_read) >= 8:
            _scores_read.pop(next(iter(_scores_read)))
        _scores_read[key] = read(session, rateable)
    return _scores_read[key]
