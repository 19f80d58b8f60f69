"""A study's quality control (issue 24): a qualification round, gold items and attention checks
mixed into the rating queue, flagging (and optionally pausing) annotators whose gold accuracy is
low, and a review queue where reviewers settle the items annotators disagree on most.

- A researcher marks captions of a collection as **check items** with a known answer: the
  expected overall score and a tolerance. `qualification` items form the qualification round;
  `gold` items and `attention` checks (which tell the annotator what to answer) are mixed into
  the real queue. A check item is never offered by the ordinary queue, and answers to it go to
  `CheckAnswer`, never to the ratings.
- With a qualification round (`StudySettings.qualification_pass`), an annotator's queue first
  gives the qualification items, each answer followed by feedback (expected against given); only
  once their share within tolerance reaches the pass mark do they get the real queue. A fail is
  recorded (`StudyParticipant.qualification`) and shown; a researcher may allow another attempt.
- Gold items and attention checks come at `check_rate` of the items served (the n-th item is a
  check when that keeps the checks' share at most `check_rate`). An annotator whose accuracy on
  them (within tolerance) falls below `accuracy_threshold`, after at least `min_checks`
  answers, is flagged, and with `pause_flagged` paused: they get no more items and are told why,
  until a researcher resumes them.
- **Blind overlap**: no queue screen shows anyone else's rating; the review queue (which does)
  only holds items whose k ratings are complete, so the rating queue never offers them again.
- **Review**: researchers, admins and the study's reviewers (`StudyReviewer`, chosen by a
  researcher) get the items with k ratings, largest spread (max - min) first, and store an
  adjudicated value in `Adjudication`, beside the ratings, which it never changes.

Every function checks the acting account's role itself; annotators never read expected answers.
Permission problems raise PermissionError, bad input ValueError, unknown names LookupError.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from sqlalchemy import case, delete, func, select
from sqlalchemy.orm import Session

from annotation.studies import tasks
from annotation.people.accounts import ALL_ROLES, RESEARCH_ROLES, get_user, require_role
from annotation.people.acting import acting
from annotation.captions import get_caption, get_collection, in_collection
from annotation.image_store import image_path
from db.models import (
    CHECK_KINDS,
    Adjudication,
    Caption,
    CheckAnswer,
    CheckItem,
    Collection,
    QueueSkip,
    Rating,
    RatingLease,
    StudyParticipant,
    StudyReviewer,
    StudySettings,
    User,
    collection_captions,
    utcnow,
)

DEFAULT_TOLERANCE = 0.1
DEFAULT_MIN_CHECKS = 3
MAX_TEXT_CHARS = 2000
_EPSILON = 1e-9  # a value exactly at the tolerance's edge is within it (floats such as 0.8 - 0.7)


# ---------------------------------------------------------------------------------------
# settings and check items (researcher or admin)


def _share(name: str, value, optional: bool) -> float | None:
    if value is None or value == "":
        if optional:
            return None
        raise ValueError(f"{name} is required: a number between 0 and 1")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number between 0 and 1, got {value!r}") from None
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise ValueError(f"{name} must be between 0 and 1, got {value!r}")
    return number


def settings_of(session: Session, collection: Collection) -> StudySettings | None:
    """The collection's quality-control settings, or None (no quality control)."""
    return session.get(StudySettings, collection.id)


def set_quality(session: Session, user: User, collection: Collection, *, qualification_pass=None,
                check_rate=0.0, accuracy_threshold=None, min_checks=DEFAULT_MIN_CHECKS,
                pause_flagged: bool = False) -> StudySettings:
    """Set the study's quality control (researcher or admin): the qualification round's pass
    mark (share within tolerance; None: no round), the share of served items that are gold
    items or attention checks, the accuracy below which an annotator is flagged (None: never)
    once they answered `min_checks` checks, and whether a flagged annotator is paused."""
    require_role(user, *RESEARCH_ROLES)
    values = dict(qualification_pass=_share("The pass mark", qualification_pass, True),
                  check_rate=_share("The check rate", check_rate, False),
                  accuracy_threshold=_share("The accuracy threshold", accuracy_threshold, True))
    try:
        minimum = int(min_checks)
    except (TypeError, ValueError):
        raise ValueError(f"the minimum number of checks must be a whole number, got {min_checks!r}") from None
    if not 1 <= minimum <= 1000 or minimum != float(min_checks):
        raise ValueError(f"the minimum number of checks must be a whole number from 1 to 1000, got {min_checks!r}")
    settings = settings_of(session, collection)
    if settings is None:
        settings = StudySettings(collection_id=collection.id)
        session.add(settings)
    for name, value in values.items():
        setattr(settings, name, value)
    settings.min_checks, settings.pause_flagged, settings.updated_at = minimum, bool(pause_flagged), utcnow()
    session.flush()
    return settings


