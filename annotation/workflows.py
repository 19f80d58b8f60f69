"""Annotation workflows: rating queue, transcreation queue, critical-object marking, agreement.

Plain library functions for the UI and the command line. Each takes an open SQLAlchemy
`Session` (the caller owns the transaction, e.g. `annotation.database.database_session()`) and the
acting `User`, and checks that user's role itself: an annotator reads and edits only their
own ratings; collections, captions, deletion and agreement reports are researcher or admin
actions. Permission problems raise `PermissionError`, bad input `ValueError`, unknown ids
`LookupError`.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING

from sqlalchemy import and_, delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.models import (
    CAPTION_KINDS,
    Caption,
    Collection,
    CriticalAnnotation,
    Image,
    MetricScore,
    QueueSkip,
    Rating,
    RatingRevision,
    Transcreation,
    User,
    collection_captions,
    utcnow,
)
from annotation.accounts import RESEARCH_ROLES, require_role

if TYPE_CHECKING:
    import numpy

ALL_ROLES = ("annotator", "researcher", "admin")
RATING_FIELDS = ("overall", "fluency", "relevance", "descriptiveness")
DEFAULT_RATINGS_PER_ITEM = 3
MAX_CAPTION_CHARS = 5000

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

TRANSCREATION_EXAMPLES = (
    {
        "caption": "a bird perched on top of a tree", "score": 0.25,
        "good": "a bird sitting on top of a tree",
        "bad": "two birds sitting on a tree",
        "why_bad": "it corrects the number of birds, which the original caption got wrong",
    },
    {
        "caption": "a person holding a cell phone in their hand", "score": 0.8,
        "good": "a person holding a mobile phone in their hand",
        "bad": "a young girl is holding a cell phone",
        "why_bad": "it adds information (a young girl) that the original caption does not contain",
    },
    {
        "caption": "a tray of food with a bunch of bananas.", "score": 0.4,
        "good": "a tray of food items with a bunch of bananas",
        "bad": "a tray of food including a banana.",
        "why_bad": "it repairs a mistake of the original (a bunch of bananas instead of one)",
    },
    {
        "caption": "a baby brushing his teeth with a toothbrush.", "score": 0.85,
        "good": "a baby brushing his teeth with a toothbrush.",
        "bad": "a crying baby brushing his teeth with a toothbrush.",
        "why_bad": "it invents a detail (crying) that nobody asked for",
    },
)

CRITICAL_INSTRUCTIONS = """\
Mark what a substitution perturbation should swap (M-FineCap3k, PR-MCS section 4).
Critical objects: the most important things the caption describes, copied exactly as they
appear in the caption, attributes included (e.g. "white shirt", "green field").
Backgrounds: the setting or scenery (e.g. "blue sky"). Relationships: how objects relate
(e.g. "playing golf on"). Phrases must be copied from the caption text.
"""


# ---------------------------------------------------------------------------------------
# collections and captions


def get_collection(session: Session, name: str) -> Collection:
    collection = session.scalar(select(Collection).where(Collection.name == name))
    if collection is None:
        raise LookupError(f"no collection named {name!r}")
    return collection


def list_collections(session: Session, user: User) -> list[Collection]:
    require_role(user, *ALL_ROLES)
    return list(session.scalars(select(Collection).order_by(Collection.name)))


def get_or_create_collection(session: Session, user: User, name: str, description: str | None = None) -> Collection:
    require_role(user, *RESEARCH_ROLES)
    name = (name or "").strip()
    if not name or len(name) > 200:
        raise ValueError("collection name must be 1-200 characters")
    collection = session.scalar(select(Collection).where(Collection.name == name))
    if collection is None:
        collection = Collection(name=name, description=description, created_by_id=user.id)
        session.add(collection)
        session.flush()
    return collection


def validate_caption_text(text: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("caption text is empty")
    if len(text) > MAX_CAPTION_CHARS:
        raise ValueError(f"caption longer than {MAX_CAPTION_CHARS} characters")
    return text.strip()


def validate_language(language: str) -> str:
    language = (language or "").strip()
    if not language or len(language) > 16 or not all(ch.isalnum() or ch in "-_" for ch in language):
        raise ValueError(f"invalid language code {language!r} (use e.g. en, de, ja, pt-BR)")
    return language


def add_caption(session: Session, user: User, image: Image, text: str, *, language: str = "en",
                kind: str = "candidate", source_model: str | None = None, parent: Caption | None = None,
                perturbation: dict | None = None, collection: Collection | None = None,
                external_id: str | None = None, import_id: int | None = None) -> Caption:
    """Add a caption of `image` (researcher or admin), optionally into `collection`."""
    require_role(user, *RESEARCH_ROLES)
    if kind not in CAPTION_KINDS:
        raise ValueError(f"unknown caption kind {kind!r}: choose one of {', '.join(CAPTION_KINDS)}")
    if kind == "perturbed" and (parent is None or not perturbation or not perturbation.get("op")):
        raise ValueError("a perturbed caption needs its parent caption and the perturbation (op, parameters)")
    caption = Caption(
        image=image, text=validate_caption_text(text), language=validate_language(language), kind=kind,
        source_model=source_model, parent=parent,
        perturbation_op=(perturbation or {}).get("op"), perturbation=perturbation,
        external_id=external_id, import_id=import_id, created_by_id=user.id,
    )
    session.add(caption)
    if collection is not None:
        caption.collections.append(collection)
    session.flush()
    return caption


def store_perturbation(session: Session, user: User, parent: Caption, perturbation,
                       collection: Collection | None = None) -> Caption:
    """Store a perturbed caption with its provenance.

    `perturbation` is an `scoring.perturb.ops.Perturbation` (or anything with the same
    `to_dict()`/fields): its text becomes the caption; op, p, seed and changed spans are kept.
    """
    details = perturbation.to_dict() if hasattr(perturbation, "to_dict") else dict(perturbation)
    text = details.pop("text")
    details.pop("parent", None)  # the parent is the `parent_id` column
    if details.get("noop"):
        raise ValueError(f"perturbation {details.get('op')} left the caption unchanged: {details.get('noop_reason')}")
    return add_caption(session, user, parent.image, text, language=details.get("lang") or parent.language,
                       kind="perturbed", source_model=parent.source_model, parent=parent,
                       perturbation=details, collection=collection)


@dataclass
class PerturbationSummary:
    stored: dict[str, int]  # op -> perturbed captions stored
    unchanged: dict[str, int]  # op -> captions the operation could not change
    already_present: int


def perturb_collection(session: Session, user: User, collection: Collection, ops: Sequence[str] | None = None, *,
                       seed: int = 0, p: float | None = None) -> PerturbationSummary:
    """Store PR-MCS perturbations of every reference / candidate caption of a collection.

    Substitution uses the critical objects annotators marked (else nouns, see
    `scoring.perturb.ops`). Perturbations already stored with the same op and seed are kept,
    so running it again only fills gaps.
    """
    from scoring.perturb.ops import PRMCS_OPS, perturb

    require_role(user, *RESEARCH_ROLES)
    ops = tuple(ops or PRMCS_OPS)
    sources = list(session.scalars(select(Caption).where(
        _in_collection(collection), Caption.kind.in_(("reference", "candidate", "transcreated"))).order_by(Caption.id)))
    existing = {(c.parent_id, c.perturbation_op, (c.perturbation or {}).get("seed")) for c in session.scalars(
        select(Caption).where(Caption.kind == "perturbed", Caption.parent_id.in_([c.id for c in sources])))}
    stored, unchanged, present = dict.fromkeys(ops, 0), dict.fromkeys(ops, 0), 0
    for caption in sources:
        critical = critical_objects(session, caption.id) or None
        for op in ops:
            if (caption.id, op, seed) in existing:
                present += 1
                continue
            result = perturb(caption.text, op, p=p, seed=seed, lang=caption.language, critical=critical)
            if result.noop:
                unchanged[op] += 1
                continue
            details = {**result.to_dict(), "critical": list(result.critical) if result.critical else None}
            store_perturbation(session, user, caption, details, collection)
            stored[op] += 1
    return PerturbationSummary(stored, unchanged, present)


def get_caption(session: Session, caption_id: int) -> Caption:
    caption = session.get(Caption, caption_id)
    if caption is None:
        raise LookupError(f"no caption with id {caption_id}")
    return caption


def delete_caption(session: Session, user: User, caption_id: int) -> None:
    """Delete a caption with its ratings, annotations and derived captions (researcher or admin)."""
    require_role(user, *RESEARCH_ROLES)
    session.delete(get_caption(session, caption_id))
    session.flush()


def delete_collection(session: Session, user: User, name: str, *, with_captions: bool = False) -> None:
    """Delete a collection; its captions too when `with_captions` (researcher or admin)."""
    require_role(user, *RESEARCH_ROLES)
    collection = get_collection(session, name)
    if with_captions:
        for caption in list(collection.captions):
            session.delete(caption)
    session.delete(collection)
    session.flush()


def _in_collection(collection: Collection):
    return Caption.id.in_(
        select(collection_captions.c.caption_id).where(collection_captions.c.collection_id == collection.id)
    )


# ---------------------------------------------------------------------------------------
# rating queue


def _spread(user: User):
    """A per-annotator tie-break so annotators working at once start on different items."""
    return (Caption.id * 7919 + user.id * 104729) % 1000003


def next_rating_item(session: Session, user: User, collection: Collection,
                     k: int = DEFAULT_RATINGS_PER_ITEM) -> Caption | None:
    """The next caption this annotator has neither rated nor skipped, least-rated first.

    Items that already have `k` ratings are not offered, so work goes where it is needed
    until every item has `k`. Reference captions are context, not rated.
    """
    require_role(user, *ALL_ROLES)
    if k < 1:
        raise ValueError("k must be at least 1")
    counts = (select(Rating.caption_id, func.count(Rating.id).label("n"))
              .where(Rating.caption_id.in_(select(Caption.id).where(_in_collection(collection))))
              .group_by(Rating.caption_id).subquery())
    n_ratings = func.coalesce(counts.c.n, 0)
    mine = select(Rating.caption_id).where(Rating.annotator_id == user.id)
    skipped = select(QueueSkip.caption_id).where(QueueSkip.annotator_id == user.id, QueueSkip.task == "rating")
    query = (
        select(Caption)
        .outerjoin(counts, counts.c.caption_id == Caption.id)
        .where(_in_collection(collection), Caption.kind != "reference",
               Caption.id.not_in(mine), Caption.id.not_in(skipped), n_ratings < k)
        .order_by(n_ratings, _spread(user), Caption.id)
        .limit(1)
    )
    return session.scalar(query)


@dataclass(frozen=True)
class QueueProgress:
    done_by_user: int
    items: int
    items_complete: int  # items with at least k ratings
    k: int


def rating_progress(session: Session, user: User, collection: Collection,
                    k: int = DEFAULT_RATINGS_PER_ITEM) -> QueueProgress:
    require_role(user, *ALL_ROLES)
    rateable = select(Caption.id).where(_in_collection(collection), Caption.kind != "reference")
    items = session.scalar(select(func.count()).select_from(rateable.subquery()))
    done = session.scalar(select(func.count(Rating.id)).where(Rating.annotator_id == user.id,
                                                             Rating.caption_id.in_(rateable)))
    per_item = (select(Rating.caption_id).where(Rating.caption_id.in_(rateable)).group_by(Rating.caption_id)
                .having(func.count(Rating.id) >= k))
    complete = session.scalar(select(func.count()).select_from(per_item.subquery()))
    return QueueProgress(done, items, complete, k)


def skip_item(session: Session, user: User, caption_id: int, task: str = "rating", language: str = "") -> None:
    """Do not offer this caption to this annotator again in `task` (per target language)."""
    require_role(user, *ALL_ROLES)
    get_caption(session, caption_id)
    exists = session.scalar(select(QueueSkip.id).where(
        QueueSkip.annotator_id == user.id, QueueSkip.caption_id == caption_id,
        QueueSkip.task == task, QueueSkip.language == language))
    if exists is None:
        session.add(QueueSkip(annotator_id=user.id, caption_id=caption_id, task=task, language=language))
        session.flush()


def _rating_values(values: dict) -> dict:
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
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number between 0 and 1, got {value!r}") from None
        if not (0.0 <= number <= 1.0) or math.isnan(number):
            raise ValueError(f"{name} must be between 0 and 1, got {value!r}")
        clean[name] = number
    return clean


def _own_rating(session: Session, user: User, caption_id: int) -> Rating | None:
    return session.scalar(select(Rating).where(Rating.caption_id == caption_id, Rating.annotator_id == user.id))


def submit_rating(session: Session, user: User, caption_id: int, overall: float, fluency: float | None = None,
                  relevance: float | None = None, descriptiveness: float | None = None) -> Rating:
    """Rate a caption (0-1); rating it again edits this annotator's rating, keeping history."""
    require_role(user, *ALL_ROLES)
    values = _rating_values(dict(overall=overall, fluency=fluency, relevance=relevance,
                                 descriptiveness=descriptiveness))
    caption = get_caption(session, caption_id)
    if caption.kind == "reference":
        raise ValueError(f"caption {caption_id} is a reference caption; references are not rated")
    existing = _own_rating(session, user, caption_id)
    if existing is not None:
        return _apply_edit(session, existing, values)
    try:
        with session.begin_nested():
            rating = Rating(caption_id=caption_id, annotator_id=user.id, **values)
            session.add(rating)
    except IntegrityError:
        # The same annotator's other request (another tab) inserted it first: edit that one.
        return _apply_edit(session, _own_rating(session, user, caption_id), values)
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


