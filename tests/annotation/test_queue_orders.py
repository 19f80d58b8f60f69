"""The disagreement-first rating queue: served through the annotators' screen in the order the
collection's stored metric scores give, least-rated still first."""
from __future__ import annotations

import pytest
from sqlalchemy import select

from annotation.studies import queue_screens
from annotation.captions import add_caption, get_collection, get_or_create_collection
from annotation.image_store import add_image
from annotation.studies.queue_orders import set_queue_order
from annotation.scores.score_store import cache_metric_scores, stored_scores
from annotation.studies.tasks import next_rating_item, queue_order
from db.models import Caption
from db.session import session_scope

# Stored scores of captions t0..t3 (t4 has none). Normalised ranks: X 0, 1/3, 2/3, 1;
# Y 1/3, 0, 2/3, 1 (old checkpoint "v0" is ignored: "v1" covers more captions);
# Z 1, 0, 2/3, 1/3. Spreads (population sd): t0 0.419, t1 0.157, t2 0, t3 0.314.
X = [0.1, 0.2, 0.3, 0.4]
Y = [0.5, 0.2, 0.7, 0.9]
Z = [9.0, 1.0, 5.0, 3.0]
DISAGREEMENT_ORDER = ["t0", "t3", "t1", "t2", "t4"]


@pytest.fixture
def scored(engine, accounts, make_png):
    with session_scope(engine) as session:
        rita = accounts["rita"]
        collection = get_or_create_collection(session, rita, "scored")
        image = add_image(session, make_png(), "scene.png")
        add_caption(session, rita, image, "the reference", kind="reference", collection=collection)
        ids = {f"t{i}": add_caption(session, rita, image, f"caption t{i}", collection=collection).id for i in range(5)}
        scored_ids = [ids[f"t{i}"] for i in range(4)]
        for metric, values in (("X", X), ("Y", Y), ("Z", Z)):
            cache_metric_scores(session, metric, "v1", dict(zip(scored_ids, values)))
        cache_metric_scores(session, "Y", "v0", {scored_ids[0]: 0.0})  # fewer captions than v1
    return ids


def served(account_id: int, ids: dict, count: int) -> list[str]:
    names = {v: k for k, v in ids.items()}
    out, screen = [], queue_screens.rating_screen(account_id, "scored")
    for _ in range(count):
        out.append(names[screen.caption_id])
        screen = queue_screens.rate_and_next(account_id, "scored", screen.caption_id, 0.5)
    return out


def test_disagreement_first_serves_the_most_disagreed_caption_first(engine, accounts, scored):
    with session_scope(engine) as session:
        assert stored_scores(session, scored.values())["Y"] == dict(zip([scored[f"t{i}"] for i in range(4)], Y))
        set_queue_order(session, accounts["rita"], "scored", "disagreement-first")
    assert served(accounts["ann"].id, scored, 5) == DISAGREEMENT_ORDER
    # Every caption has one rating now, so bea sees the same disagreement order.
    assert served(accounts["bea"].id, scored, 2) == DISAGREEMENT_ORDER[:2]
    # cal: t0 and t3 have two ratings, the others one, so t1 (most disagreed of those) is next.
    with session_scope(engine) as session:
        assert next_rating_item(session, accounts["cal"], get_collection(session, "scored")).id == scored["t1"]


def test_newly_stored_scores_change_the_order(engine, accounts, scored):
    """The queue reuses the scores it read while the store is unchanged, and reads them again
    once metrics are stored: here three more (U, V, W) that rank t2 lowest where X, Y and Z put
    it at 2/3, which makes t2's spread the largest (1/3, against 0.299 for t0 and t1)."""
    with session_scope(engine) as session:
        set_queue_order(session, accounts["rita"], "scored", "disagreement-first")
    with session_scope(engine) as session:
        assert next_rating_item(session, accounts["ann"], get_collection(session, "scored")).id == scored["t0"]
    with session_scope(engine) as session:
        for metric in ("U", "V", "W"):
            cache_metric_scores(session, metric, "v1", {scored["t0"]: 0.5, scored["t1"]: 0.6, scored["t2"]: -9.0,
                                                        scored["t3"]: 0.7})
        assert next_rating_item(session, accounts["bea"], get_collection(session, "scored")).id == scored["t2"]


def test_the_default_order_ignores_scores_and_only_researchers_change_it(engine, accounts, scored):
    with session_scope(engine) as session:
        assert get_collection(session, "scored").queue_order == "least-rated"
        with pytest.raises(PermissionError):
            set_queue_order(session, accounts["ann"], "scored", "disagreement-first")
        with pytest.raises(ValueError, match="unknown queue order 'random'"):
            set_queue_order(session, accounts["rita"], "scored", "random")
    # least-rated first, then ann's own scramble of the ids (queue_order): never the scores' order
    with session_scope(engine) as session:
        ann = session.merge(accounts["ann"])
        expected = session.scalars(select(Caption.id).where(Caption.id.in_(list(scored.values())))
                                   .order_by(queue_order(ann), Caption.id)).all()
    names = {v: k for k, v in scored.items()}
    assert served(accounts["ann"].id, scored, 5) == [names[c] for c in expected]
