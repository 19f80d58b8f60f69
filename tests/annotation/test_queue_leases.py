"""The k-ratings cap under a crowd: a lease reserves each offered item, so 16 annotators
working at once leave every item with exactly k ratings; an abandoned lease expires and its
item returns to the queue."""
from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from annotation.people.accounts import create_user
from annotation.captions import add_caption, get_collection, get_or_create_collection, in_collection
from annotation.image_store import add_image
from annotation.studies.queue_screens import rate, rating_screen
from annotation.studies import tasks
from annotation.studies.tasks import next_rating_item, submit_rating
from db.models import Caption, Rating, RatingLease, User, utcnow
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


# The cap k is guarded twice: the queue's SQL leaves out items whose ratings plus other
# annotators' live leases reach k, and `next_rating_item` counts again under the caption's lock
# (on PostgreSQL another annotator may have taken it between the two). On SQLite both counts
# agree, so an off-by-one in either guard is hidden by the other unless a test makes only one
# of them decide: the two tests below do, one guard each.

def _lease_rows(session, caption_ids, annotator_ids, seconds=600) -> None:
    """Live leases written as another annotator's `/next_item` would leave them."""
    expires = utcnow() + timedelta(seconds=seconds)
    for caption_id in caption_ids:
        for annotator_id in annotator_ids:
            session.add(RatingLease(caption_id=caption_id, annotator_id=annotator_id, expires_at=expires))
    session.flush()


def test_the_queue_query_alone_leaves_out_items_that_reached_k(engine, accounts, make_png):
    """Only the SQL guard decides here: 20 items each hold k = 2 live leases of other
    annotators (and no rating, so least-rated first puts them ahead), one item has 1 rating
    (k - 1 taken). A correct query offers that item at once. A query that let the full items
    through would hand its first 8 candidates, all full, to the re-check, which turns every one
    down, and the free item would never be reached."""
    _collection(engine, accounts, make_png, "cap", 21)
    with session_scope(engine) as s:
        col = get_collection(s, "cap")
        ids = sorted(s.scalars(select(Caption.id).where(in_collection(col))).all())
        free, full = ids[0], ids[1:]
        submit_rating(s, s.get(User, accounts["rita"].id), free, 0.5)
        _lease_rows(s, full, [accounts["bea"].id, accounts["cal"].id])
    with session_scope(engine) as s:
        offered = next_rating_item(s, s.get(User, accounts["ann"].id), get_collection(s, "cap"), k=2)
        assert offered is not None and offered.id == free
        # with k = 2 the free item is now full too (1 rating + ann's lease): nothing for root
        assert next_rating_item(s, s.get(User, accounts["root"].id), get_collection(s, "cap"), k=2) is None


def test_the_recount_under_the_lock_alone_refuses_an_item_taken_meanwhile(engine, accounts, make_png, monkeypatch):
    """Only the re-check decides here: the one item has k - 1 = 1 rating when the query runs, so
    the query offers it; between the query and the lock another annotator (cal) takes its last
    place, as can happen on PostgreSQL. The re-check must see k taken and offer nothing; with
    the race taking nothing, k - 1 taken is not full and the item is offered."""
    _collection(engine, accounts, make_png, "race", 1)
    with session_scope(engine) as s:
        caption_id = s.scalar(select(Caption.id).where(in_collection(get_collection(s, "race"))))
        submit_rating(s, s.get(User, accounts["bea"].id), caption_id, 0.5)
    first_open = tasks.first_open
    raced = []

    def another_annotator_gets_there_first(session, candidates, lock, full):
        if caption_id in candidates and not raced:  # after the query, before the re-check
            _lease_rows(session, [caption_id], [accounts["cal"].id])
            raced.append(caption_id)
        return first_open(session, candidates, lock, full)

    with session_scope(engine) as s:
        offered = next_rating_item(s, s.get(User, accounts["ann"].id), get_collection(s, "race"), k=3)
        assert offered is not None and offered.id == caption_id  # 1 rating < k = 3, no race needed
        s.rollback()
    monkeypatch.setattr(tasks, "first_open", another_annotator_gets_there_first)
    with session_scope(engine) as s:  # k = 2: 1 rating + cal's lease taken meanwhile = k
        assert next_rating_item(s, s.get(User, accounts["ann"].id), get_collection(s, "race"), k=2) is None
        assert raced == [caption_id]  # the query did offer it: the re-check refused it
    with session_scope(engine) as s:  # k = 3: 1 rating + cal's lease = 2 = k - 1, still open
        offered = next_rating_item(s, s.get(User, accounts["ann"].id), get_collection(s, "race"), k=3)
        assert offered is not None and offered.id == caption_id