def _caption_in(session: Session, collection: Collection, caption_id: int) -> Caption:
    caption = get_caption(session, caption_id)
    if session.scalar(select(Caption.id).where(Caption.id == caption.id, in_collection(collection))) is None:
        raise ValueError(f"caption {caption_id} is not in collection {collection.name}")
    return caption


def add_check_item(session: Session, user: User, collection: Collection, caption_id: int, kind: str,
                   expected, tolerance=DEFAULT_TOLERANCE, instruction: str | None = None,
                   explanation: str | None = None) -> CheckItem:
    """Mark a caption of the collection as a check item with its known answer (researcher or
    admin). An attention check needs its instruction (what the annotator is asked to answer);
    `explanation` is shown after a qualification item. A caption that already has ratings
    cannot become one (its ratings would then sit beside answers to a check)."""
    require_role(user, *RESEARCH_ROLES)
    if kind not in CHECK_KINDS:
        raise ValueError(f"unknown kind of check item {kind!r}: choose one of {', '.join(CHECK_KINDS)}")
    expected = _share("The expected overall score", expected, False)
    tolerance = _share("The tolerance", tolerance, False)
    instruction, explanation = ((text or "").strip() or None for text in (instruction, explanation))
    for name, text in (("instruction", instruction), ("explanation", explanation)):
        if text is not None and len(text) > MAX_TEXT_CHARS:
            raise ValueError(f"the {name} is longer than {MAX_TEXT_CHARS} characters")
    if kind == "attention" and instruction is None:
        raise ValueError("An attention check needs its instruction, e.g. 'Attention check: set the overall score "
                         "to 0.'")
    caption = _caption_in(session, collection, int(caption_id))
    if caption.kind == "reference":
        raise ValueError(f"caption {caption.id} is a reference caption; references are not rated")
    if session.scalar(select(CheckItem.id).where(CheckItem.caption_id == caption.id)) is not None:
        raise ValueError(f"caption {caption.id} is a check item already")
    rated = session.scalar(select(func.count(Rating.id)).where(Rating.caption_id == caption.id))
    if rated:
        raise ValueError(f"caption {caption.id} already has {rated} rating(s); choose a caption nobody has rated")
    item = CheckItem(collection_id=collection.id, caption_id=caption.id, kind=kind, expected_overall=expected,
                     tolerance=tolerance, instruction=instruction, explanation=explanation, created_by_id=user.id)
    session.add(item)
    session.flush()
    return item


def remove_check_item(session: Session, user: User, collection: Collection, caption_id: int) -> None:
    """Make a check item an ordinary caption again (researcher or admin); refused once anyone
    answered it (removing it would delete their answers)."""
    require_role(user, *RESEARCH_ROLES)
    item = session.scalar(select(CheckItem).where(CheckItem.caption_id == int(caption_id),
                                                  CheckItem.collection_id == collection.id))
    if item is None:
        raise LookupError(f"caption {caption_id} is not a check item of {collection.name}")
    answered = session.scalar(select(func.count(CheckAnswer.id)).where(CheckAnswer.check_item_id == item.id))
    if answered:
        raise ValueError(f"caption {caption_id} has {answered} answer(s); a check item that was answered stays one")
    session.delete(item)
    session.flush()


def check_items(session: Session, user: User, collection: Collection) -> list[CheckItem]:
    """The collection's check items with their answers (researcher or admin), in order."""
    require_role(user, *RESEARCH_ROLES)
    return list(session.scalars(select(CheckItem).where(CheckItem.collection_id == collection.id)
                                .order_by(CheckItem.kind, CheckItem.id)))


# ---------------------------------------------------------------------------------------
# annotators: qualification, checks in the queue, flags and pauses


def _participant(session: Session, collection: Collection, user: User, create: bool = False) -> StudyParticipant | None:
    participant = session.get(StudyParticipant, (collection.id, user.id))
    if participant is None and create:
        participant = StudyParticipant(collection_id=collection.id, annotator_id=user.id, attempt=1)
        session.add(participant)
        session.flush()
    return participant


def _qualification_items(session: Session, collection: Collection) -> list[CheckItem]:
    return list(session.scalars(select(CheckItem).where(CheckItem.collection_id == collection.id,
                                                        CheckItem.kind == "qualification").order_by(CheckItem.id)))


def _has_round(session: Session, settings: StudySettings | None, collection: Collection) -> bool:
    return settings is not None and settings.qualification_pass is not None and \
        bool(_qualification_items(session, collection))


def _failed_message(collection: Collection, participant: StudyParticipant, settings: StudySettings) -> str:
    return (f"You did not pass the qualification round of {collection.name}: "
            f"{_percent(participant.qualification_score)} of your answers were within the tolerance, "
            f"{_percent(settings.qualification_pass)} were needed. Ask the researcher for another attempt.")


