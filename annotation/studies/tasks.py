"""Annotators' work: the rating queue and ratings, the transcreation queue, critical objects.

Queues offer each annotator the items that still need work, least-done first, never one they
did or skipped. The rating queue reserves the item it offers with a lease (`RatingLease`,
`LEASE_SECONDS`): a live lease counts towards the item's k like a rating, so a crowd working at
once never gives an item more than k ratings, and an item whose annotator left without rating
returns to the queue when the lease expires. Roles are checked here, server-side: an annotator reads and edits only their
own ratings; researchers and admins read everyone's. Permission problems raise
PermissionError, bad input ValueError, unknown ids LookupError.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from datetime import timedelta, timezone

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from annotation.studies import queue_orders
from annotation.people.accounts import ALL_ROLES, RESEARCH_ROLES, require_role
from annotation.captions import get_caption, image_references, in_collection, validate_caption_text, validate_language
from db.models import (
    Caption,
    CheckItem,
    Collection,
    CriticalAnnotation,
    Image,
    QueueSkip,
    Rating,
    RatingLease,
    RatingRevision,
    Transcreation,
    User,
    utcnow,
)
from scoring.analysis.tables import rating_mean

RATING_FIELDS = ("overall", "fluency", "relevance", "descriptiveness")
DEFAULT_RATINGS_PER_ITEM = 3
LEASE_SECONDS = 10 * 60  # how long an offered item stays reserved for its annotator

# M-CapEval1k transcreation guidance (PR-MCS appendix C, Figures 10-11), in our own words.
TRANSCREATION_INSTRUCTIONS = """\
You are writing this caption again in another language so that it keeps its score.

1. You see an image and an English caption of it. Write the caption in the target language.
2. The image can be a photograph, a drawing, or just a background.
3. The caption was produced by a captioning model and may describe the image badly. Its
   human score (0 = wrong, 1 = perfect) is shown beside it.
4. Your caption must deserve the same score as the English one, or very nearly: keep its
   mistakes, omissions and vagueness. Do not fix it and do not improve it.
5. Keep typos and details that do not match the image as they are, carried over into the
   target language.
6. Up to five human reference captions are shown. They only show what a caption scoring 1.0
   looks like; do not translate them and do not borrow from them.
7. The aim is a caption in each language that fits its own score.
"""

TRANSCREATION_EXAMPLES = tuple(dict(zip(("caption", "score", "good", "bad", "why_bad"), example)) for example in (
    ("a bird perched on top of a tree", 0.25, "a bird sitting on top of a tree", "two birds sitting on a tree",
     "it corrects the number of birds, which the original caption got wrong"),
    ("a person holding a cell phone in their hand", 0.8, "a person holding a mobile phone in their hand",
     "a young girl is holding a cell phone",
     "it adds information (a young girl) that the original caption does not contain"),
    ("a tray of food with a bunch of bananas.", 0.4, "a tray of food items with a bunch of bananas",
     "a tray of food including a banana.",
     "it repairs a mistake of the original (a bunch of bananas instead of one)"),
    ("a baby brushing his teeth with a toothbrush.", 0.85, "a baby brushing his teeth with a toothbrush.",
     "a crying baby brushing his teeth with a toothbrush.", "it invents a detail (crying) that nobody asked for"),
))

CRITICAL_INSTRUCTIONS = """\
Mark what a substitution perturbation should swap (M-FineCap3k, PR-MCS section 4).
Critical objects: the most important things the caption describes, copied exactly as they
appear in the caption, attributes included (e.g. "white shirt", "green field").
Backgrounds: the setting or scenery (e.g. "blue sky"). Relationships: how objects relate
(e.g. "playing golf on"). Phrases must be copied from the caption text.
"""


# ---------------------------------------------------------------------------------------
# rating queue and ratings


QUEUE_CYCLE = 1009  # a prime: each annotator's order of ids repeats every QUEUE_CYCLE ids


def queue_order(user: User, item_id=None):
    """A per-annotator tie-break so annotators working at once start on different items, over
    the column `item_id` of the queue's items (captions by default; the pairwise queue's pairs).

    Each annotator gets their own scramble of the ids, (id × a + b) mod 1009 with a and b drawn
    from their user id, so annotators' first items differ even in a study of a few captions.
    The id is reduced first, which keeps the arithmetic small on PostgreSQL's 32-bit integers."""
    item = Caption.id if item_id is None else item_id
    scale = (user.id * 856 + 802) % QUEUE_CYCLE or 1
    shift = user.id * 331 % QUEUE_CYCLE
    return ((item % QUEUE_CYCLE) * scale + shift) % QUEUE_CYCLE


