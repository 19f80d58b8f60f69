"""Pairwise judgments: a study mode in which annotators see one image with two of its captions
and say which describes it better (A, B or a tie), and what the judgments tell about metrics
and caption sources.

* **Pairs** (`PairwiseItem`) are two captions of the same image in a collection: made from the
  collection's captions of each image that come from different sources (`make_pairs`), or read
  from a pair file (`import_pairs`). Each carries its Pascal-50S category: H for a human
  caption (a reference), M for a machine one (HC, HM, MM; HI only from a pair file).
* **The queue** works as the rating queue (`annotation.studies.tasks`): least-judged first in the same
  per-annotator order (`tasks.queue_order`), k-way overlap (`tasks.DEFAULT_RATINGS_PER_ITEM`)
  with an offered pair reserved for `tasks.LEASE_SECONDS` (it counts towards k while live), a
  skipped pair never offered again, and Back through this annotator's judged and skipped
  pairs. The two captions are shown left and right in a blind order drawn per annotator and
  pair from a fixed seed (`a_on_left`), so Back shows the same order; nobody sees another
  annotator's judgment.
* **Analysis** (`pairwise_analysis`): every metric's pairwise accuracy against the human
  majority through `scoring.analysis.pairwise.pascal50s_table`, the function
  `caplens analyze pascal50s` uses, and a Bradley–Terry ranking of the caption sources with
  cluster-bootstrap 95 % intervals (`scoring.analysis.bradley_terry`).
* **Export** (`export_pascal50s`): pair_pascal.mat and consensus_pascal.mat in the layout
  `scoring.analysis.datasets.load_pascal50s` reads.

Roles are checked here: anyone logged in judges (their own judgments only); making and
importing pairs, the analysis and the export are a researcher's or admin's.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import timedelta, timezone
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import delete, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from annotation.studies import quality

from annotation.studies import tasks
from annotation.people.accounts import ALL_ROLES, RESEARCH_ROLES, require_role
from annotation.people.acting import acting
from annotation.captions import get_collection, in_collection
from annotation.studies.queue_screens import _image_file, _missing_image_message
from annotation.transfer.import_sources import csv_records
from db.models import Caption, Collection, Image, PairwiseItem, PairwiseJudgment, User, utcnow
from scoring.analysis.bradley_terry import Ranking, bradley_terry_ranking
from scoring.analysis.pairwise import PASCAL_CATEGORIES, pascal50s_table

VERDICTS = ("a", "b", "tie")  # a judgment; "skip" and an open offer (NULL) are not
SIDES = {"left": 1, "right": 2, "tie": 3}  # what the annotator chose, and its key
MAX_PAIR_ROWS = 100_000
MAX_PAIR_FILE_BYTES = 20 * 1024 * 1024
PAIR_SEED = "caplens-pairwise-order-v1"


# ---------------------------------------------------------------------------------------
# pairs


def caption_source(caption: Caption) -> str:
    """The source (system) a caption is ranked as: its model, "human" for a reference."""
    if caption.source_model:
        return caption.source_model
    return "human" if caption.kind == "reference" else "unknown"


def pair_category(first: Caption, second: Caption) -> str:
    """HC (two human captions: references), HM (one of each) or MM (two machine captions)."""
    humans = (first.kind == "reference") + (second.kind == "reference")
    return ("MM", "HM", "HC")[humans]


def _add_pair(session: Session, user: User, collection: Collection, first: Caption, second: Caption,
              category: str | None = None) -> bool:
    """Store the pair (A = the caption stored first) unless the collection has it; True if new."""
    if first.id == second.id:
        raise ValueError("a pair needs two different captions")
    if first.image_id != second.image_id:
        raise ValueError(f"captions {first.id} and {second.id} describe different images")
    if " ".join(first.text.split()) == " ".join(second.text.split()):
        raise ValueError(f"captions {first.id} and {second.id} have the same text")
    first, second = sorted((first, second), key=lambda c: c.id)
    exists = session.scalar(select(PairwiseItem.id).where(
        PairwiseItem.collection_id == collection.id,
        or_((PairwiseItem.caption_a_id == first.id) & (PairwiseItem.caption_b_id == second.id),
            (PairwiseItem.caption_a_id == second.id) & (PairwiseItem.caption_b_id == first.id))))
    if exists is not None:
        return False
    session.add(PairwiseItem(collection_id=collection.id, caption_a_id=first.id, caption_b_id=second.id,
                             category=category or pair_category(first, second), created_by_id=user.id))
    return True


def make_pairs(session: Session, user: User, collection: Collection, include_references: bool = False) -> int:
    """Pair every two captions of the same image in `collection` that come from different
    sources (`caption_source`) and are in the same language: model candidates, and with
    `include_references` the references too. Pairs the collection has already are kept;
    returns how many are new."""
    require_role(user, *RESEARCH_ROLES)
    kinds = ("candidate", "reference") if include_references else ("candidate",)
    rows = session.scalars(select(Caption).where(in_collection(collection), Caption.kind.in_(kinds))
                           .order_by(Caption.image_id, Caption.id)).all()
    by_image: dict[tuple[int, str], list[Caption]] = {}
    for caption in rows:
        by_image.setdefault((caption.image_id, caption.language), []).append(caption)
    added = 0
    for group in by_image.values():
        for first, second in combinations(group, 2):
            if caption_source(first) == caption_source(second):
                continue
            if " ".join(first.text.split()) == " ".join(second.text.split()):
                continue
            added += _add_pair(session, user, collection, first, second)
    session.flush()
    return added


PAIR_FILE_HELP = ("A pair file is CSV or JSON Lines, one pair per row: caption_a and caption_b, each a caption id "
                  "of the collection or a caption's exact text; image (the image's file name, external id or "
                  "SHA-256) when a text occurs on several images; category optional (HC, HI, HM or MM).")


def read_pair_file(path: str | Path) -> list[dict]:
    """The rows of a pair file (CSV with a header, or JSON Lines), as dicts."""
    path = Path(path)
    if path.stat().st_size > MAX_PAIR_FILE_BYTES:
        raise ValueError(f"{path.name}: larger than {MAX_PAIR_FILE_BYTES // (1024 * 1024)} MB")
    text = path.read_bytes().decode("utf-8-sig", errors="strict")
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        rows = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                raise ValueError(f"{path.name} line {number}: not a JSON object") from None
            if not isinstance(row, dict):
                raise ValueError(f"{path.name} line {number}: not a JSON object")
            rows.append(row)
    else:
        try:
            rows = csv_records(text)
        except ValueError as exc:
            raise ValueError(f"{path.name} {exc}") from None
    if len(rows) > MAX_PAIR_ROWS:
        raise ValueError(f"{path.name}: more than {MAX_PAIR_ROWS} pairs")
    return rows


def _find_caption(session: Session, collection: Collection, value, image_hint: str, row: int, side: str) -> Caption:
    text = str(value if value is not None else "").strip()
    if not text:
        raise ValueError(f"row {row}: {side} is empty")
    query = select(Caption).where(in_collection(collection))
    if text.isdigit():
        caption = session.scalar(query.where(Caption.id == int(text)))
        if caption is not None:
            return caption
    found = [c for c in session.scalars(query.where(Caption.text == text))]
    if not found:
        found = [c for c in session.scalars(query) if " ".join(c.text.split()) == " ".join(text.split())]
    if image_hint:
        found = [c for c in found if image_hint in (c.image.original_filename, c.image.external_id, c.image.sha256)]
    if not found:
        raise ValueError(f"row {row}: {side} {text[:80]!r} is not a caption of this collection"
                         + (f" on image {image_hint!r}" if image_hint else ""))
    if len({c.image_id for c in found}) > 1:
        raise ValueError(f"row {row}: {side} {text[:80]!r} is a caption of several images; give the image column")
    return found[0]


def import_pairs(session: Session, user: User, collection: Collection, rows: list[dict]) -> int:
    """Add the pairs of a pair file (`PAIR_FILE_HELP`): every row is checked first and none
    is stored if one is wrong (the error names its row, counted from 1 after the header).
    Pairs the collection has already are kept; returns how many are new."""
    require_role(user, *RESEARCH_ROLES)
    if not rows:
        raise ValueError("the pair file has no pairs")
    checked = []
    for number, row in enumerate(rows, 1):
        missing = [name for name in ("caption_a", "caption_b") if name not in row]
        if missing:
            raise ValueError(f"row {number}: no {' or '.join(missing)} column. {PAIR_FILE_HELP}")
        hint = str(row.get("image") or "").strip()
        first = _find_caption(session, collection, row["caption_a"], hint, number, "caption_a")
        second = _find_caption(session, collection, row["caption_b"], hint, number, "caption_b")
        if first.image_id != second.image_id:
            raise ValueError(f"row {number}: caption_a and caption_b describe different images")
        if first.id == second.id or " ".join(first.text.split()) == " ".join(second.text.split()):
            raise ValueError(f"row {number}: caption_a and caption_b are the same caption")
        category = str(row.get("category") or "").strip().upper() or None
        if category is not None and category not in PASCAL_CATEGORIES:
            raise ValueError(f"row {number}: category {row.get('category')!r} is not one of "
                             f"{', '.join(PASCAL_CATEGORIES)}")
        checked.append((first, second, category))
    added = sum(_add_pair(session, user, collection, first, second, category) for first, second, category in checked)
    session.flush()
    return added


def collection_pairs(session: Session, collection: Collection) -> list[PairwiseItem]:
    return list(session.scalars(select(PairwiseItem).where(PairwiseItem.collection_id == collection.id)
                                .order_by(PairwiseItem.id)))


# ---------------------------------------------------------------------------------------
# the queue


def a_on_left(annotator_id: int, item_id: int) -> bool:
    """Whether caption A of pair `item_id` is shown on the left to this annotator: a coin drawn
    from a fixed seed, the annotator and the pair, so every annotator sees their own blind
    order and Back (or a reload) shows the same one."""
    digest = hashlib.sha256(f"{PAIR_SEED}:{int(annotator_id)}:{int(item_id)}".encode()).digest()
    return digest[0] % 2 == 0


def _verdicts():
    return PairwiseJudgment.choice.in_(VERDICTS)


def _taken(session: Session, item_id: int, user: User, now) -> int:
    """Judgments of the pair plus other annotators' live offers of it."""
    return session.scalar(select(func.count(PairwiseJudgment.id)).where(
        PairwiseJudgment.item_id == item_id,
        or_(_verdicts(), (PairwiseJudgment.choice.is_(None)) & (PairwiseJudgment.annotator_id != user.id)
            & (PairwiseJudgment.expires_at > now))))