def _percent(share: float | None) -> str:
    return "no" if share is None else f"{round(share * 100)}%"


def _answers(session: Session, user: User, collection: Collection, phase: str, attempt: int | None = None):
    query = (select(CheckAnswer).join(CheckItem, CheckItem.id == CheckAnswer.check_item_id)
             .where(CheckItem.collection_id == collection.id, CheckAnswer.annotator_id == user.id,
                    CheckAnswer.phase == phase).order_by(CheckAnswer.id))
    if attempt is not None:
        query = query.where(CheckAnswer.attempt == attempt)
    return list(session.scalars(query))


@dataclass(frozen=True)
class Offer:
    """What the queue gives an annotator next: a caption (None: nothing now) and, for the
    screen, a notice (the qualification round's progress and feedback, an attention check's
    instruction, or why they get nothing)."""

    caption: Caption | None
    notice: str = ""
    qualification: bool = False


def _held(session: Session, user: User, collection: Collection) -> int | None:
    return session.scalar(select(RatingLease.caption_id).where(
        RatingLease.annotator_id == user.id, RatingLease.expires_at > utcnow(),
        RatingLease.caption_id.in_(select(Caption.id).where(in_collection(collection)))).limit(1))


def _check_offer(session: Session, user: User, item: CheckItem) -> Offer:
    tasks.reserve_item(session, user, item.caption_id)
    notice = f"**Attention check.** {item.instruction}" if item.kind == "attention" and item.instruction else ""
    return Offer(session.get(Caption, item.caption_id), notice)


def next_item(session: Session, user: User, collection: Collection,
              k: int = tasks.DEFAULT_RATINGS_PER_ITEM) -> Offer:
    """The next item of this annotator's queue in `collection`, reserved for them: the next
    qualification item while they have not passed the round; nothing when they failed it or
    are paused (the notice says why); a gold item or attention check when one is due at the
    study's check rate; else the ordinary queue's next item (`tasks.next_rating_item`).
    Without quality-control settings, the ordinary queue. Needs a writing transaction."""
    require_role(user, *ALL_ROLES)
    settings = settings_of(session, collection)
    if settings is None:
        return Offer(tasks.next_rating_item(session, user, collection, k))
    participant = _participant(session, collection, user, create=True)
    if _has_round(session, settings, collection) and participant.qualification != "passed":
        if participant.qualification == "failed":
            return Offer(None, _failed_message(collection, participant, settings))
        items = _qualification_items(session, collection)
        answered = {a.check_item_id for a in _answers(session, user, collection, "qualification",
                                                      participant.attempt)}
        remaining = [item for item in items if item.id not in answered]
        if not remaining:  # every item answered, undecided (an unanswered item was removed): decide now
            _decide(session, user, collection, settings, participant)
            return next_item(session, user, collection, k)
        tasks.reserve_item(session, user, remaining[0].caption_id)
        notice = (f"**Qualification round**, item {len(items) - len(remaining) + 1} of {len(items)}: after each "
                  f"item you see the expected answer. With {_percent(settings.qualification_pass)} of your "
                  "answers within the tolerance you go on to the study's items.")
        return Offer(session.get(Caption, remaining[0].caption_id), notice, qualification=True)
    if participant.paused_at is not None:
        return Offer(None, participant.pause_reason or "You are paused in this study; ask the researcher.")
    answered = select(CheckAnswer.check_item_id).where(CheckAnswer.annotator_id == user.id,
                                                       CheckAnswer.phase == "queue")
    skipped = select(QueueSkip.caption_id).where(QueueSkip.annotator_id == user.id, QueueSkip.task == "rating")
    held = _held(session, user, collection)
    if held is not None:
        item = session.scalar(select(CheckItem).where(CheckItem.caption_id == held))
        if item is not None and item.kind != "qualification" and \
                session.scalar(select(func.count()).select_from(answered.where(
                    CheckAnswer.check_item_id == item.id).subquery())) == 0:
            return _check_offer(session, user, item)
    elif settings.check_rate > 0 and _check_due(session, user, collection, settings.check_rate):
        item = session.scalar(
            select(CheckItem).join(Caption, Caption.id == CheckItem.caption_id)
            .where(CheckItem.collection_id == collection.id, CheckItem.kind.in_(("gold", "attention")),
                   CheckItem.id.not_in(answered), CheckItem.caption_id.not_in(skipped))
            .order_by(tasks.queue_order(user), CheckItem.id).limit(1))
        if item is not None and tasks.next_rating_item(session, user, collection, k) is not None:
            return _check_offer(session, user, item)  # only while real items remain
    return Offer(tasks.next_rating_item(session, user, collection, k))