def takes_row_locks(session: Session) -> bool:
    """Whether the database locks rows (PostgreSQL). SQLite's writing transaction already holds
    its one write lock, so there a row lock would be a statement that locks nothing."""
    return session.get_bind().dialect.name != "sqlite"


def _lock_caption(session: Session, caption_id: int) -> None:
    """Serialize decisions about one caption's k: PostgreSQL locks its row until the
    transaction ends; SQLite's writing transactions already hold the one write lock."""
    if takes_row_locks(session):
        session.execute(select(Caption.id).where(Caption.id == caption_id).with_for_update())


def _taken(session: Session, caption_id: int, user: User) -> int:
    """Ratings of the caption plus other annotators' live leases on it."""
    ratings = session.scalar(select(func.count(Rating.id)).where(Rating.caption_id == caption_id))
    leases = session.scalar(select(func.count(RatingLease.id)).where(
        RatingLease.caption_id == caption_id, RatingLease.annotator_id != user.id,
        RatingLease.expires_at > utcnow()))
    return ratings + leases


def next_rating_item(session: Session, user: User, collection: Collection,
                     k: int = DEFAULT_RATINGS_PER_ITEM, lease_seconds: float = LEASE_SECONDS) -> Caption | None:
    """The next caption this annotator has neither rated nor skipped, least-rated first (then
    in the collection's queue order, `annotation.studies.queue_orders`), reserved for them with a lease of `lease_seconds` (the one they already hold comes first).

    Items whose ratings plus other annotators' live leases reach `k` are not offered, so work
    goes where it is needed until every item has exactly `k`. Reference captions are context,
    not rated, nor are check items (`annotation.studies.quality` serves those). Needs a writing
    transaction (the lease is written).
    """
    require_role(user, *ALL_ROLES)
    if k < 1:
        raise ValueError("k must be at least 1")
    now = utcnow()
    in_coll = select(Caption.id).where(in_collection(collection))
    counts = (select(Rating.caption_id, func.count(Rating.id).label("n"))
              .where(Rating.caption_id.in_(in_coll))
              .group_by(Rating.caption_id).subquery())
    leased = (select(RatingLease.caption_id, func.count(RatingLease.id).label("n"))
              .where(RatingLease.caption_id.in_(in_coll), RatingLease.annotator_id != user.id,
                     RatingLease.expires_at > now)
              .group_by(RatingLease.caption_id).subquery())
    held = select(RatingLease.caption_id).where(RatingLease.annotator_id == user.id, RatingLease.expires_at > now)
    n_ratings = func.coalesce(counts.c.n, 0)
    n_taken = n_ratings + func.coalesce(leased.c.n, 0)
    mine = select(Rating.caption_id).where(Rating.annotator_id == user.id)
    skipped = select(QueueSkip.caption_id).where(QueueSkip.annotator_id == user.id, QueueSkip.task == "rating")
    query = (
        select(Caption)
        .outerjoin(counts, counts.c.caption_id == Caption.id)
        .outerjoin(leased, leased.c.caption_id == Caption.id)
        .where(in_collection(collection), Caption.kind != "reference",
               Caption.id.not_in(mine), Caption.id.not_in(skipped), Caption.id.not_in(select(CheckItem.caption_id)),
               n_taken < k)
        .order_by(Caption.id.in_(held).desc(), n_ratings, queue_order(user), Caption.id)
    )
    if collection.queue_order == queue_orders.DISAGREEMENT_FIRST:
        rows = session.execute(query.with_only_columns(Caption.id, n_ratings, Caption.id.in_(held))).all()
        candidates = queue_orders.by_disagreement(session, user, collection, [tuple(r) for r in rows])[:8]
    else:
        candidates = session.scalars(query.with_only_columns(Caption.id).limit(8)).all()
    caption_id = first_open(session, candidates, _lock_caption, lambda c: _taken(session, c, user) >= k)
    if caption_id is not None:
        _lease(session, user, caption_id, now + timedelta(seconds=lease_seconds))
    _drop_expired_leases(session, now)
    return None if caption_id is None else session.get(Caption, caption_id)