def test_taking_another_item_ends_the_annotators_lease_on_the_one_that_filled_meanwhile(engine, accounts, make_png):
    """An annotator holds one lease. Their live lease on an item that others filled meanwhile
    (its ratings reached k, so the queue no longer offers it to them) ends when they take the
    next item: it must not keep counting against that item, nor let them hold two."""
    _collection(engine, accounts, make_png, "one-lease", 2)
    with session_scope(engine) as s:
        first, second = s.scalars(select(Caption.id).where(in_collection(get_collection(s, "one-lease")))
                                  .order_by(Caption.id)).all()
        _lease_rows(s, [first], [accounts["ann"].id])
        for name in ("bea", "cal"):
            submit_rating(s, s.get(User, accounts[name].id), first, 0.5)
    with session_scope(engine) as s:
        offered = next_rating_item(s, s.get(User, accounts["ann"].id), get_collection(s, "one-lease"), k=2)
        assert offered is not None and offered.id == second
    with session_scope(engine, read_only=True) as s:
        held = s.scalars(select(RatingLease.caption_id).where(RatingLease.annotator_id == accounts["ann"].id)).all()
    assert held == [second]


# A lease counts while `expires_at > now` and is deleted once `expires_at <= now`: at the very
# instant it expires it is gone. The clock is fixed so a lease can expire exactly at "now".

def _frozen_clock(monkeypatch):
    moment = utcnow()
    monkeypatch.setattr(tasks, "utcnow", lambda: moment)
    return moment


def test_another_annotators_lease_expiring_this_instant_no_longer_holds_the_item(engine, accounts, make_png, monkeypatch):
    _collection(engine, accounts, make_png, "instant", 1)
    now = _frozen_clock(monkeypatch)
    ann, bea = accounts["ann"], accounts["bea"]
    with session_scope(engine) as s:
        caption_id = s.scalars(select(Caption.id).where(in_collection(get_collection(s, "instant")))).one()
        s.add(RatingLease(caption_id=caption_id, annotator_id=bea.id, expires_at=now))
        s.flush()
        item = next_rating_item(s, s.get(User, ann.id), get_collection(s, "instant"), k=1)
        assert item is not None and item.id == caption_id
        # bea's expired lease is cleaned up; ann's new one is the only lease left
        assert s.execute(select(RatingLease.annotator_id, RatingLease.caption_id)).all() == [(ann.id, caption_id)]
    with session_scope(engine) as s:  # a microsecond later than "now", bea's lease still holds it
        s.execute(RatingLease.__table__.delete())
        s.add(RatingLease(caption_id=caption_id, annotator_id=bea.id, expires_at=now + timedelta(microseconds=1)))
        s.flush()
        assert next_rating_item(s, s.get(User, accounts["cal"].id), get_collection(s, "instant"), k=1) is None


@pytest.mark.parametrize("order", ["default", "disagreement-first"])
def test_ones_own_lease_comes_first_until_the_instant_it_expires(engine, accounts, make_png, monkeypatch, order):
    """ann's queue would offer caption `first`; she holds a lease on `other`. While it lives,
    `other` comes first (in either queue order); one expiring exactly now is not hers any more."""
    _collection(engine, accounts, make_png, "held", 3)
    now = _frozen_clock(monkeypatch)
    ann = accounts["ann"]
    if order != "default":
        with session_scope(engine) as s:
            get_collection(s, "held").queue_order = order
    with session_scope(engine) as s:
        collection = get_collection(s, "held")
        if order != "default":
            assert collection.queue_order == order
        first = next_rating_item(s, s.get(User, ann.id), collection, k=3).id
        s.rollback()  # only to learn her order: no lease kept
    for expires, offered in ((now + timedelta(microseconds=1), "other"), (now, "first")):
        with session_scope(engine) as s:
            collection = get_collection(s, "held")
            other = max(c for c in s.scalars(select(Caption.id).where(in_collection(collection))) if c != first)
            s.execute(RatingLease.__table__.delete())
            s.add(RatingLease(caption_id=other, annotator_id=ann.id, expires_at=expires))
            s.flush()
            got = next_rating_item(s, s.get(User, ann.id), collection, k=3).id
            assert got == {"other": other, "first": first}[offered], (order, expires, offered)
            s.rollback()