def _check_due(session: Session, user: User, collection: Collection, rate: float) -> bool:
    """Whether the next item is a check: when serving one keeps the checks' share of this
    annotator's items in the collection (checks answered + ratings) at most `rate`."""
    checks = len(_answers(session, user, collection, "queue"))
    rated = session.scalar(select(func.count(Rating.id)).where(
        Rating.annotator_id == user.id, Rating.caption_id.in_(select(Caption.id).where(in_collection(collection)))))
    return checks + 1 <= rate * (checks + rated + 1) + _EPSILON


def require_skippable(session: Session, user: User, caption_id: int) -> None:
    """Refuse to skip a qualification item: the round needs an answer to each."""
    if session.scalar(select(CheckItem.id).where(CheckItem.caption_id == caption_id,
                                                 CheckItem.kind == "qualification")) is not None:
        raise ValueError("Items of the qualification round cannot be skipped: give your best answer.")


def _studies_of(session: Session, caption_id: int) -> list[tuple[Collection, StudySettings]]:
    return list(session.execute(
        select(Collection, StudySettings).join(StudySettings, StudySettings.collection_id == Collection.id)
        .join(collection_captions, collection_captions.c.collection_id == Collection.id)
        .where(collection_captions.c.caption_id == caption_id).order_by(Collection.id)).all())


def standing_refusal(session: Session, user: User, collection: Collection) -> str | None:
    """Why this annotator may not work in study `collection` now: the qualification round not
    yet passed (or failed), or a pause; None when they may, or when it has no quality control.
    Ratings and pairwise judgments both ask, so a paused annotator cannot go on in the other task."""
    settings = settings_of(session, collection)
    if settings is None:
        return None
    participant = _participant(session, collection, user)
    if _has_round(session, settings, collection) and (participant is None or participant.qualification != "passed"):
        if participant is not None and participant.qualification == "failed":
            return _failed_message(collection, participant, settings)
        return f"Pass the qualification round of {collection.name} first: choose the collection in Annotate to start it."
    if participant is not None and participant.paused_at is not None:
        return participant.pause_reason or f"You are paused in {collection.name}; ask the researcher."
    return None


def require_may_rate(session: Session, user: User, caption_id: int) -> None:
    """Refuse a rating of `caption_id` from an annotator who may not work in a study the caption
    is in (:func:`standing_refusal`): the API's /rate cannot go around the queue."""
    for collection, _ in _studies_of(session, caption_id):
        reason = standing_refusal(session, user, collection)
        if reason:
            raise PermissionError(f"{reason} Nothing was saved.")


@dataclass(frozen=True)
class Answer:
    """What saving an item did: the rating stored (an ordinary item) or the check answer
    (`feedback` said to the annotator after a qualification item, and whether the round is
    decided)."""

    rating: Rating | None
    check: CheckAnswer | None = None
    feedback: str = ""


def submit(session: Session, user: User, caption_id: int, overall, fluency=None, relevance=None,
           descriptiveness=None, k: int | None = tasks.DEFAULT_RATINGS_PER_ITEM) -> Answer:
    """Save an item of the queue: an answer to a check item goes to `CheckAnswer` (judged
    against its known answer; a qualification item's feedback is returned, a gold item's or
    attention check's is not, and may flag or pause the annotator), anything else is a rating
    (`tasks.submit_rating`), refused while the annotator has not qualified or is paused."""
    require_role(user, *ALL_ROLES)
    item = session.scalar(select(CheckItem).where(CheckItem.caption_id == int(caption_id)))
    if item is None:  # tasks.submit_rating refuses it while the annotator may not rate
        return Answer(tasks.submit_rating(session, user, int(caption_id), overall, fluency, relevance,
                                          descriptiveness, k=k))
    value = tasks.validate_rating_values(dict(overall=overall))["overall"]
    collection = session.get(Collection, item.collection_id)
    settings = settings_of(session, collection)
    participant = _participant(session, collection, user, create=True)
    qualified = not _has_round(session, settings, collection) or participant.qualification == "passed"
    if item.kind == "qualification":
        if not _has_round(session, settings, collection):
            raise ValueError(f"caption {caption_id} belongs to the qualification round of {collection.name}, "
                             "which is not open; nothing was saved.")
        if participant.qualification == "failed":
            raise PermissionError(_failed_message(collection, participant, settings))
        if qualified:
            raise ValueError("You passed the qualification round already; nothing was saved.")
        phase, attempt = "qualification", participant.attempt
    else:
        if not qualified:
            raise PermissionError(f"Pass the qualification round of {collection.name} first. Nothing was saved.")
        if participant.paused_at is not None:
            raise PermissionError((participant.pause_reason or "You are paused in this study.") + " Nothing was saved.")
        phase, attempt = "queue", 1
    if session.scalar(select(CheckAnswer.id).where(CheckAnswer.check_item_id == item.id,
                                                   CheckAnswer.annotator_id == user.id,
                                                   CheckAnswer.attempt == attempt)) is not None:
        raise ValueError(f"Caption {caption_id} is answered already; nothing was saved. Go on with the next item.")
    seconds = tasks.seconds_on(session, user, item.caption_id)
    tasks.release_lease(session, user, item.caption_id)
    answer = CheckAnswer(check_item_id=item.id, annotator_id=user.id, phase=phase, attempt=attempt, overall=value,
                         expected=item.expected_overall, tolerance=item.tolerance,
                         passed=abs(value - item.expected_overall) <= item.tolerance + _EPSILON, seconds=seconds)
    session.add(answer)
    session.flush()
    if phase == "qualification":
        return Answer(None, answer, _qualification_feedback(session, user, collection, settings, participant,
                                                            item, answer))
    _judge_accuracy(session, user, collection, settings, participant)
    return Answer(None, answer)