def edit_rating(session: Session, user: User, rating_id: int, **values) -> Rating:
    """Change some fields of a rating. Only its author may edit it; the old values are kept."""
    rating = get_rating(session, user, rating_id)
    if rating.annotator_id != user.id:
        raise PermissionError(f"{user.name} may only edit their own ratings")
    return _apply_edit(session, rating, _rating_values(values))


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
        query = query.where(Rating.caption_id.in_(select(Caption.id).where(_in_collection(collection))))
    return list(session.scalars(query))


def delete_rating(session: Session, user: User, rating_id: int) -> None:
    """Delete a rating (researcher or admin)."""
    require_role(user, *RESEARCH_ROLES)
    rating = session.get(Rating, rating_id)
    if rating is None:
        raise LookupError(f"no rating with id {rating_id}")
    session.delete(rating)
    session.flush()


def human_score(session: Session, caption_id: int) -> float | None:
    """Mean overall rating of a caption (None when unrated)."""
    return session.scalar(select(func.avg(Rating.overall)).where(Rating.caption_id == caption_id))


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


def _reference_texts(session: Session, image_id: int, language: str, limit: int = 5) -> list[str]:
    return list(session.scalars(
        select(Caption.text).where(Caption.image_id == image_id, Caption.kind == "reference",
                                   Caption.language == language).order_by(Caption.id).limit(limit)))