def first_open(session: Session, candidates, lock: Callable[[Session, int], None],
               full: Callable[[int], bool]) -> int | None:
    """The first candidate that is not `full` once `lock` holds its row (another annotator may
    have filled it since the queue's query), locked for the rest of the transaction. A full
    candidate's lock is let go (its savepoint rolled back) before the next is locked, so a
    queue never waits for one item while holding another: on PostgreSQL two annotators whose
    orders cross would otherwise deadlock. The rating and the pairwise queues share it. On
    SQLite the writing transaction holds the one write lock, so there is nothing to lock or let go."""
    if not takes_row_locks(session):
        return next((item_id for item_id in candidates if not full(item_id)), None)
    for item_id in candidates:
        savepoint = session.begin_nested()
        lock(session, item_id)
        if full(item_id):
            savepoint.rollback()
            continue
        savepoint.commit()
        return item_id
    return None


def _drop_expired_leases(session: Session, now) -> None:
    """Delete expired leases (they already count for nothing), skipping rows another transaction
    holds, so this clean-up never waits: done last, it cannot close a lock cycle with an
    annotator who is saving a rating and ending their own lease meanwhile."""
    session.execute(delete(RatingLease).where(RatingLease.id.in_(
        select(RatingLease.id).where(RatingLease.expires_at <= now).with_for_update(skip_locked=True))))


def _lease(session: Session, user: User, caption_id: int, expires_at) -> None:
    """This annotator's one lease in the queue: on `caption_id`, until `expires_at`."""
    held = session.scalars(select(RatingLease).where(RatingLease.annotator_id == user.id)).all()
    others = [other.id for other in held if other.caption_id != caption_id]
    if others:
        session.execute(delete(RatingLease).where(RatingLease.id.in_(others)))
    lease = next((mine for mine in held if mine.caption_id == caption_id), None)
    if lease is None:
        session.add(RatingLease(caption_id=caption_id, annotator_id=user.id, expires_at=expires_at))
    else:
        lease.expires_at = expires_at
    session.flush()


def reserve_item(session: Session, user: User, caption_id: int, lease_seconds: float = LEASE_SECONDS) -> None:
    """Reserve `caption_id` for this annotator as the queue's offer (their one lease), e.g. a
    check item `annotation.studies.quality` serves; the seconds to its save count from the first offer."""
    _lease(session, user, caption_id, utcnow() + timedelta(seconds=lease_seconds))


def release_lease(session: Session, user: User, caption_id: int | None = None) -> None:
    """Give back this annotator's lease (on `caption_id`, or any)."""
    query = delete(RatingLease).where(RatingLease.annotator_id == user.id)
    if caption_id is not None:
        query = query.where(RatingLease.caption_id == caption_id)
    session.execute(query)


@dataclass(frozen=True)
class QueueProgress:
    done_by_user: int
    items: int
    items_complete: int  # items with at least k ratings
    k: int


def rating_progress(session: Session, user: User, collection: Collection,
                    k: int = DEFAULT_RATINGS_PER_ITEM) -> QueueProgress:
    require_role(user, *ALL_ROLES)
    rateable = select(Caption.id).where(in_collection(collection), Caption.kind != "reference",
                                        Caption.id.not_in(select(CheckItem.caption_id)))
    items = select(func.count()).select_from(rateable.subquery()).scalar_subquery()
    done = select(func.count(Rating.id)).where(Rating.annotator_id == user.id,
                                               Rating.caption_id.in_(rateable)).scalar_subquery()
    per_item = (select(Rating.caption_id).where(Rating.caption_id.in_(rateable)).group_by(Rating.caption_id)
                .having(func.count(Rating.id) >= k))
    complete = select(func.count()).select_from(per_item.subquery()).scalar_subquery()
    items, done, complete = session.execute(select(items, done, complete)).one()  # one statement per screen
    return QueueProgress(done, items, complete, k)


def skip_item(session: Session, user: User, caption_id: int, task: str = "rating", language: str = "") -> None:
    """Do not offer this caption to this annotator again in `task` (per target language)."""
    require_role(user, *ALL_ROLES)
    get_caption(session, caption_id)
    if task == "rating":
        release_lease(session, user, caption_id)
    exists = session.scalar(select(QueueSkip.id).where(
        QueueSkip.annotator_id == user.id, QueueSkip.caption_id == caption_id,
        QueueSkip.task == task, QueueSkip.language == language))
    if exists is None:
        session.add(QueueSkip(annotator_id=user.id, caption_id=caption_id, task=task, language=language))
        session.flush()