def _qualification_feedback(session, user, collection, settings, participant, item, answer) -> str:
    items = _qualification_items(session, collection)
    answers = _answers(session, user, collection, "qualification", participant.attempt)
    verdict = "within the tolerance" if answer.passed else "outside the tolerance"
    text = (f"Qualification item {len(answers)} of {len(items)}: expected {answer.expected:.2f} "
            f"(± {answer.tolerance:.2f}), you gave {answer.overall:.2f}: {verdict}.")
    if item.explanation:
        text += f" {item.explanation}"
    if {a.check_item_id for a in answers} >= {i.id for i in items}:
        text += " " + _decide(session, user, collection, settings, participant)
    return text


def _decide(session, user, collection, settings, participant) -> str:
    """Pass or fail the round on this attempt's answers; what to tell the annotator."""
    answers = _answers(session, user, collection, "qualification", participant.attempt)
    correct = sum(a.passed for a in answers)
    score = correct / len(answers) if answers else 0.0
    participant.qualification_score, participant.updated_at = score, utcnow()
    if score + _EPSILON >= settings.qualification_pass:
        participant.qualification, participant.qualified_at = "passed", utcnow()
        message = (f"You passed the qualification round ({correct} of {len(answers)} within the tolerance): "
                   "the study's items start now.")
    else:
        participant.qualification = "failed"
        message = _failed_message(collection, participant, settings)
    session.flush()
    return message


def _judge_accuracy(session, user, collection, settings, participant) -> None:
    """Flag (and, with `pause_flagged`, pause) an annotator whose accuracy on gold items and
    attention checks is below the threshold after `min_checks` answers; unflag one back above it."""
    answers = _answers(session, user, collection, "queue")
    if settings is None or settings.accuracy_threshold is None or not answers:
        return
    correct, accuracy = sum(a.passed for a in answers), sum(a.passed for a in answers) / len(answers)
    if len(answers) >= settings.min_checks and accuracy + _EPSILON < settings.accuracy_threshold:
        if participant.flagged_at is None:
            participant.flagged_at = utcnow()
        if settings.pause_flagged and participant.paused_at is None:
            participant.paused_at = utcnow()
            participant.pause_reason = (
                f"You are paused in {collection.name}: {correct} of your {len(answers)} answers to check items "
                f"({_percent(accuracy)}) were within the tolerance, below the study's "
                f"{_percent(settings.accuracy_threshold)}. Read the guidelines again and ask the researcher to "
                "resume you.")
    elif accuracy + _EPSILON >= settings.accuracy_threshold:
        participant.flagged_at = None
    participant.updated_at = utcnow()
    session.flush()


def check_accuracy(session: Session, collection: Collection) -> dict[str, tuple[int, int]]:
    """Annotator name -> (check answers within tolerance, check answers) over the gold items
    and attention checks of the collection's queue (not the qualification round)."""
    rows = session.execute(
        select(User.name, func.sum(case((CheckAnswer.passed, 1), else_=0)), func.count(CheckAnswer.id))
        .join(User, User.id == CheckAnswer.annotator_id).join(CheckItem, CheckItem.id == CheckAnswer.check_item_id)
        .where(CheckItem.collection_id == collection.id, CheckAnswer.phase == "queue").group_by(User.name))
    return {name: (int(correct or 0), int(n)) for name, correct, n in rows}


@dataclass
class ParticipantRow:
    """An annotator in the study as the researcher's table shows them."""

    annotator: str
    qualification: str  # passed, failed, in progress (attempt n), or "no round"
    qualification_score: float | None
    checks_answered: int
    gold_accuracy: float | None
    flagged: bool
    paused: bool
    pause_reason: str = ""

    def row(self) -> list:
        return [self.annotator, self.qualification,
                None if self.qualification_score is None else round(self.qualification_score, 3),
                self.checks_answered, None if self.gold_accuracy is None else round(self.gold_accuracy, 3),
                "yes" if self.flagged else "", "yes" if self.paused else ""]


