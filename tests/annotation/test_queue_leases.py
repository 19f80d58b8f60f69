"""The k-ratings cap under a crowd: a lease reserves each offered item, so 16 annotators
working at once leave every item with exactly k ratings; an abandoned lease expires and its
item returns to the queue."""
from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from sqlalchemy import func, select

from annotation.accounts import create_user
from annotation.captions import add_caption, get_collection, get_or_create_collection
from annotation.image_store import add_image
from annotation.queue_screens import rate, rating_screen
from annotation.tasks import next_rating_item, submit_rating
from db.models import Rating, RatingLease, User
from db.session import session_scope

ANNOTATORS, ITEMS, K = 16, 100, 3


def _collection(engine, accounts, make_png, name: str, items: int) -> None:
    with session_scope(engine) as s:
        col = get_or_create_collection(s, accounts["rita"], name)
        images = [add_image(s, make_png((i * 20, 40, 90)), f"{i}.png") for i in range(10)]
        for i in range(items):
            add_caption(s, accounts["rita"], images[i % 10], f"caption number {i}", collection=col)


def test_sixteen_annotators_leave_every_item_with_exactly_k(engine, accounts, make_png):
    _collection(engine, accounts, make_png, "crowd", ITEMS)
    with session_scope(engine) as s:
        ids = [create_user(s, f"crowd{i}", "annotator").id for i in range(ANNOTATORS)]
    start = threading.Barrier(ANNOTATORS)
    done: dict[int, list[int]] = {}
    errors: list[str] = []

    def annotate(account_id: int) -> None:
        rated = done.setdefault(account_id, [])
        try:
            start.wait(timeout=60)
            while (screen := rating_screen(account_id, "crowd")).caption_id is not None:
                rate(account_id, screen.caption_id, (len(rated) % 11) / 10)
                rated.append(screen.caption_id)
        except Exception as exc:  # reported below, so the test fails with the reason
            errors.append(repr(exc))

    threads = [threading.Thread(target=annotate, args=(account_id,)) for account_id in ids]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    wall = time.perf_counter() - began
    assert errors == []
    with session_scope(engine, read_only=True) as s:
        per_item = Counter(s.scalars(select(Rating.caption_id)).all())
        leases = s.scalar(select(func.count(RatingLease.id)))
    reported = Counter(caption_id for rated in done.values() for caption_id in rated)
    assert len(per_item) == ITEMS and set(per_item.values()) == {K}  # every item exactly k, none more
    assert reported == per_item  # every rating an annotator was told about is stored, nothing else
    assert leases == 0  # rating an item ends its lease
    print(f"\nleases[{engine.dialect.name}]: {ANNOTATORS} annotators x {ITEMS} items, k={K}: "
          f"{sum(per_item.values())} ratings, every item {K}; wall {wall:.1f}s")


def test_an_abandoned_lease_returns_its_item_after_expiry(engine, accounts, make_png):
    _collection(engine, accounts, make_png, "one", 1)
    ann, bea = accounts["ann"], accounts["bea"]
    with session_scope(engine) as s:
        item = next_rating_item(s, s.get(User, ann.id), get_collection(s, "one"), k=1, lease_seconds=0.5)
        assert item is not None
        # while ann holds it, nobody else is offered it, and asking again gives ann the same item
        assert next_rating_item(s, s.get(User, bea.id), get_collection(s, "one"), k=1) is None
        assert next_rating_item(s, s.get(User, ann.id), get_collection(s, "one"), k=1, lease_seconds=0.5).id == item.id
    time.sleep(0.7)  # ann walked away: the lease expires
    with session_scope(engine) as s:
        again = next_rating_item(s, s.get(User, bea.id), get_collection(s, "one"), k=1)
        assert again is not None and again.id == item.id
        submit_rating(s, s.get(User, bea.id), item.id, 0.5, k=1)
    with session_scope(engine) as s:  # ann comes back too late: the item is full, nothing saved
        with pytest.raises(ValueError, match="already has its 1 ratings"):
            submit_rating(s, s.get(User, ann.id), item.id, 0.9, k=1)
    with session_scope(engine, read_only=True) as s:
        assert s.scalars(select(Rating.annotator_id).where(Rating.caption_id == item.id)).all() == [bea.id]
        assert s.scalar(select(func.count(RatingLease.id))) == 0