def _lock_item(session: Session, item_id: int) -> None:
    if tasks.takes_row_locks(session):
        session.execute(select(PairwiseItem.id).where(PairwiseItem.id == item_id).with_for_update())


def _own(session: Session, user: User, item_id: int) -> PairwiseJudgment | None:
    return session.scalar(select(PairwiseJudgment).where(PairwiseJudgment.item_id == item_id,
                                                         PairwiseJudgment.annotator_id == user.id))


def _offer(session: Session, user: User, item_id: int, now, lease_seconds: float) -> None:
    """This annotator's one open offer: on `item_id`, until now + `lease_seconds`."""
    session.execute(delete(PairwiseJudgment).where(PairwiseJudgment.annotator_id == user.id,
                                                   PairwiseJudgment.choice.is_(None),
                                                   PairwiseJudgment.item_id != item_id))
    own = _own(session, user, item_id)
    expires = now + timedelta(seconds=lease_seconds)
    if own is None:
        session.add(PairwiseJudgment(item_id=item_id, annotator_id=user.id, a_left=a_on_left(user.id, item_id),
                                     offered_at=now, expires_at=expires))
    elif own.choice is None:
        own.expires_at = expires
    session.flush()


def next_pair(session: Session, user: User, collection: Collection, k: int = tasks.DEFAULT_RATINGS_PER_ITEM,
              lease_seconds: float = tasks.LEASE_SECONDS) -> PairwiseItem | None:
    """The next pair of `collection` this annotator has neither judged nor skipped, least
    judged first (then `tasks.queue_order`), reserved for them; pairs whose judgments plus
    other annotators' live offers reach `k` are not offered. Needs a writing transaction."""
    require_role(user, *ALL_ROLES)
    if k < 1:
        raise ValueError("k must be at least 1")
    _require_standing(session, user, collection)
    now = utcnow()
    items = select(PairwiseItem.id).where(PairwiseItem.collection_id == collection.id)
    judged = (select(PairwiseJudgment.item_id, func.count(PairwiseJudgment.id).label("n"))
              .where(PairwiseJudgment.item_id.in_(items), _verdicts()).group_by(PairwiseJudgment.item_id).subquery())
    offered = (select(PairwiseJudgment.item_id, func.count(PairwiseJudgment.id).label("n"))
               .where(PairwiseJudgment.item_id.in_(items), PairwiseJudgment.choice.is_(None),
                      PairwiseJudgment.annotator_id != user.id, PairwiseJudgment.expires_at > now)
               .group_by(PairwiseJudgment.item_id).subquery())
    held = select(PairwiseJudgment.item_id).where(PairwiseJudgment.annotator_id == user.id,
                                                  PairwiseJudgment.choice.is_(None))
    done = select(PairwiseJudgment.item_id).where(PairwiseJudgment.annotator_id == user.id,
                                                  PairwiseJudgment.choice.is_not(None))
    n_judged = func.coalesce(judged.c.n, 0)
    candidates = session.scalars(
        select(PairwiseItem.id)
        .outerjoin(judged, judged.c.item_id == PairwiseItem.id)
        .outerjoin(offered, offered.c.item_id == PairwiseItem.id)
        .where(PairwiseItem.collection_id == collection.id, PairwiseItem.id.not_in(done),
               n_judged + func.coalesce(offered.c.n, 0) < k)
        .order_by(PairwiseItem.id.in_(held).desc(), n_judged, tasks.queue_order(user, PairwiseItem.id),
                  PairwiseItem.id)
        .limit(8)).all()
    item_id = tasks.first_open(session, candidates, _lock_item, lambda i: _taken(session, i, user, now) >= k)
    if item_id is not None:
        _offer(session, user, item_id, now, lease_seconds)
    # Expired offers count for nothing; deleted last, skipping rows another transaction holds.
    session.execute(delete(PairwiseJudgment).where(PairwiseJudgment.id.in_(
        select(PairwiseJudgment.id).where(PairwiseJudgment.choice.is_(None), PairwiseJudgment.expires_at <= now)
        .with_for_update(skip_locked=True))))
    return None if item_id is None else session.get(PairwiseItem, item_id)