PARTICIPANT_HEADERS = ["annotator", "qualification", "qualification score", "checks answered", "gold accuracy",
                       "flagged", "paused"]


def participants(session: Session, user: User, collection: Collection) -> list[ParticipantRow]:
    """Every annotator who started the study (researcher or admin), by name."""
    require_role(user, *RESEARCH_ROLES)
    settings = settings_of(session, collection)
    has_round = _has_round(session, settings, collection)
    accuracy = check_accuracy(session, collection)
    rows = []
    for participant, name in session.execute(
            select(StudyParticipant, User.name).join(User, User.id == StudyParticipant.annotator_id)
            .where(StudyParticipant.collection_id == collection.id).order_by(User.name)).all():
        correct, n = accuracy.get(name, (0, 0))
        state = participant.qualification or (f"in progress (attempt {participant.attempt})" if has_round
                                              else "no round")
        rows.append(ParticipantRow(name, state, participant.qualification_score, n, correct / n if n else None,
                                   participant.flagged_at is not None, participant.paused_at is not None,
                                   participant.pause_reason or ""))
    return rows


def _participant_named(session: Session, collection: Collection, name: str) -> StudyParticipant:
    annotator = get_user(session, name)
    participant = _participant(session, collection, annotator)
    if participant is None:
        raise LookupError(f"{name} has not started {collection.name}")
    return participant


def resume(session: Session, user: User, collection: Collection, name: str) -> None:
    """End a pause (researcher or admin): the annotator gets items again, until a later check
    answer leaves them below the threshold again."""
    require_role(user, *RESEARCH_ROLES)
    participant = _participant_named(session, collection, name)
    participant.paused_at, participant.pause_reason, participant.updated_at = None, None, utcnow()
    session.flush()


def allow_new_attempt(session: Session, user: User, collection: Collection, name: str) -> int:
    """Let an annotator who failed the qualification round take it again (researcher or admin);
    the answers of earlier attempts are kept. Returns the new attempt's number."""
    require_role(user, *RESEARCH_ROLES)
    participant = _participant_named(session, collection, name)
    if participant.qualification != "failed":
        raise ValueError(f"{name} has not failed the qualification round of {collection.name}")
    participant.attempt += 1
    participant.qualification = participant.qualification_score = None
    participant.updated_at = utcnow()
    session.flush()
    return participant.attempt


# ---------------------------------------------------------------------------------------
# review: the items annotators disagree on most, and adjudicated values


def add_reviewer(session: Session, user: User, collection: Collection, name: str) -> None:
    """Make an account a reviewer of the study (researcher or admin)."""
    require_role(user, *RESEARCH_ROLES)
    reviewer = get_user(session, name)
    if session.get(StudyReviewer, (collection.id, reviewer.id)) is None:
        session.add(StudyReviewer(collection_id=collection.id, user_id=reviewer.id))
        session.flush()


def remove_reviewer(session: Session, user: User, collection: Collection, name: str) -> None:
    require_role(user, *RESEARCH_ROLES)
    session.execute(delete(StudyReviewer).where(StudyReviewer.collection_id == collection.id,
                                                StudyReviewer.user_id == get_user(session, name).id))


def reviewers(session: Session, user: User, collection: Collection) -> list[str]:
    require_role(user, *RESEARCH_ROLES)
    return list(session.scalars(select(User.name).join(StudyReviewer, StudyReviewer.user_id == User.id)
                                .where(StudyReviewer.collection_id == collection.id).order_by(User.name)))


def require_reviewer(session: Session, user: User, collection: Collection) -> None:
    """Researchers and admins review any study; anyone else only one they were made reviewer of."""
    require_role(user, *ALL_ROLES)
    if user.role in RESEARCH_ROLES or session.get(StudyReviewer, (collection.id, user.id)) is not None:
        return
    raise PermissionError(f"{user.name} is not a reviewer of {collection.name}: a researcher can make them one")


@dataclass
class ReviewItem:
    """An item of the review queue: its k or more ratings' values (without their annotators),
    their spread (max - min) and mean, and the adjudicated value when there is one."""

    caption_id: int
    text: str
    values: list[float]
    spread: float
    mean: float
    adjudicated: float | None = None
    note: str = ""
    image_file: str | None = None