def validate_rating_values(values: dict) -> dict:
    unknown = set(values) - set(RATING_FIELDS)
    if unknown:
        raise ValueError(f"unknown rating fields: {', '.join(sorted(unknown))}")
    clean = {}
    for name, value in values.items():
        if value is None:
            if name == "overall":
                raise ValueError("the overall score is required")
            clean[name] = None
            continue
        if isinstance(value, bool):  # float(True) is 1.0: a JSON true is not a score
            raise ValueError(f"{name} must be a number between 0 and 1, got {value!r}")
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):  # OverflowError: an integer too large for a float
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            raise ValueError(f"{name} must be a number between 0 and 1, got {shown}") from None
        if not (0.0 <= number <= 1.0) or math.isnan(number):
            raise ValueError(f"{name} must be between 0 and 1, got {value!r}")
        clean[name] = number
    return clean


def own_rating(session: Session, user: User, caption_id: int) -> Rating | None:
    """This annotator's rating of the caption, if any."""
    return session.scalar(select(Rating).where(Rating.caption_id == caption_id, Rating.annotator_id == user.id))


def earlier_queue_item(session: Session, user: User, collection: Collection, caption_id: int | None) -> int | None:
    """What Back shows in the rating queue: the caption this annotator rated or skipped in
    `collection` just before `caption_id` (in the order they first did so), or the latest one
    when `caption_id` is neither rated nor skipped. A skipped item is on the way back, so Back
    right after Skip returns to it. None when there is none."""
    in_coll = select(Caption.id).where(in_collection(collection))
    done = [*session.execute(select(Rating.created_at, Rating.caption_id)
                             .where(Rating.annotator_id == user.id, Rating.caption_id.in_(in_coll))),
            *session.execute(select(QueueSkip.created_at, QueueSkip.caption_id)
                             .where(QueueSkip.annotator_id == user.id, QueueSkip.task == "rating",
                                    QueueSkip.caption_id.in_(in_coll)))]
    order: list[int] = []
    for _at, done_id in sorted(done, key=lambda row: row[0]):
        if done_id not in order:
            order.append(done_id)
    if caption_id in order:
        order = order[:order.index(caption_id)]
    return order[-1] if order else None


def seconds_on(session: Session, user: User, caption_id: int) -> float | None:
    """Seconds since the queue offered this caption to this annotator (their lease), or None."""
    offered = session.scalar(select(RatingLease.created_at).where(RatingLease.annotator_id == user.id,
                                                                  RatingLease.caption_id == caption_id))
    if offered is None:
        return None
    if offered.tzinfo is None:  # SQLite hands back naive datetimes; CapLens writes UTC
        offered = offered.replace(tzinfo=timezone.utc)
    return max(0.0, (utcnow() - offered).total_seconds())


def submit_rating(session: Session, user: User, caption_id: int, overall: float, fluency: float | None = None,
                  relevance: float | None = None, descriptiveness: float | None = None,
                  k: int | None = None) -> Rating:
    """Rate a caption (0-1); rating it again edits this annotator's rating, keeping history.

    A new rating records the seconds since the queue offered the caption (`Rating.seconds`).
    With `k` (the queue's cap), a new rating is refused when the caption's ratings plus other
    annotators' live leases already reach `k` (this annotator's lease expired and others
    filled the item). This annotator's lease on the caption ends. A study's quality control
    holds here as in its queue: refused before the qualification round is passed or while
    paused, and for a check item, whose answer `quality.submit` judges instead.
    """
    require_role(user, *ALL_ROLES)
    values = validate_rating_values(dict(overall=overall, fluency=fluency, relevance=relevance,
                                         descriptiveness=descriptiveness))
    caption = get_caption(session, caption_id)
    if caption.kind == "reference":
        raise ValueError(f"caption {caption_id} is a reference caption; references are not rated")
    if session.scalar(select(CheckItem.id).where(CheckItem.caption_id == caption_id)) is not None:
        raise ValueError(f"caption {caption_id} is a check item of a study: its answer is judged, not stored "
                         "as a rating (annotation.studies.quality.submit); nothing was saved")
    from annotation.studies.quality import require_may_rate  # quality builds on this module

    require_may_rate(session, user, caption_id)  # the study's qualification and pauses hold here too
    existing = own_rating(session, user, caption_id)
    if existing is not None:
        release_lease(session, user, caption_id)
        return _apply_edit(session, existing, values)
    if k is not None:
        _lock_caption(session, caption_id)
        if _taken(session, caption_id, user) >= k:
            release_lease(session, user, caption_id)
            raise ValueError(f"Caption {caption_id} already has its {k} ratings (it was not reserved for you, or "
                             "your reservation expired); "
                             "nothing was saved. Go on with the next item.")
    seconds = seconds_on(session, user, caption_id)
    release_lease(session, user, caption_id)
    try:
        with session.begin_nested():
            rating = Rating(caption_id=caption_id, annotator_id=user.id, seconds=seconds, **values)
            session.add(rating)
    except IntegrityError:
        # The same annotator's other request (another tab) inserted it first: edit that one.
        return _apply_edit(session, own_rating(session, user, caption_id), values)
    return rating