def _require_standing(session: Session, user: User, collection: Collection) -> None:
    """The study's quality control holds for pairs too: no pair for an annotator who has not
    passed its qualification round, failed it or is paused (:func:`quality.standing_refusal`)."""
    reason = quality.standing_refusal(session, user, collection)
    if reason:
        raise PermissionError(f"{reason} Nothing was saved.")


def _item(session: Session, item_id: int) -> PairwiseItem:
    item = session.get(PairwiseItem, int(item_id))
    if item is None:
        raise LookupError(f"no pair with id {item_id}")
    return item


def _item_of(session: Session, collection: Collection, item_id: int, saving: bool = False) -> PairwiseItem:
    """Pair `item_id`, which must be one of `collection`'s: a judgment sent for the collection
    on screen never lands on another collection's pair."""
    item = _item(session, item_id)
    if item.collection_id != collection.id:
        raise LookupError(f"Pair {item_id} is not a pair of collection {collection.name!r}"
                          + ("; nothing was saved." if saving else "."))
    return item


def judge_pair(session: Session, user: User, item_id: int, side: str,
               k: int | None = tasks.DEFAULT_RATINGS_PER_ITEM) -> PairwiseJudgment:
    """Record which caption of pair `item_id` this annotator finds better, as they saw it:
    "left", "right" or "tie" (stored as A, B or tie, whichever side A was on). Judging again
    (after Back) edits their judgment. A new judgment is refused when the pair's judgments and
    other annotators' live offers already reach `k` (their own offer expired meanwhile)."""
    require_role(user, *ALL_ROLES)
    given, side = side, str(side or "").strip().lower()
    if side not in SIDES:
        raise ValueError(f"choose left, right or tie, not {given!r}")
    item = _item(session, item_id)
    _require_standing(session, user, session.get(Collection, item.collection_id))
    a_left = a_on_left(user.id, item.id)
    choice = "tie" if side == "tie" else ("a" if (side == "left") == a_left else "b")
    now = utcnow()
    own = _own(session, user, item.id)
    if own is not None and own.choice in VERDICTS:
        if own.choice != choice:
            own.choice = choice
            own.version += 1
        session.flush()
        return own
    if k is not None:
        _lock_item(session, item.id)
        if _taken(session, item.id, user, now) >= k:
            if own is not None and own.choice is None:
                session.delete(own)
                session.flush()
            raise ValueError(f"Pair {item.id} already has its {k} judgments (it was not reserved for you, or your "
                             "reservation expired); "
                             "nothing was saved. Go on with the next pair.")
    if own is None:
        own = PairwiseJudgment(item_id=item.id, annotator_id=user.id, a_left=a_left, offered_at=now)
        try:
            with session.begin_nested():
                session.add(own)
        except IntegrityError:  # the same annotator's other tab got there first
            own = _own(session, user, item.id)
    seconds = None
    if own.choice is None and own.offered_at is not None:
        offered = own.offered_at if own.offered_at.tzinfo else own.offered_at.replace(tzinfo=timezone.utc)
        seconds = max(0.0, (now - offered).total_seconds())
    own.choice, own.a_left, own.decided_at, own.expires_at, own.seconds = choice, a_left, now, None, seconds
    session.flush()
    return own