def _rated_items(session: Session, collection: Collection, k: int) -> dict[int, list[float]]:
    values: dict[int, list[float]] = {}
    for caption_id, overall in session.execute(
            select(Rating.caption_id, Rating.overall)
            .where(Rating.caption_id.in_(select(Caption.id).where(in_collection(collection))))
            .order_by(Rating.caption_id, Rating.overall)):
        values.setdefault(caption_id, []).append(overall)
    return {c: v for c, v in values.items() if len(v) >= k}


def review_queue(session: Session, user: User, collection: Collection, include_settled: bool = False,
                 limit: int = 50, k: int = tasks.DEFAULT_RATINGS_PER_ITEM) -> list[ReviewItem]:
    """The collection's items with at least k ratings (complete: the rating queue offers them to
    nobody any more), largest spread first (then the lowest caption id); settled ones only
    with `include_settled`. Reviewers only."""
    require_reviewer(session, user, collection)
    settled = {a.caption_id: a for a in session.scalars(select(Adjudication).where(
        Adjudication.collection_id == collection.id))}
    items = []
    for caption_id, values in _rated_items(session, collection, k).items():
        adjudication = settled.get(caption_id)
        if adjudication is not None and not include_settled:
            continue
        items.append(ReviewItem(caption_id, "", values, max(values) - min(values), sum(values) / len(values),
                                None if adjudication is None else adjudication.overall,
                                "" if adjudication is None else adjudication.note or ""))
    items.sort(key=lambda item: (-item.spread, item.caption_id))
    items = items[:limit]
    for item in items:
        caption = session.get(Caption, item.caption_id)
        path = image_path(caption.image)
        item.text, item.image_file = caption.text, str(path) if path.is_file() else None
    return items


def adjudicate(session: Session, user: User, collection: Collection, caption_id: int, overall,
               note: str | None = None, k: int = tasks.DEFAULT_RATINGS_PER_ITEM) -> Adjudication:
    """Store a reviewer's settled overall value of an item with its k ratings, beside them (the
    ratings are not changed); settling it again replaces the value."""
    require_reviewer(session, user, collection)
    value = tasks.validate_rating_values(dict(overall=overall))["overall"]
    note = (note or "").strip() or None
    if note is not None and len(note) > MAX_TEXT_CHARS:
        raise ValueError(f"the note is longer than {MAX_TEXT_CHARS} characters")
    _caption_in(session, collection, int(caption_id))
    values = list(session.scalars(select(Rating.overall).where(Rating.caption_id == int(caption_id))))
    if len(values) < k:
        raise ValueError(f"caption {caption_id} has {len(values)} of its {k} ratings; it can be settled once "
                         "they are complete")
    adjudication = session.scalar(select(Adjudication).where(Adjudication.collection_id == collection.id,
                                                             Adjudication.caption_id == int(caption_id)))
    if adjudication is None:
        adjudication = Adjudication(collection_id=collection.id, caption_id=int(caption_id))
        session.add(adjudication)
    adjudication.reviewer_id, adjudication.overall, adjudication.note = user.id, value, note
    adjudication.ratings_seen, adjudication.spread = len(values), max(values) - min(values)
    adjudication.updated_at = utcnow()
    session.flush()
    return adjudication


def adjudicated_values(session: Session, caption_ids, collection: Collection | None = None
                       ) -> dict[int, tuple[float, str | None, str]]:
    """Caption id -> (adjudicated overall, reviewer name, collection name) for the captions that
    `caption_ids` (ids or a select) holds, settled in `collection`, or (None) in any study, where
    a caption settled in several studies gives the latest. For the exports (whose caller checked
    the role)."""
    query = (select(Adjudication.caption_id, Adjudication.overall, User.name, Collection.name)
             .outerjoin(User, User.id == Adjudication.reviewer_id)
             .join(Collection, Collection.id == Adjudication.collection_id)
             .where(Adjudication.caption_id.in_(caption_ids)).order_by(Adjudication.updated_at, Adjudication.id))
    if collection is not None:
        query = query.where(Adjudication.collection_id == collection.id)
    return {caption_id: (overall, reviewer, name) for caption_id, overall, reviewer, name in session.execute(query)}


# ---------------------------------------------------------------------------------------
# the same, as the acting account of a front end (each one transaction)


@dataclass
class QualityView:
    """The Study tab's quality-control panel of a collection."""

    settings: dict
    items: list[list]
    people: list[list]
    reviewers: list[str]
    message: str = ""


CHECK_HEADERS = ["caption id", "kind", "expected", "tolerance", "instruction", "answers", "within tolerance"]


def _named(name: str) -> str:
    if not name:
        raise ValueError("Choose a collection.")
    return name