def _apply_edit(session: Session, rating: Rating, values: dict) -> Rating:
    if all(getattr(rating, name) == value for name, value in values.items()):
        return rating
    session.add(RatingRevision(
        rating=rating, version=rating.version, valid_from=rating.updated_at,
        **{name: getattr(rating, name) for name in RATING_FIELDS},
    ))
    for name, value in values.items():
        setattr(rating, name, value)
    rating.version += 1
    rating.updated_at = utcnow()
    session.flush()
    return rating


def get_rating(session: Session, user: User, rating_id: int) -> Rating:
    """A rating; annotators may only read their own."""
    require_role(user, *ALL_ROLES)
    rating = session.get(Rating, rating_id)
    if rating is None:
        raise LookupError(f"no rating with id {rating_id}")
    if rating.annotator_id != user.id and user.role not in RESEARCH_ROLES:
        raise PermissionError(f"{user.name} may only read their own ratings")
    return rating


def rating_history(session: Session, user: User, rating_id: int) -> list[RatingRevision]:
    """Earlier versions of a rating, oldest first (same read rules as `get_rating`)."""
    return list(get_rating(session, user, rating_id).revisions)


def list_ratings(session: Session, user: User, collection: Collection | None = None,
                 annotator: User | None = None) -> list[Rating]:
    """Ratings visible to `user`: annotators get only their own, researchers anyone's."""
    require_role(user, *ALL_ROLES)
    if user.role not in RESEARCH_ROLES:
        if annotator is not None and annotator.id != user.id:
            raise PermissionError(f"{user.name} may only read their own ratings")
        annotator = user
    query = select(Rating).order_by(Rating.id)
    if annotator is not None:
        query = query.where(Rating.annotator_id == annotator.id)
    if collection is not None:
        query = query.where(Rating.caption_id.in_(select(Caption.id).where(in_collection(collection))))
    return list(session.scalars(query))


def delete_rating(session: Session, user: User, rating_id: int) -> None:
    """Delete a rating: its author withdraws their own (the caption goes back to the queue),
    a researcher or admin deletes anyone's. Its edit history goes with it."""
    require_role(user, *ALL_ROLES)
    rating = session.get(Rating, rating_id)
    if rating is None:
        raise LookupError(f"no rating with id {rating_id}")
    if rating.annotator_id != user.id and user.role not in RESEARCH_ROLES:
        raise PermissionError(f"{user.name} may only withdraw their own ratings")
    session.delete(rating)
    session.flush()


def human_score(session: Session, caption_id: int) -> float | None:
    """Mean overall rating of a caption (None when unrated)."""
    return rating_mean(session.scalar(select(func.avg(Rating.overall)).where(Rating.caption_id == caption_id)))


# ---------------------------------------------------------------------------------------
# transcreation queue


@dataclass
class TranscreationTask:
    """What the transcreation screen shows for one caption."""

    caption: Caption
    image: Image
    source_score: float
    references: list[str]
    target_language: str
    instructions: str = TRANSCREATION_INSTRUCTIONS
    examples: tuple = TRANSCREATION_EXAMPLES


def reference_texts(session: Session, image_id: int, language: str, limit: int = 5) -> list[str]:
    """Up to `limit` reference captions of an image in `language`, first stored first, each once."""
    return image_references(session, [image_id], language).get((image_id, language), [])[:limit]