def skip_pair(session: Session, user: User, item_id: int) -> None:
    """Do not offer pair `item_id` to this annotator again (a judgment of it stays as it is)."""
    require_role(user, *ALL_ROLES)
    item = _item(session, item_id)
    own = _own(session, user, item.id)
    if own is None:
        own = PairwiseJudgment(item_id=item.id, annotator_id=user.id, a_left=a_on_left(user.id, item.id))
        session.add(own)
    if own.choice in VERDICTS:
        return
    own.choice, own.decided_at, own.expires_at = "skip", utcnow(), None
    session.flush()


def earlier_pair(session: Session, user: User, collection: Collection, item_id: int | None) -> int | None:
    """What Back shows: the pair this annotator judged or skipped in `collection` just before
    `item_id` (in the order they first did so), or their latest one when `item_id` is neither
    judged nor skipped. None when there is none."""
    order = list(session.scalars(
        select(PairwiseJudgment.item_id)
        .where(PairwiseJudgment.annotator_id == user.id, PairwiseJudgment.choice.is_not(None),
               PairwiseJudgment.item_id.in_(select(PairwiseItem.id).where(PairwiseItem.collection_id == collection.id)))
        .order_by(PairwiseJudgment.decided_at, PairwiseJudgment.id)))
    if item_id in order:
        order = order[:order.index(item_id)]
    return order[-1] if order else None


@dataclass(frozen=True)
class PairProgress:
    done_by_user: int
    pairs: int
    pairs_complete: int
    k: int


def pair_progress(session: Session, user: User, collection: Collection,
                  k: int = tasks.DEFAULT_RATINGS_PER_ITEM) -> PairProgress:
    require_role(user, *ALL_ROLES)
    items = select(PairwiseItem.id).where(PairwiseItem.collection_id == collection.id)
    pairs = session.scalar(select(func.count()).select_from(items.subquery()))
    done = session.scalar(select(func.count(PairwiseJudgment.id)).where(
        PairwiseJudgment.annotator_id == user.id, PairwiseJudgment.item_id.in_(items), _verdicts()))
    full = (select(PairwiseJudgment.item_id).where(PairwiseJudgment.item_id.in_(items), _verdicts())
            .group_by(PairwiseJudgment.item_id).having(func.count(PairwiseJudgment.id) >= k))
    complete = session.scalar(select(func.count()).select_from(full.subquery()))
    return PairProgress(done, pairs, complete, k)


# ---------------------------------------------------------------------------------------
# the annotator's screen (one transaction per action, as the logged-in account)