def quality_view(account_id: int | None, collection_name: str, message: str = "") -> QualityView:
    with acting(account_id, read_only=True) as (session, user):
        collection = get_collection(session, _named(collection_name))
        require_role(user, *RESEARCH_ROLES)
        settings = settings_of(session, collection)
        shown = {"qualification_pass": None, "check_rate": 0.0, "accuracy_threshold": None,
                 "min_checks": DEFAULT_MIN_CHECKS, "pause_flagged": False}
        if settings is not None:
            shown = {name: getattr(settings, name) for name in shown}
        rows = []
        for item in check_items(session, user, collection):
            judged = list(session.scalars(select(CheckAnswer.passed).where(CheckAnswer.check_item_id == item.id)))
            rows.append([item.caption_id, item.kind, item.expected_overall, item.tolerance, item.instruction or "",
                         len(judged), sum(judged)])
        return QualityView(shown, rows, [p.row() for p in participants(session, user, collection)],
                           reviewers(session, user, collection), message)


def save_quality(account_id: int | None, collection_name: str, qualification_pass, check_rate, accuracy_threshold,
                 min_checks, pause_flagged) -> QualityView:
    with acting(account_id) as (session, user):
        set_quality(session, user, get_collection(session, _named(collection_name)),
                    qualification_pass=qualification_pass, check_rate=check_rate,
                    accuracy_threshold=accuracy_threshold, min_checks=min_checks, pause_flagged=pause_flagged)
    return quality_view(account_id, collection_name, f"Quality control of {collection_name} saved.")


def mark_check_item(account_id: int | None, collection_name: str, caption_id, kind: str, expected, tolerance,
                    instruction: str | None = None, explanation: str | None = None) -> QualityView:
    if caption_id is None or caption_id == "":
        raise ValueError("Give the caption id of the item.")
    with acting(account_id) as (session, user):
        add_check_item(session, user, get_collection(session, _named(collection_name)), int(caption_id), kind,
                       expected, tolerance, instruction, explanation)
    return quality_view(account_id, collection_name, f"Caption {int(caption_id)} is a {kind} item now.")


def unmark_check_item(account_id: int | None, collection_name: str, caption_id) -> QualityView:
    if caption_id is None or caption_id == "":
        raise ValueError("Give the caption id of the item.")
    with acting(account_id) as (session, user):
        remove_check_item(session, user, get_collection(session, _named(collection_name)), int(caption_id))
    return quality_view(account_id, collection_name, f"Caption {int(caption_id)} is an ordinary item again.")


def manage_annotator(account_id: int | None, collection_name: str, name: str, action: str) -> QualityView:
    """`resume`, `retry` (another qualification attempt), `reviewer` or `not-reviewer`."""
    name = (name or "").strip()
    if not name:
        raise ValueError("Give the account's name.")
    actions = {"resume": (resume, f"{name} is resumed."),
               "retry": (allow_new_attempt, f"{name} may take the qualification round again."),
               "reviewer": (add_reviewer, f"{name} is a reviewer of {collection_name} now."),
               "not-reviewer": (remove_reviewer, f"{name} is no longer a reviewer of {collection_name}.")}
    if action not in actions:
        raise ValueError(f"unknown action {action!r}")
    fn, message = actions[action]
    with acting(account_id) as (session, user):
        fn(session, user, get_collection(session, _named(collection_name)), name)
    return quality_view(account_id, collection_name, message)


@dataclass
class ReviewScreen:
    """The reviewer's screen: the item of the review queue with the largest spread (caption_id
    None when none is left), its ratings' values, their mean (where the reviewer's value starts,
    so the last item's value is never carried over) and how many items wait."""

    caption_id: int | None
    text: str
    image_file: str | None
    ratings: str
    waiting: int
    message: str = ""
    mean: float | None = None


def review_screen(account_id: int | None, collection_name: str, message: str = "") -> ReviewScreen:
    with acting(account_id, read_only=True) as (session, user):
        items = review_queue(session, user, get_collection(session, _named(collection_name)))
    if not items:
        return ReviewScreen(None, "No item waits for review in this collection.", None, "", 0, message)
    item = items[0]
    shown = ", ".join(f"{v:.2f}" for v in item.values)
    return ReviewScreen(item.caption_id, item.text, item.image_file,
                        f"{len(item.values)} ratings: {shown} (spread {item.spread:.2f}, mean {item.mean:.2f})",
                        len(items), message, item.mean)


def settle_and_next(account_id: int | None, collection_name: str, caption_id, overall, note: str | None = None
                    ) -> ReviewScreen:
    if caption_id is None or caption_id == "":
        raise ValueError("No item loaded: choose a collection.")
    if overall is None or overall == "":
        raise ValueError("Set the adjudicated overall score first; nothing was saved.")
    with acting(account_id) as (session, user):
        adjudicate(session, user, get_collection(session, _named(collection_name)), int(caption_id), overall, note)
    return review_screen(account_id, collection_name, f"Settled caption {int(caption_id)} at {float(overall):.2f}.")