def next_transcreation_item(session: Session, user: User, collection: Collection, target_language: str,
                            source_language: str = "en") -> TranscreationTask | None:
    """The next rated `source_language` caption nobody has transcreated into `target_language`."""
    require_role(user, *ALL_ROLES)
    target_language = validate_language(target_language)
    if target_language == source_language:
        raise ValueError("target language equals the source language")
    done = select(Transcreation.source_caption_id).where(Transcreation.target_language == target_language)
    skipped = select(QueueSkip.caption_id).where(QueueSkip.annotator_id == user.id,
                                                 QueueSkip.task == "transcreation",
                                                 QueueSkip.language == target_language)
    rated = select(Rating.caption_id)
    caption = session.scalar(
        select(Caption)
        .where(_in_collection(collection), Caption.kind == "candidate", Caption.language == source_language,
               Caption.id.in_(rated), Caption.id.not_in(done), Caption.id.not_in(skipped))
        .order_by(_spread(user), Caption.id)
        .limit(1))
    if caption is None:
        return None
    return TranscreationTask(caption=caption, image=caption.image, source_score=human_score(session, caption.id),
                             references=_reference_texts(session, caption.image_id, source_language),
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


def list_transcreations(session: Session, user: User, collection: Collection | None = None) -> list[Transcreation]:
    """Transcreations visible to `user` (annotators: their own)."""
    require_role(user, *ALL_ROLES)
    query = select(Transcreation).order_by(Transcreation.id)
    if user.role not in RESEARCH_ROLES:
        query = query.where(Transcreation.annotator_id == user.id)
    if collection is not None:
        query = query.where(Transcreation.source_caption_id.in_(select(Caption.id).where(_in_collection(collection))))
    return list(session.scalars(query))


# ---------------------------------------------------------------------------------------
# critical objects (for substitution perturbations)


def _phrases(values: Iterable[str], what: str) -> list[str]:
    if isinstance(values, str):
        values = [part for part in values.split(",")]
    phrases = []
    for value in values:
        if not isinstance(value, str):
            raise ValueError(f"{what} must be text, got {value!r}")
        value = value.strip()
        if value and value not in phrases:
            phrases.append(value)
    return phrases


def next_critical_item(session: Session, user: User, collection: Collection) -> Caption | None:
    """The next caption (not perturbed) this annotator has not marked or skipped."""
    require_role(user, *ALL_ROLES)
    mine = select(CriticalAnnotation.caption_id).where(CriticalAnnotation.annotator_id == user.id)
    skipped = select(QueueSkip.caption_id).where(QueueSkip.annotator_id == user.id, QueueSkip.task == "critical")
    return session.scalar(
        select(Caption)
        .where(_in_collection(collection), Caption.kind.in_(("reference", "candidate", "transcreated")),
               Caption.id.not_in(mine), Caption.id.not_in(skipped))
        .order_by(_spread(user), Caption.id).limit(1))


def mark_critical(session: Session, user: User, caption_id: int, critical_objects: Sequence[str] | str,
                  backgrounds: Sequence[str] | str = (), relationships: Sequence[str] | str = ()) -> CriticalAnnotation:
    """Record critical objects, backgrounds and relationships of a caption.

    Every phrase must occur in the caption text (case-insensitively), because substitution
    swaps those exact spans. Marking again replaces this annotator's earlier marking.
    """
    require_role(user, *ALL_ROLES)
    caption = get_caption(session, caption_id)
    marked = {"critical_objects": _phrases(critical_objects, "critical objects"),
              "backgrounds": _phrases(backgrounds, "backgrounds"),
              "relationships": _phrases(relationships, "relationships")}
    if not marked["critical_objects"]:
        raise ValueError("mark at least one critical object")
    lowered = caption.text.casefold()
    missing = [p for group in marked.values() for p in group if p.casefold() not in lowered]
    if missing:
        raise ValueError(f"not in the caption text: {', '.join(repr(p) for p in missing)}")
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


# ---------------------------------------------------------------------------------------
# agreement


def krippendorff_alpha_interval(reliability) -> float:
    """Krippendorff's alpha with the interval metric (squared differences).

    `reliability` is coders x units with NaN where a coder gave no value. Units with fewer
    than two values are not pairable and are ignored. Returns NaN when there is no
    variation to judge agreement against.
    """
    import numpy as np

    data = np.asarray(reliability, dtype=float)
    if data.ndim != 2:
        raise ValueError("reliability data must be a 2-D array (coders x units)")
    observed_sum, pairable = 0.0, []
    for unit in data.T:
        values = unit[~np.isnan(unit)]
        m = len(values)
        if m < 2:
            continue
        pairable.append(values)
        # sum over ordered pairs i != j of (v_i - v_j)^2 = 2 (m sum v^2 - (sum v)^2)
        observed_sum += 2 * (m * np.sum(values ** 2) - np.sum(values) ** 2) / (m - 1)
    if not pairable:
        return float("nan")
    every = np.concatenate(pairable)
    n = len(every)
    expected = 2 * (n * np.sum(every ** 2) - np.sum(every) ** 2) / (n * (n - 1))
    observed = observed_sum / n
    if expected == 0:
        return float("nan")
    return float(1.0 - observed / expected)


@dataclass
class PairAgreement:
    annotator_a: str
    annotator_b: str
    n_items: int
    pearson: float
    spearman: float


@dataclass
class AgreementReport:
    """Inter-annotator agreement on one rating field of one collection."""

    collection: str
    field: str
    n_items: int  # items rated by at least two annotators
    n_annotators: int
    n_ratings: int
    alpha_interval: float
    pairs: list[PairAgreement] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"collection": self.collection, "field": self.field, "n_items": self.n_items,
                "n_annotators": self.n_annotators, "n_ratings": self.n_ratings,
                "krippendorff_alpha_interval": _none_if_nan(self.alpha_interval),
                "pairs": [{"a": p.annotator_a, "b": p.annotator_b, "n_items": p.n_items,
                           "pearson": _none_if_nan(p.pearson), "spearman": _none_if_nan(p.spearman)}
                          for p in self.pairs]}