@dataclass
class PairScreen:
    """One pair as this annotator sees it (item_id None when none is left): its image, the
    caption shown left and right, their earlier choice ("left", "right", "tie" or None)."""

    item_id: int | None
    left: str
    right: str
    image_file: str | None
    progress: str
    message: str = ""
    chosen: str | None = None

    @property
    def can_judge(self) -> bool:
        return self.item_id is not None and self.image_file is not None


def _pair_screen(session: Session, user: User, collection: Collection, item_id: int | None,
                 message: str = "") -> PairScreen:
    progress = pair_progress(session, user, collection)
    text = (f"You judged {progress.done_by_user} of {progress.pairs} pairs; "
            f"{progress.pairs_complete} pairs have {progress.k} judgments.")
    if item_id is None:
        left = ("Nothing left to compare in this collection. Thank you!" if progress.pairs else
                "This collection has no pairs to compare yet: a researcher makes them in the Pairwise tab.")
        return PairScreen(None, left, "", None, text, message)
    item = _item_of(session, collection, item_id)
    left, right = (item.caption_a, item.caption_b) if a_on_left(user.id, item.id) else (item.caption_b, item.caption_a)
    own = _own(session, user, item.id)
    chosen = None
    if own is not None and own.choice in VERDICTS:
        chosen = "tie" if own.choice == "tie" else ("left" if (own.choice == "a") == a_on_left(user.id, item.id)
                                                    else "right")
    image_file = _image_file(item.caption_a.image)
    if image_file is None:
        message = (message + " " if message else "") + _missing_image_message(item.id, "judged")
    return PairScreen(item.id, left.text, right.text, image_file, text, message, chosen)


def _collection(session: Session, name: str) -> Collection:
    if not name:
        raise ValueError("Choose a collection.")
    return get_collection(session, name)


def pair_screen(account_id: int | None, collection_name: str, item_id: int | None = None,
                message: str = "") -> PairScreen:
    """Pair `item_id`, or the next pair of the queue reserved for this annotator; none, with
    the reason, while the study's quality control holds them back."""
    if item_id is None:
        with acting(account_id) as (session, user):
            collection = _collection(session, collection_name)
            reason = quality.standing_refusal(session, user, collection)
            if reason:
                return PairScreen(None, reason, "", None, "", message)
            item = next_pair(session, user, collection)
            item_id = None if item is None else item.id
    with acting(account_id, read_only=True) as (session, user):
        return _pair_screen(session, user, _collection(session, collection_name), item_id, message)


def judge_and_next(account_id: int | None, collection_name: str, item_id: int | None, side: str) -> PairScreen:
    """Save this annotator's choice ("left", "right" or "tie") on the pair, then the next pair."""
    if item_id is None:
        raise ValueError("No pair loaded: choose a collection.")
    with acting(account_id) as (session, user):
        item = _item_of(session, _collection(session, collection_name), int(item_id), saving=True)
        if _image_file(item.caption_a.image) is None:
            raise ValueError(_missing_image_message(item.id, "judged"))
        judge_pair(session, user, item.id, side)
    return pair_screen(account_id, collection_name, message=f"Saved your choice on pair {int(item_id)}.")


def skip_and_next(account_id: int | None, collection_name: str, item_id: int | None) -> PairScreen:
    if item_id is None:
        raise ValueError("No pair loaded.")
    with acting(account_id) as (session, user):
        skip_pair(session, user, _item_of(session, _collection(session, collection_name), int(item_id),
                                           saving=True).id)
    return pair_screen(account_id, collection_name, message=f"Skipped pair {int(item_id)}.")


def earlier_pair_screen(account_id: int | None, collection_name: str, item_id: int | None) -> PairScreen:
    """Back: the pair judged or skipped before the one shown, in the same left/right order."""
    with acting(account_id, read_only=True) as (session, user):
        collection = _collection(session, collection_name)
        earlier = earlier_pair(session, user, collection, None if item_id is None else int(item_id))
        if earlier is None:
            raise ValueError("Nothing to go back to: you have not judged or skipped an earlier pair of this collection.")
        own = _own(session, user, earlier)
        note = ("Showing the pair you skipped; choosing judges it." if own.choice == "skip"
                else "Showing your earlier pair; choosing again changes your judgment.")
        return _pair_screen(session, user, collection, earlier, note)


# ---------------------------------------------------------------------------------------
# analysis and export (researcher or admin)


def _image_name(image: Image) -> str:
    return image.external_id or image.original_filename or image.sha256