def next_transcreation_item(session: Session, user: User, collection: Collection, target_language: str,
                            source_language: str = "en", k: int = DEFAULT_RATINGS_PER_ITEM) -> TranscreationTask | None:
    """The next rated `source_language` caption nobody has transcreated into `target_language`.

    Blind overlap: the screen shows the caption's mean human score, so it offers only captions
    this annotator can no longer be asked to rate: rated by them, or with all `k` ratings.
    """
    require_role(user, *ALL_ROLES)
    target_language = validate_language(target_language)
    if target_language == source_language:
        raise ValueError("target language equals the source language")
    done = select(Transcreation.source_caption_id).where(Transcreation.target_language == target_language)
    skipped = select(QueueSkip.caption_id).where(QueueSkip.annotator_id == user.id,
                                                 QueueSkip.task == "transcreation",
                                                 QueueSkip.language == target_language)
    mine = select(Rating.caption_id).where(Rating.annotator_id == user.id)
    complete = select(Rating.caption_id).group_by(Rating.caption_id).having(func.count(Rating.id) >= k)
    caption = session.scalar(
        select(Caption)
        .where(in_collection(collection), Caption.kind == "candidate", Caption.language == source_language,
               Caption.id.in_(mine) | Caption.id.in_(complete), Caption.id.not_in(done), Caption.id.not_in(skipped))
        .order_by(queue_order(user), Caption.id)
        .limit(1))
    if caption is None:
        return None
    return TranscreationTask(caption=caption, image=caption.image, source_score=human_score(session, caption.id),
                             references=reference_texts(session, caption.image_id, source_language),
                             target_language=target_language)


def submit_transcreation(session: Session, user: User, source_caption_id: int, target_language: str,
                         text: str) -> Transcreation:
    """Save a transcreation as a new caption (kind `transcreated`, parent = the source).

    The source's current mean human score is stored with it: that is the score the new
    caption is meant to keep. Submitting again for the same caption and language edits it.
    """
    require_role(user, *ALL_ROLES)
    target_language = validate_language(target_language)
    text = validate_caption_text(text)
    source = get_caption(session, source_caption_id)
    if source.kind in ("transcreated", "perturbed", "reference"):
        raise ValueError(f"caption {source_caption_id} is a {source.kind} caption; transcreate model candidates")
    if source.language == target_language:
        raise ValueError("target language equals the caption's language")
    score = human_score(session, source.id)
    if score is None:
        raise ValueError(f"caption {source_caption_id} has no human rating: there is no score to preserve")
    existing = session.scalar(select(Transcreation).where(
        Transcreation.source_caption_id == source.id, Transcreation.target_language == target_language,
        Transcreation.annotator_id == user.id))
    if existing is not None:
        existing.text = existing.result_caption.text = text
        existing.source_score = score
        existing.updated_at = utcnow()
        session.flush()
        return existing
    result = Caption(image_id=source.image_id, text=text, language=target_language, kind="transcreated",
                     source_model=source.source_model, parent_id=source.id, created_by_id=user.id)
    result.collections.extend(source.collections)
    session.add(result)
    session.flush()
    transcreation = Transcreation(source_caption_id=source.id, result_caption_id=result.id,
                                  target_language=target_language, text=text, annotator_id=user.id,
                                  source_score=score)
    session.add(transcreation)
    session.flush()
    return transcreation


# ---------------------------------------------------------------------------------------
# critical objects (for substitution perturbations)


def _phrases(text: str) -> list[str]:
    """The comma-separated phrases of a typed or imported marking, each once."""
    return list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))