def _none_if_nan(value: float) -> float | None:
    return None if value is None or math.isnan(value) else value


def reliability_matrix(session: Session, user: User, collection: Collection,
                       field: str = "overall") -> tuple[list[str], list[int], "numpy.ndarray"]:
    """(annotator names, caption ids, coders x units matrix with NaN gaps) of a collection."""
    import numpy as np

    require_role(user, *RESEARCH_ROLES)
    if field not in RATING_FIELDS:
        raise ValueError(f"unknown rating field {field!r}: choose one of {', '.join(RATING_FIELDS)}")
    rows = session.execute(
        select(User.name, Rating.caption_id, getattr(Rating, field))
        .join(User, User.id == Rating.annotator_id)
        .where(Rating.caption_id.in_(select(Caption.id).where(_in_collection(collection))),
               getattr(Rating, field).is_not(None))
    ).all()
    names = sorted({r[0] for r in rows})
    captions = sorted({r[1] for r in rows})
    matrix = np.full((len(names), len(captions)), np.nan)
    name_index = {n: i for i, n in enumerate(names)}
    caption_index = {c: j for j, c in enumerate(captions)}
    for name, caption_id, value in rows:
        matrix[name_index[name], caption_index[caption_id]] = value
    return names, captions, matrix


def agreement(session: Session, user: User, collection: Collection, field: str = "overall",
              min_pair_items: int = 3) -> AgreementReport:
    """Krippendorff's alpha (interval) and pairwise Pearson/Spearman between annotators."""
    import numpy as np
    from scipy.stats import pearsonr, spearmanr

    names, _captions, matrix = reliability_matrix(session, user, collection, field)
    rated_twice = int(np.sum(np.sum(~np.isnan(matrix), axis=0) >= 2)) if matrix.size else 0
    pairs = []
    for (i, a), (j, b) in combinations(enumerate(names), 2):
        both = ~np.isnan(matrix[i]) & ~np.isnan(matrix[j])
        n = int(both.sum())
        if n < min_pair_items:
            continue
        x, y = matrix[i, both], matrix[j, both]
        constant = np.ptp(x) == 0 or np.ptp(y) == 0
        pearson = float("nan") if constant else float(pearsonr(x, y).statistic)
        spearman = float("nan") if constant else float(spearmanr(x, y).statistic)
        pairs.append(PairAgreement(a, b, n, pearson, spearman))
    return AgreementReport(collection=collection.name, field=field, n_items=rated_twice, n_annotators=len(names),
                           n_ratings=int(np.sum(~np.isnan(matrix))),
                           alpha_interval=krippendorff_alpha_interval(matrix) if matrix.size else float("nan"),
                           pairs=pairs)