def pair_votes(session: Session, user: User, collection: Collection) -> pd.DataFrame:
    """One row per pair of `collection`: pair_id, image_id, caption_a_id, caption_b_id,
    caption_a, caption_b, source_a, source_b, category, votes_a, votes_b, ties (judgments)."""
    require_role(user, *RESEARCH_ROLES)
    counts: dict[int, dict[str, int]] = {}
    for item_id, choice, n in session.execute(
            select(PairwiseJudgment.item_id, PairwiseJudgment.choice, func.count(PairwiseJudgment.id))
            .join(PairwiseItem, PairwiseItem.id == PairwiseJudgment.item_id)
            .where(PairwiseItem.collection_id == collection.id, _verdicts())
            .group_by(PairwiseJudgment.item_id, PairwiseJudgment.choice)):
        counts.setdefault(item_id, {})[choice] = n
    rows = []
    for item in collection_pairs(session, collection):
        votes = counts.get(item.id, {})
        rows.append(dict(pair_id=item.id, image_id=_image_name(item.caption_a.image), caption_a_id=item.caption_a_id,
                         caption_b_id=item.caption_b_id, caption_a=item.caption_a.text, caption_b=item.caption_b.text,
                         source_a=caption_source(item.caption_a), source_b=caption_source(item.caption_b),
                         category=item.category, votes_a=votes.get("a", 0), votes_b=votes.get("b", 0),
                         ties=votes.get("tie", 0)))
    columns = ["pair_id", "image_id", "caption_a_id", "caption_b_id", "caption_a", "caption_b", "source_a",
               "source_b", "category", "votes_a", "votes_b", "ties"]
    return pd.DataFrame(rows, columns=columns)


def judgments_table(session: Session, user: User, collection: Collection) -> pd.DataFrame:
    """Every judgment (A, B or tie) of `collection`: pair_id, annotator, choice, a_left,
    seconds, source_a, source_b."""
    require_role(user, *RESEARCH_ROLES)
    rows = session.execute(
        select(PairwiseJudgment.item_id, User.name, PairwiseJudgment.choice, PairwiseJudgment.a_left,
               PairwiseJudgment.seconds)
        .join(PairwiseItem, PairwiseItem.id == PairwiseJudgment.item_id)
        .join(User, User.id == PairwiseJudgment.annotator_id)
        .where(PairwiseItem.collection_id == collection.id, _verdicts())
        .order_by(PairwiseJudgment.id)).all()
    sources = {item.id: (caption_source(item.caption_a), caption_source(item.caption_b))
               for item in collection_pairs(session, collection)}
    return pd.DataFrame([dict(pair_id=i, annotator=name, choice=choice, a_left=bool(left), seconds=seconds,
                              source_a=sources[i][0], source_b=sources[i][1])
                         for i, name, choice, left, seconds in rows],
                        columns=["pair_id", "annotator", "choice", "a_left", "seconds", "source_a", "source_b"])


def source_ranking(judgments: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0) -> Ranking | None:
    """Bradley–Terry ranking of the caption sources from `judgments_table` (pairs of two
    captions of one source left out), resampling whole pairs; None without two sources."""
    between = judgments[judgments["source_a"] != judgments["source_b"]]
    if between.empty:
        return None
    outcome = between["choice"].map({"a": 1.0, "b": 0.0, "tie": 0.5})
    return bradley_terry_ranking(between["source_a"], between["source_b"], outcome, between["pair_id"],
                                 n_boot=n_boot, seed=seed)


@dataclass
class PairwiseReport:
    """`accuracy`: pascal50s_table's rows (metric, HC, HI, HM, MM, mean, n) over the pairs with
    a human majority and both captions scored (`n` counts them); `ranking`: the sources'
    Bradley–Terry table (None without two sources; its warning, when the sources fall into
    groups never compared with one another, ends the summary); `pairs`: pair_votes with a
    column per metric and side (M_a, M_b); `unscored`: {metric: {category: number of pairs with
    a human majority left out because a caption has no score}}, named in the summary."""

    accuracy: pd.DataFrame
    ranking: Ranking | None
    pairs: pd.DataFrame
    n_judgments: int
    n_annotators: int
    unavailable: dict
    unscored: dict = field(default_factory=dict)

    @property
    def summary(self) -> str:
        judged = int(((self.pairs["votes_a"] + self.pairs["votes_b"]) > 0).sum())
        text = (f"{self.n_judgments} judgments by {self.n_annotators} annotators; {judged} of {len(self.pairs)} pairs "
                "have a human preference (ties in the votes are broken by a seeded coin, as for Pascal-50S; "
                "pairs judged only as ties are left out). A metric is right on a pair when it scores the preferred "
                "caption higher; a metric tie counts half. A pair with a reference caption is scored against the "
                "image's other references (the pair's reference captions left out, as in Pascal-50S).")
        if self.unavailable:
            text += " Unavailable: " + "; ".join(f"{m}: {why}" for m, why in self.unavailable.items()) + "."
        if self.unscored:
            text += (" Left out for want of a score (a caption the metric cannot score, e.g. no other reference): "
                     + "; ".join(f"{m}: " + ", ".join(f"{n} {c} pair{'s' if n != 1 else ''}" for c, n in by.items())
                                 for m, by in self.unscored.items())
                     + "; a metric's mean is not given when a category with a human preference has no scored pair.")
        if self.ranking is not None and self.ranking.warning:
            text += " Ranking: " + self.ranking.warning
        return text