# A word of a caption, for marking by clicking: a run of letters and digits (with inner
# apostrophes and hyphens), or one Chinese character or kana, which are written without spaces.
_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W_]+(?:['’-][^\W_]+)*")


def caption_words(text: str) -> list[tuple[int, int]]:
    """Character spans (start, end) of the words of a caption, in order."""
    return [match.span() for match in _WORD.finditer(text)]


def join_word_spans(text: str, spans: Iterable[Sequence[int]]) -> list[tuple[int, int]]:
    """Word spans merged into phrases: chosen words with only spaces between them (no word
    left out) are one phrase, e.g. "white" + "shirt" -> "white shirt"."""
    phrases: list[list[int]] = []
    for start, end in sorted({(int(s), int(e)) for s, e in spans}):
        if phrases and not text[phrases[-1][1]:start].strip():
            phrases[-1][1] = max(phrases[-1][1], end)
        else:
            phrases.append([start, end])
    return [(start, end) for start, end in phrases]


def _spans_of(text: str, values: Sequence[str] | str, what: str) -> list[tuple[str, list[int]]]:
    """(phrase, [start, end]) for each marked phrase: a (start, end) character span of the
    caption, or a phrase typed or imported as text, found in the caption case-insensitively."""
    items = _phrases(values) if isinstance(values, str) else list(values)
    marked: list[tuple[str, list[int]]] = []
    for item in items:
        if isinstance(item, str):
            if not item.strip():
                continue
            phrase = item.strip()
            # the phrase as whole words ("a" is not the a of "cat"); else anywhere, as in Japanese
            found = (re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text, re.IGNORECASE)
                     or re.search(re.escape(phrase), text, re.IGNORECASE))
            if found is None:
                raise ValueError(f"not in the caption text: {phrase!r}")
            span = list(found.span())
        else:
            try:
                start, end = (int(v) for v in item)
            except (TypeError, ValueError):
                raise ValueError(f"{what}: a span is (start, end), got {item!r}") from None
            if not 0 <= start < end <= len(text):
                raise ValueError(f"{what}: span ({start}, {end}) is outside the caption (length {len(text)})")
            phrase, span = text[start:end], [start, end]
        if phrase not in (p for p, _ in marked):
            marked.append((phrase, span))
    return marked


def next_critical_item(session: Session, user: User, collection: Collection) -> Caption | None:
    """The next caption (not perturbed) this annotator has not marked or skipped."""
    require_role(user, *ALL_ROLES)
    mine = select(CriticalAnnotation.caption_id).where(CriticalAnnotation.annotator_id == user.id)
    skipped = select(QueueSkip.caption_id).where(QueueSkip.annotator_id == user.id, QueueSkip.task == "critical")
    return session.scalar(
        select(Caption)
        .where(in_collection(collection), Caption.kind.in_(("reference", "candidate", "transcreated")),
               Caption.id.not_in(mine), Caption.id.not_in(skipped))
        .order_by(queue_order(user), Caption.id).limit(1))


def marked_phrases(text: str, critical_objects: Sequence | str, backgrounds: Sequence | str = (),
                   relationships: Sequence | str = ()) -> dict:
    """A marking as stored: the phrases of each group and, under "spans", their character
    spans in `text` (see `mark_critical`; imports store theirs through this too)."""
    found = {"critical_objects": _spans_of(text, critical_objects, "critical objects"),
             "backgrounds": _spans_of(text, backgrounds, "backgrounds"),
             "relationships": _spans_of(text, relationships, "relationships")}
    marked = {name: [phrase for phrase, _ in items] for name, items in found.items()}
    marked["spans"] = {name: [span for _, span in items] for name, items in found.items()}
    return marked


def mark_critical(session: Session, user: User, caption_id: int, critical_objects: Sequence | str,
                  backgrounds: Sequence | str = (), relationships: Sequence | str = ()) -> CriticalAnnotation:
    """Record critical objects, backgrounds and relationships of a caption.

    Each is a (start, end) character span of the caption (the Annotate tab's clicked words)
    or a phrase that must occur in the caption text (case-insensitively; imports, the
    Perturbation lab), because substitution swaps those exact spans. Both the phrases and
    their character spans are stored. Marking again replaces this annotator's earlier marking.
    """
    require_role(user, *ALL_ROLES)
    caption = get_caption(session, caption_id)
    marked = marked_phrases(caption.text, critical_objects, backgrounds, relationships)
    if not marked["critical_objects"]:
        raise ValueError("mark at least one critical object")
    annotation = session.scalar(select(CriticalAnnotation).where(
        CriticalAnnotation.caption_id == caption_id, CriticalAnnotation.annotator_id == user.id))
    if annotation is None:
        annotation = CriticalAnnotation(caption_id=caption_id, annotator_id=user.id, **marked)
        session.add(annotation)
    else:
        for name, value in marked.items():
            setattr(annotation, name, value)
        annotation.updated_at = utcnow()
    session.flush()
    return annotation


def critical_objects(session: Session, caption_id: int) -> list[str]:
    """Critical objects of a caption from all annotators, first-marked first (for perturb)."""
    merged: list[str] = []
    for annotation in session.scalars(select(CriticalAnnotation).where(CriticalAnnotation.caption_id == caption_id)
                                      .order_by(CriticalAnnotation.id)):
        merged.extend(p for p in annotation.critical_objects if p not in merged)
    return merged