# ---------------------------------------------------------------------------------------
# cached metric scores


def cache_metric_scores(session: Session, metric: str, checkpoint_fingerprint: str,
                        values: dict[int, float | None]) -> None:
    """Store metric values per caption id for one checkpoint (replacing older values for it)."""
    if not metric or not checkpoint_fingerprint:
        raise ValueError("metric name and checkpoint fingerprint are required")
    existing = {s.caption_id: s for s in session.scalars(select(MetricScore).where(
        MetricScore.metric == metric, MetricScore.checkpoint_fingerprint == checkpoint_fingerprint,
        MetricScore.caption_id.in_(list(values))))}
    for caption_id, value in values.items():
        value = None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
        if caption_id in existing:
            existing[caption_id].value = value
            existing[caption_id].computed_at = utcnow()
        else:
            session.add(MetricScore(caption_id=caption_id, metric=metric,
                                    checkpoint_fingerprint=checkpoint_fingerprint, value=value))
    session.flush()


def cached_metric_scores(session: Session, metric: str, checkpoint_fingerprint: str,
                         caption_ids: Iterable[int]) -> dict[int, float | None]:
    """Cached values for this metric and checkpoint; caption ids without one are absent."""
    rows = session.execute(select(MetricScore.caption_id, MetricScore.value).where(
        MetricScore.metric == metric, MetricScore.checkpoint_fingerprint == checkpoint_fingerprint,
        MetricScore.caption_id.in_(list(caption_ids)))).all()
    return {caption_id: value for caption_id, value in rows}


def invalidate_metric_scores(session: Session, user: User, metric: str, keep_fingerprint: str | None = None) -> int:
    """Drop cached values of `metric` (except those of `keep_fingerprint`); returns how many."""
    require_role(user, *RESEARCH_ROLES)
    condition = MetricScore.metric == metric
    if keep_fingerprint is not None:
        condition = and_(condition, MetricScore.checkpoint_fingerprint != keep_fingerprint)
    return session.execute(delete(MetricScore).where(condition)).rowcount