def metric_accuracy(pairs: pd.DataFrame, scores: pd.DataFrame, metrics: list[str], *,
                    seed: int = 0, pair_scores: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`pascal50s_table` of the pairs of `pair_votes` with a human preference (votes_a +
    votes_b > 0), each caption's score read from `scores` (caption_id and a column per
    metric), or for the pairs in `pair_scores` (pair_id and M_a, M_b) from there; and the
    pairs with the columns M_a and M_b it read. Pairs with a preference but a missing score
    are counted in `attrs["unscored"]` ({metric: {category: n}}), and a metric's mean is NaN
    when a category that has pairs with a preference has none scored (the mean would
    otherwise be over fewer categories than the study has)."""
    pairs = pairs.copy()
    by_caption = scores.set_index("caption_id")
    by_pair = None if pair_scores is None or pair_scores.empty else pair_scores.set_index("pair_id")
    for metric in metrics:
        for side in ("a", "b"):
            column = metric + "_" + side
            pairs[column] = pd.to_numeric(pairs[f"caption_{side}_id"].map(by_caption[metric]), errors="coerce")
            if by_pair is not None:
                own = pairs["pair_id"].isin(by_pair.index)
                pairs.loc[own, column] = pd.to_numeric(pairs.loc[own, "pair_id"].map(by_pair[column]),
                                                       errors="coerce")
    decided = pairs[(pairs["votes_a"] + pairs["votes_b"]) > 0].reset_index(drop=True)
    table = pascal50s_table(decided, metrics, seed=seed)
    unscored: dict[str, dict[str, int]] = {}
    for position, metric in enumerate(metrics):
        missing = decided[[metric + "_a", metric + "_b"]].isna().any(axis=1)
        counts = decided.loc[missing, "category"].value_counts()
        if len(counts):
            unscored[metric] = {c: int(counts[c]) for c in PASCAL_CATEGORIES if c in counts}
        has_pairs = set(decided["category"])
        if any(pd.isna(table.loc[position, c]) for c in PASCAL_CATEGORIES if c in has_pairs):
            table.loc[position, "mean"] = float("nan")
    table.attrs["unscored"] = unscored
    return table, pairs


def reference_pair_scores(session: Session, user: User, collection: Collection, pairs: pd.DataFrame, scorer,
                          metrics: list[str], progress=None) -> tuple[pd.DataFrame, dict]:
    """Scores (pair_id, M_a, M_b) of the pairs of `pair_votes` with a human preference that
    have a reference caption (HM, HC): both captions of such a pair are scored against the
    image's references less the pair's reference captions, so a reference caption is never
    scored against itself and both sides of the pair see the same references (Pascal-50S's
    references exclude the pair's captions too). {metric: reason} for metrics that cannot run."""
    from annotation.scores.score_store import scores_leaving_out

    references = {caption.id for item in collection_pairs(session, collection)
                  for caption in (item.caption_a, item.caption_b) if caption.kind == "reference"}
    decided = pairs[((pairs["votes_a"] + pairs["votes_b"]) > 0)
                    & (pairs["caption_a_id"].isin(references) | pairs["caption_b_id"].isin(references))]
    columns = ["pair_id", *[metric + side for metric in metrics for side in ("_a", "_b")]]
    if decided.empty:
        return pd.DataFrame(columns=columns), {}
    requests = []
    for a, b in zip(decided["caption_a_id"], decided["caption_b_id"]):
        left_out = [c for c in (int(a), int(b)) if c in references]
        requests += [(int(a), left_out), (int(b), left_out)]
    values, unavailable = scores_leaving_out(session, user, collection.name, scorer, metrics, requests, progress)
    rows = []
    for position, pair_id in enumerate(decided["pair_id"]):
        first, second = values[2 * position], values[2 * position + 1]
        rows.append({"pair_id": pair_id, **{metric + "_a": first[metric] for metric in metrics},
                     **{metric + "_b": second[metric] for metric in metrics}})
    return pd.DataFrame(rows, columns=columns), unavailable


def pairwise_analysis(session: Session, user: User, collection_name: str, scorer, metrics: list[str], *,
                      seed: int = 0, n_boot: int = 1000, progress=None) -> PairwiseReport:
    """Each metric's pairwise accuracy against the human majority of `collection_name`'s
    judgments (the Pascal-50S measure: `scoring.analysis.pairwise.pascal50s_table`, the same
    function as `caplens analyze pascal50s`), per category and their mean, with the scorer's
    cached or new scores of both captions (a pair with a reference caption scored against the
    image's other references: `reference_pair_scores`); pairs left without a score are counted
    in the report; and the sources' Bradley–Terry ranking."""
    from annotation.scores.score_store import collection_scores  # score_store imports the importer, which imports tasks

    require_role(user, *RESEARCH_ROLES)
    collection = _collection(session, collection_name)
    pairs = pair_votes(session, user, collection)
    judgments = judgments_table(session, user, collection)
    if judgments.empty:
        raise ValueError(f"Collection {collection_name!r} has no pairwise judgments yet.")
    scores = collection_scores(session, user, collection_name, scorer, list(metrics), progress)
    with_references, unavailable = reference_pair_scores(session, user, collection, pairs, scorer, list(metrics),
                                                         progress)
    accuracy, pairs = metric_accuracy(pairs, scores, list(metrics), seed=seed, pair_scores=with_references)
    unavailable = {**unavailable, **scores.attrs.get("unavailable", {})}
    unscored = {m: by for m, by in accuracy.attrs.get("unscored", {}).items() if m not in unavailable}
    return PairwiseReport(accuracy, source_ranking(judgments, n_boot=n_boot, seed=seed), pairs, len(judgments),
                          judgments["annotator"].nunique(), unavailable, unscored)


def analyse_pairs(account_id: int | None, collection_name: str, scorer, metrics, progress=None) -> PairwiseReport:
    """`pairwise_analysis` as the logged-in account (the Pairwise tab)."""
    with acting(account_id) as (session, user):
        return pairwise_analysis(session, user, collection_name, scorer, list(metrics), progress=progress)


def _cell(strings: list[str]) -> np.ndarray:
    cell = np.empty((1, len(strings)), dtype=object)
    for index, text in enumerate(strings):
        cell[0, index] = text
    return cell


def export_pascal50s(session: Session, user: User, collection: Collection, out_dir: str | Path) -> dict:
    """Write the judged pairs of `collection` as pair_pascal.mat (image, caption A, caption B
    and the category of each pair) and consensus_pascal.mat (per judgment a reference of the
    image, the two captions and the winner: 1 = A, 2 = B, 0 = tie; with `pair`, each judgment's
    pair number), which `scoring.analysis.datasets.load_pascal50s` reads back as the same
    pairs and votes. Returns {"pairs": n, "judgments": n, "folder": out_dir}."""
    from scipy.io import savemat

    require_role(user, *RESEARCH_ROLES)
    judged = session.execute(
        select(PairwiseJudgment.item_id, PairwiseJudgment.choice)
        .join(PairwiseItem, PairwiseItem.id == PairwiseJudgment.item_id)
        .where(PairwiseItem.collection_id == collection.id, _verdicts())
        .order_by(PairwiseJudgment.item_id, PairwiseJudgment.id)).all()
    if not judged:
        raise ValueError(f"Collection {collection.name!r} has no pairwise judgments to export.")
    items = {item.id: item for item in collection_pairs(session, collection)}
    order = sorted({item_id for item_id, _ in judged})
    number = {item_id: n + 1 for n, item_id in enumerate(order)}
    entries = np.empty((1, len(order)), dtype=object)
    for n, item_id in enumerate(order):
        item = items[item_id]
        entries[0, n] = _cell([_image_name(item.caption_a.image), item.caption_a.text, item.caption_b.text])
    categories = np.array([[PASCAL_CATEGORIES.index(items[i].category) + 1 for i in order]], dtype=float)
    triplets = np.empty((1, len(judged)), dtype=[("A", "O"), ("B", "O"), ("C", "O"), ("D", "O")])
    references: dict[int, str] = {}
    for position, (item_id, choice) in enumerate(judged):
        item = items[item_id]
        if item_id not in references:
            refs = tasks.reference_texts(session, item.caption_a.image_id, item.caption_a.language, limit=1)
            references[item_id] = refs[0] if refs else ""
        triplets[0, position] = (references[item_id], item.caption_a.text, item.caption_b.text,
                                 np.array([[float({"a": 1, "b": 2, "tie": 0}[choice])]]))
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    savemat(folder / "pair_pascal.mat", {"new_input": entries, "category": categories})
    savemat(folder / "consensus_pascal.mat", {"triplets": triplets,
                                              "pair": np.array([[number[i] for i, _ in judged]], dtype=float)})
    return {"pairs": len(order), "judgments": len(judged), "folder": str(folder)}


# ---------------------------------------------------------------------------------------
# the researcher's actions, as the logged-in account (the Pairwise tab)


def make_pairs_for(account_id: int | None, collection_name: str, include_references: bool = False) -> str:
    """`make_pairs` of the collection; what to tell the researcher."""
    with acting(account_id) as (session, user):
        collection = _collection(session, collection_name)
        added = make_pairs(session, user, collection, include_references)
        total = len(collection_pairs(session, collection))
    if not total:
        return (f"{collection_name} has no two captions of one image from different sources (source_model) to "
                "pair; import a pair file instead.")
    return f"{added} new pairs; {collection_name} has {total} pairs to compare."


def import_pair_file(account_id: int | None, collection_name: str, path: str | None) -> str:
    """`import_pairs` of an uploaded pair file (all rows or none); what to tell the researcher."""
    if not path:
        raise ValueError("Upload a pair file first. " + PAIR_FILE_HELP)
    rows = read_pair_file(path)
    with acting(account_id) as (session, user):
        collection = _collection(session, collection_name)
        added = import_pairs(session, user, collection, rows)
        total = len(collection_pairs(session, collection))
    return f"{added} new pairs from {Path(path).name}; {collection_name} has {total} pairs to compare."


def pascal50s_download(account_id: int | None, collection_name: str, folder: Path) -> tuple[str, dict]:
    """(zip in `folder` with pair_pascal.mat and consensus_pascal.mat, summary) of the
    collection's judged pairs (`export_pascal50s`)."""
    import tempfile

    from annotation.transfer.transfers import _downloadable

    with tempfile.TemporaryDirectory(prefix=".pascal-", dir=folder) as staging:
        out = Path(staging) / "pascal50s"  # not the collection's name: "../x" would write outside
        with acting(account_id, read_only=True) as (session, user):
            summary = export_pascal50s(session, user, _collection(session, collection_name), out)
        return _downloadable(out, folder), {"pairs": summary["pairs"], "judgments": summary["judgments"]}
