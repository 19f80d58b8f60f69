"""What an annotator's screen shows next in each queue (rating, transcreation, critical
objects), and the actions on it, each one transaction as the acting account.

Any front end (the Annotate tab, the API's /next_item and /rate) calls these with the
logged-in account's id; the queue and permission rules live in `annotation.studies.tasks`.
Images are given as the stored file's path, for display.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import select

from annotation import captions

from annotation.studies import quality

from annotation.studies import tasks
from annotation.people.acting import acting, chosen_collection
from annotation.image_store import image_path
from db.models import Caption
from scoring.language_id import LANGUAGES, UNKNOWN, detect_language


def _image_file(image) -> str | None:
    """The stored file of an image row, or None when it is missing from the store."""
    path = image_path(image)
    return str(path) if path.is_file() else None


def _missing_image_message(caption_id: int, done: str = "rated") -> str:
    return (f"The image of caption {caption_id} is missing from the image store, so it cannot be {done}: "
            "Skip it (an admin can import the image again).")


def _require_image(caption, done: str) -> None:
    """Refuse to record work on a caption whose image file is missing (it was done blind)."""
    if _image_file(caption.image) is None:
        raise ValueError(_missing_image_message(caption.id, done))


def _joined(message: str, text: str) -> str:
    return (message + " " if message else "") + text


@dataclass
class RatingScreen:
    """One caption to rate (caption_id None when the queue is done) with its language, the
    reference captions of its image, this annotator's earlier values for it (an aspect not
    rated is None), and the queue's progress; `notice` is what the study tells the annotator
    above the item (Markdown: the qualification round's progress and feedback, an attention
    check's instruction, or why there is no item for them)."""

    caption_id: int | None
    text: str
    language: str
    image_file: str | None
    values: dict
    progress: str
    message: str = ""
    references: list[str] = field(default_factory=list)
    notice: str = ""

    @property
    def language_name(self) -> str:
        """The caption's language as the screen shows it, e.g. "German (de)"."""
        return f"{LANGUAGES[self.language]} ({self.language})" if self.language in LANGUAGES else self.language

    @property
    def aspects_rated(self) -> bool:
        """Whether this annotator's earlier rating has any aspect (fluency, ...) set."""
        return any(self.values.get(name) is not None for name in tasks.RATING_FIELDS[1:])

    @property
    def skipped_aspects(self) -> list[str]:
        """The aspects this annotator's earlier rating left unrated while rating others: skipped
        then, so a screen that edits it shows them skipped again (as unset, the save refused them)."""
        if not self.aspects_rated:
            return []
        return [name for name in tasks.RATING_FIELDS[1:] if self.values.get(name) is None]

    @property
    def can_rate(self) -> bool:
        """A caption is rated against its image: none loaded, or its image file is missing."""
        return self.caption_id is not None and self.image_file is not None


def _rating_screen(session, user, collection_name: str, caption_id: int | None, message: str = "",
                   notice: str = "") -> RatingScreen:
    """The screen of caption `caption_id` (None: nothing left to rate, or, with a `notice`,
    nothing for this annotator now)."""
    collection = captions.get_collection(session, collection_name)
    progress = tasks.rating_progress(session, user, collection)
    progress_text = (f"You rated {progress.done_by_user} of {progress.items} items; "
                     f"{progress.items_complete} items have {progress.k} ratings.")
    if caption_id is None:
        text = "No item for you now: see the notice above." if notice else \
            "Nothing left to rate in this collection. Thank you!"
        return RatingScreen(None, text, "", None, {}, progress_text, message, notice=notice)
    caption = captions.get_caption(session, caption_id)
    own = tasks.own_rating(session, user, caption.id)
    values = {f: getattr(own, f) for f in tasks.RATING_FIELDS} if own is not None else {}
    image_file = _image_file(caption.image)
    if image_file is None:
        message = _joined(message, _missing_image_message(caption.id))
    return RatingScreen(caption.id, caption.text, caption.language, image_file, values, progress_text, message,
                        tasks.reference_texts(session, caption.image_id, caption.language), notice)


def rating_screen(account_id: int | None, collection_name: str, caption_id: int | None = None,
                  message: str = "", feedback: str = "") -> RatingScreen:
    """Caption `caption_id` (going back to an earlier item), or the next one in the queue,
    reserved for this annotator (`quality.next_item`: the study's qualification round, gold
    items and attention checks, else `tasks.next_rating_item`): only taking the next item
    writes, in a short transaction of its own; the screen is read without the write lock.
    `feedback` (on the answer just saved) goes first in the notice."""
    chosen_collection(account_id, collection_name)
    notice = ""
    if caption_id is None:
        with acting(account_id) as (session, user):
            offer = quality.next_item(session, user, captions.get_collection(session, collection_name))
            caption_id = None if offer.caption is None else offer.caption.id
            notice = offer.notice
    notice = "\n\n".join(part for part in (feedback, notice) if part)
    with acting(account_id, read_only=True) as (session, user):
        return _rating_screen(session, user, collection_name, caption_id, message, notice)


def earlier_rating_screen(account_id: int | None, collection_name: str, caption_id: int | None) -> RatingScreen:
    """Back: the caption this annotator rated or skipped before the shown one, with their rating
    to edit (`tasks.earlier_queue_item`; taken from the stored ratings and skips, so a reload
    keeps the way back, and Back after Skip shows the skipped item)."""
    chosen_collection(account_id, collection_name)
    with acting(account_id, read_only=True) as (session, user):
        collection = captions.get_collection(session, collection_name)
        earlier = tasks.earlier_queue_item(session, user, collection, None if caption_id is None else int(caption_id))
        if earlier is None:
            raise ValueError("Nothing to go back to: you have not rated or skipped an earlier item of this collection.")
        if tasks.own_rating(session, user, earlier) is None:
            return _rating_screen(session, user, collection_name, earlier,
                                  "Showing the item you skipped; saving rates it.")
        return _rating_screen(session, user, collection_name, earlier, "Showing your earlier item; saving edits your rating.")


@dataclass
class MyRating:
    """One of this annotator's ratings, as "My ratings" lists it (`edits`: times changed)."""

    caption_id: int
    text: str
    values: dict
    edits: int
    changed: str  # last change, UTC to the minute


def my_ratings(account_id: int | None, collection_name: str) -> list[MyRating]:
    """This annotator's own ratings in the collection, newest change first, to open one again
    (`own_rating_screen`) or withdraw it (`withdraw_rating`). Check items' answers are not
    ratings and are not listed."""
    chosen_collection(account_id, collection_name)
    with acting(account_id, read_only=True) as (session, user):
        collection = captions.get_collection(session, collection_name)
        rows = tasks.list_ratings(session, user, collection, annotator=user)
        rows.sort(key=lambda r: (r.updated_at, r.id), reverse=True)
        # The captions' texts in one query: the table refreshes after every save, so one lazy
        # load per rating would grow with the annotator's work.
        wanted = select(Caption.id, Caption.text).where(Caption.id.in_([r.caption_id for r in rows]))
        texts = {caption_id: text for caption_id, text in session.execute(wanted)}
        return [MyRating(r.caption_id, texts[r.caption_id], {f: getattr(r, f) for f in tasks.RATING_FIELDS},
                         r.version - 1, r.updated_at.strftime("%Y-%m-%d %H:%M")) for r in rows]


def _own_rating_in(session, user, collection_name: str, caption_id) -> tasks.Rating:
    if caption_id is None or str(caption_id).strip() == "":
        raise ValueError("Enter the caption id of one of your ratings (listed under My ratings).")
    try:
        number = float(caption_id)
    except (TypeError, ValueError):
        number = float("nan")
    if not number.is_integer():
        raise ValueError(f"A caption id is a whole number, not {str(caption_id)[:40]!r}.")
    caption_id = int(number)
    if caption_id < 1:  # the page's id box starts at 0: nothing chosen yet (ids start at 1)
        raise ValueError("Choose one of your ratings first: click its row under My ratings.")
    collection = captions.get_collection(session, collection_name)
    for rating in tasks.list_ratings(session, user, collection, annotator=user):
        if rating.caption_id == caption_id:
            return rating
    raise LookupError(f"You have no rating of caption {caption_id} in {collection_name}.")


def _history_text(revisions, rating) -> str:
    values = [f"{revision.overall:g}" for revision in revisions] + [f"{rating.overall:g}"]
    return "" if len(values) == 1 else f" Overall so far: {' → '.join(values)}."


def own_rating_screen(account_id: int | None, collection_name: str, caption_id) -> RatingScreen:
    """One of this annotator's rated captions shown again with their values, to edit (saving
    edits the rating and keeps the earlier values as its history, which the message sums up)."""
    chosen_collection(account_id, collection_name)
    with acting(account_id, read_only=True) as (session, user):
        rating = _own_rating_in(session, user, collection_name, caption_id)
        return _rating_screen(session, user, collection_name, rating.caption_id,
                              f"Showing your rating of caption {rating.caption_id}; saving edits it."
                              + _history_text(tasks.rating_history(session, user, rating.id), rating))


def withdraw_rating(account_id: int | None, collection_name: str, caption_id) -> RatingScreen:
    """Delete this annotator's own rating of a caption (with its history): the caption goes back
    to the queue for whoever needs it. Then the next item of the queue."""
    chosen_collection(account_id, collection_name)
    with acting(account_id) as (session, user):
        rating = _own_rating_in(session, user, collection_name, caption_id)
        withdrawn = rating.caption_id
        tasks.delete_rating(session, user, rating.id)
    return rating_screen(account_id, collection_name, message=f"Withdrew your rating of caption {withdrawn}.")


def rate(account_id: int | None, caption_id: int, overall: float, fluency: float | None = None,
         relevance: float | None = None, descriptiveness: float | None = None) -> dict:
    """Store this annotator's rating (editing an earlier one keeps its history); the stored
    values as the API reports them. A caption whose image file is missing cannot be rated, nor
    a new one whose k ratings are complete (see `tasks.submit_rating`). In a study
    (`quality.submit`) an answer to a check item is stored as such (`rating_id` null; after a
    qualification item, `feedback` says expected against given), and ratings wait for the
    qualification round and stop while the annotator is paused."""
    with acting(account_id) as (session, user):
        _require_image(captions.get_caption(session, int(caption_id)), "rated")
        saved = quality.submit(session, user, int(caption_id), overall, fluency, relevance, descriptiveness,
                               k=tasks.DEFAULT_RATINGS_PER_ITEM)
        if saved.rating is None:  # a check item: shaped like a rating, so a gold item looks like any other
            return {"rating_id": None, "caption_id": int(caption_id), "annotator": user.name,
                    "overall": saved.check.overall, "fluency": None, "relevance": None, "descriptiveness": None,
                    "version": 1, "feedback": saved.feedback}
        rating = saved.rating
        return {"rating_id": rating.id, "caption_id": rating.caption_id, "annotator": user.name,
                "overall": rating.overall, "fluency": rating.fluency, "relevance": rating.relevance,
                "descriptiveness": rating.descriptiveness, "version": rating.version, "feedback": ""}


UNSET = "unset"  # a rating field the annotator has neither set nor explicitly skipped


def require_decided(values: dict) -> None:
    """Refuse a rating with a field still UNSET: an untouched slider is never saved as a value
    (nor silently as "not rated"). The overall score must be set; an aspect may be set or
    explicitly skipped (None, stored as not rated)."""
    if values.get("overall") is None or values.get("overall") == UNSET:
        raise ValueError("Set the overall score first (keys 0-9 and m, or the slider); nothing was saved.")
    unset = [name for name, value in values.items() if value == UNSET]
    if unset:
        raise ValueError(f"Set or skip {', '.join(unset)} first; nothing was saved.")


def rating_values(overall, aspects: dict, use_aspects: bool, touched, skipped) -> dict:
    """The four rating fields as the Rate view decided them, for `rate_and_next`: a slider the
    annotator set (in `touched`, or holding their earlier value) gives its value, an aspect
    they skipped (in `skipped`) or all aspects when they rate none (`use_aspects` off) give
    None (not rated), and a slider neither set nor skipped gives UNSET, which the save refuses.
    `touched` and `skipped` are field names, as a list or comma-separated."""
    touched, skipped = ([n.strip() for n in names.split(",")] if isinstance(names, str) else list(names or [])
                        for names in (touched, skipped))

    def decided(name: str, value):
        if name in touched and value is not None:
            return float(value)
        return None if name in skipped else UNSET

    values = {"overall": decided("overall", overall)}
    for name in tasks.RATING_FIELDS[1:]:
        values[name] = decided(name, aspects.get(name)) if use_aspects else None
    return values


def rate_and_next(account_id: int | None, collection_name: str, caption_id: int | None, overall: float | str | None,
                  fluency: float | str | None = None, relevance: float | str | None = None,
                  descriptiveness: float | str | None = None) -> RatingScreen:
    """Save the rating of `caption_id`, then the next caption of the queue. A field passed as
    UNSET (its slider untouched and not skipped) refuses the save (`require_decided`)."""
    if caption_id is None:
        raise ValueError("No caption loaded: choose a collection.")
    require_decided(dict(overall=overall, fluency=fluency, relevance=relevance, descriptiveness=descriptiveness))
    saved = rate(account_id, caption_id, overall, fluency, relevance, descriptiveness)
    return rating_screen(account_id, collection_name, message=f"Saved rating of caption {int(caption_id)}.",
                         feedback=saved["feedback"])


def _skip(account_id: int | None, caption_id: int | None, task: str, language: str = "") -> None:
    if caption_id is None:
        raise ValueError("No caption loaded." if task == "rating" else "Load a caption first.")
    with acting(account_id) as (session, user):
        if task == "rating":
            quality.require_skippable(session, user, int(caption_id))
        tasks.skip_item(session, user, int(caption_id), task, language)


def skip_rating(account_id: int | None, collection_name: str, caption_id: int | None) -> RatingScreen:
    """Never offer `caption_id` to this annotator again; the next caption of the queue."""
    _skip(account_id, caption_id, "rating")
    return rating_screen(account_id, collection_name, message=f"Skipped caption {int(caption_id)}.")


@dataclass
class TranscreationScreen:
    """A rated English caption to transcreate (caption_id None when none is left), with its
    human score to keep and its references."""

    instructions: str
    examples: tuple
    caption_id: int | None = None
    text: str = ""
    image_file: str | None = None
    source_score: float | None = None
    references: list[str] = field(default_factory=list)
    message: str = ""
    draft: str = ""  # the text to show in the box: kept when a submission was held back

    @property
    def can_submit(self) -> bool:
        """A caption is transcreated looking at its image: none loaded, or its file is missing."""
        return self.caption_id is not None and self.image_file is not None


def language_warning(text: str, target_language: str) -> str:
    """A warning when `text` reads as another language than `target_language`
    (`scoring.language_id`, offline; text under three words is too short to tell and passes,
    as does text without letters), else ""."""
    if len(tasks.caption_words(text or "")) < 3:
        return ""
    found = detect_language(text, default=target_language)
    if found in (target_language, UNKNOWN):
        return ""
    name = LANGUAGES.get(found, found)
    return (f"This text reads as {name} ({found}), not {LANGUAGES.get(target_language, target_language)} "
            f"({target_language}).")


def transcreation_screen(account_id: int | None, collection_name: str, target_language: str,
                         message: str = "") -> TranscreationScreen:
    chosen_collection(account_id, collection_name)
    with acting(account_id, read_only=True) as (session, user):
        task = tasks.next_transcreation_item(session, user, captions.get_collection(session, collection_name),
                                          target_language)
        screen = TranscreationScreen(tasks.TRANSCREATION_INSTRUCTIONS, tasks.TRANSCREATION_EXAMPLES)
        if task is None:
            screen.message = _joined(message, "Nothing left to transcreate into this language.")
            return screen
        image_file = _image_file(task.image)
        if image_file is None:
            message = _joined(message, _missing_image_message(task.caption.id, "transcreated"))
        return TranscreationScreen(task.instructions, task.examples, task.caption.id, task.caption.text,
                                   image_file, round(task.source_score, 3), task.references, message)


def transcreate_and_next(account_id: int | None, collection_name: str, target_language: str,
                         source_id: int | None, text: str, held_back: str = "") -> TranscreationScreen:
    """Save the transcreation of `source_id`, then the next caption to transcreate.

    Text that reads as another language than the target is held back once: the same screen
    comes back with the text (`draft`) and a warning; submitting it unchanged again (the
    screen's `draft` as `held_back`) saves it, since language identification can err."""
    if source_id is None:
        raise ValueError("Load a caption first.")
    confirmed = bool(held_back) and (text or "").strip() == held_back.strip()
    warning = "" if confirmed else language_warning(text, target_language)
    with acting(account_id) as (session, user):
        _require_image(captions.get_caption(session, int(source_id)), "transcreated")
        if not warning:
            tasks.submit_transcreation(session, user, int(source_id), target_language, text or "")
    if not warning:
        return transcreation_screen(account_id, collection_name, target_language, "Saved.")
    screen = transcreation_screen(account_id, collection_name, target_language)
    if screen.caption_id != int(source_id):
        raise ValueError(warning)
    screen.draft = text  # the queue offers it still: show it again with the text and the warning
    screen.message = warning + " Correct it, or press Submit again to save it as it is."
    return screen


def skip_transcreation(account_id: int | None, collection_name: str, target_language: str,
                       source_id: int | None) -> TranscreationScreen:
    _skip(account_id, source_id, "transcreation", target_language)
    return transcreation_screen(account_id, collection_name, target_language, "Skipped.")


@dataclass
class CriticalScreen:
    """A caption whose critical objects to mark (caption_id None when none is left)."""

    instructions: str
    caption_id: int | None = None
    text: str = ""
    image_file: str | None = None
    message: str = ""

    @property
    def words(self) -> list[tuple[str, str]]:
        """The caption's words to click, as (word, "start:end") choices: character spans."""
        return [(self.text[start:end], f"{start}:{end}") for start, end in tasks.caption_words(self.text)]

    @property
    def can_mark(self) -> bool:
        return self.caption_id is not None and self.image_file is not None


MARK_GROUPS = {"critical_objects": "Critical objects", "backgrounds": "Backgrounds",
               "relationships": "Relationships"}


def marking_with(marks: dict | None, group: str, words) -> dict:
    """The marking after the annotator chose `words` ("start:end" spans, `CriticalScreen.words`)
    for `group`: those words belong to `group` and to no other group (a word is marked once)."""
    if group not in MARK_GROUPS:
        raise ValueError(f"unknown group {group!r}: choose one of {', '.join(MARK_GROUPS)}")
    chosen = [str(word) for word in words or []]
    marks = {name: [w for w in (marks or {}).get(name, []) if w not in chosen] for name in MARK_GROUPS}
    marks[group] = chosen
    return marks


def marking_preview(text: str, marks: dict | None) -> str:
    """The phrases each group will store, as saving would join the chosen words
    (`tasks.join_word_spans`), one line per group: what the annotator checks before saving."""
    lines = []
    for name, title in MARK_GROUPS.items():
        spans = tasks.join_word_spans(text or "", _word_spans((marks or {}).get(name, [])))
        lines.append(f"{title}: " + (" | ".join(text[start:end] for start, end in spans) or "—"))
    return "\n".join(lines)


def critical_screen(account_id: int | None, collection_name: str, message: str = "") -> CriticalScreen:
    chosen_collection(account_id, collection_name)
    with acting(account_id, read_only=True) as (session, user):
        caption = tasks.next_critical_item(session, user, captions.get_collection(session, collection_name))
        if caption is None:
            return CriticalScreen(tasks.CRITICAL_INSTRUCTIONS, message=_joined(message, "Nothing left to mark."))
        image_file = _image_file(caption.image)
        if image_file is None:
            message = _joined(message, _missing_image_message(caption.id, "marked"))
        return CriticalScreen(tasks.CRITICAL_INSTRUCTIONS, caption.id, caption.text, image_file, message)


def _word_spans(values) -> list[tuple[int, int]]:
    """Clicked words as the screen sends them ("start:end", see `CriticalScreen.words`)."""
    spans = []
    for value in [values] if isinstance(values, str) else values or []:
        try:
            start, end = (int(part) for part in str(value).split(":"))
        except ValueError:
            raise ValueError(f"not a word of the caption: {value!r}") from None
        spans.append((start, end))
    return spans


def mark_and_next(account_id: int | None, collection_name: str, caption_id: int | None, objects,
                  backgrounds=(), relations=()) -> CriticalScreen:
    """Save the marking of `caption_id`, then the next caption. Each group is the clicked
    words ("start:end" character spans of the caption); adjacent clicked words join into one
    phrase (`tasks.join_word_spans`), stored as its character span."""
    if caption_id is None:
        raise ValueError("Load a caption first.")
    with acting(account_id) as (session, user):
        caption = captions.get_caption(session, int(caption_id))
        _require_image(caption, "marked")
        groups = [tasks.join_word_spans(caption.text, _word_spans(values))
                  for values in (objects, backgrounds, relations)]
        tasks.mark_critical(session, user, caption.id, *groups)
    return critical_screen(account_id, collection_name, "Saved.")


def skip_critical(account_id: int | None, collection_name: str, caption_id: int | None) -> CriticalScreen:
    _skip(account_id, caption_id, "critical")
    return critical_screen(account_id, collection_name, "Skipped.")
