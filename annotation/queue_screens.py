"""What an annotator's screen shows next in each queue (rating, transcreation, critical
objects), and the actions on it, each one transaction as the acting account.

Any front end (the Annotate tab, the API's /next_item and /rate) calls these with the
logged-in account's id; the queue and permission rules live in `annotation.tasks`.
Images are given as the stored file's path, for display.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from annotation import captions, tasks
from annotation.acting import acting
from annotation.image_store import image_path


def _image_file(image) -> str | None:
    """The stored file of an image row, or None when it is missing from the store."""
    path = image_path(image)
    return str(path) if path.is_file() else None


def _missing_image_message(caption_id: int) -> str:
    return (f"The image of caption {caption_id} is missing from the image store, so it cannot be rated: "
            "Skip it (an admin can import the image again).")


def _joined(message: str, text: str) -> str:
    return (message + " " if message else "") + text


@dataclass
class RatingScreen:
    """One caption to rate (caption_id None when the queue is done) with this annotator's
    earlier values for it, and the queue's progress."""

    caption_id: int | None
    text: str
    language: str
    image_file: str | None
    values: dict
    progress: str
    message: str = ""

    @property
    def can_rate(self) -> bool:
        """A caption is rated against its image: none loaded, or its image file is missing."""
        return self.caption_id is not None and self.image_file is not None


def _rating_screen(session, user, collection_name: str, caption_id: int | None, message: str = "") -> RatingScreen:
    """The screen of caption `caption_id` (None: nothing left to rate)."""
    collection = captions.get_collection(session, collection_name)
    progress = tasks.rating_progress(session, user, collection)
    progress_text = (f"You rated {progress.done_by_user} of {progress.items} items; "
                     f"{progress.items_complete} items have {progress.k} ratings.")
    if caption_id is None:
        return RatingScreen(None, "Nothing left to rate in this collection. Thank you!", "", None, {}, progress_text,
                            message)
    caption = captions.get_caption(session, caption_id)
    own = tasks.own_rating(session, user, caption.id)
    values = {f: getattr(own, f) for f in tasks.RATING_FIELDS} if own is not None else {}
    image_file = _image_file(caption.image)
    if image_file is None:
        message = _joined(message, _missing_image_message(caption.id))
    return RatingScreen(caption.id, caption.text, caption.language, image_file, values, progress_text, message)


def rating_screen(account_id: int | None, collection_name: str, caption_id: int | None = None,
                  message: str = "") -> RatingScreen:
    """Caption `caption_id` (going back to an earlier item), or the next one in the queue,
    reserved for this annotator (`tasks.next_rating_item`): only taking the next item writes,
    in a short transaction of its own; the screen is read without the write lock."""
    if not collection_name:
        raise ValueError("Choose a collection.")
    if caption_id is None:
        with acting(account_id) as (session, user):
            caption = tasks.next_rating_item(session, user, captions.get_collection(session, collection_name))
            caption_id = None if caption is None else caption.id
    with acting(account_id, read_only=True) as (session, user):
        return _rating_screen(session, user, collection_name, caption_id, message)


def rate(account_id: int | None, caption_id: int, overall: float, fluency: float | None = None,
         relevance: float | None = None, descriptiveness: float | None = None) -> dict:
    """Store this annotator's rating (editing an earlier one keeps its history); the stored
    values as the API reports them. A caption whose image file is missing cannot be rated, nor
    a new one whose k ratings are complete (see `tasks.submit_rating`)."""
    with acting(account_id) as (session, user):
        caption = captions.get_caption(session, int(caption_id))
        if _image_file(caption.image) is None:
            raise ValueError(_missing_image_message(caption.id))
        rating = tasks.submit_rating(session, user, int(caption_id), overall, fluency, relevance, descriptiveness,
                                     k=tasks.DEFAULT_RATINGS_PER_ITEM)
        return {"rating_id": rating.id, "caption_id": rating.caption_id, "annotator": user.name,
                "overall": rating.overall, "fluency": rating.fluency, "relevance": rating.relevance,
                "descriptiveness": rating.descriptiveness, "version": rating.version}


def rate_and_next(account_id: int | None, collection_name: str, caption_id: int | None, overall: float,
                  fluency: float | None = None, relevance: float | None = None,
                  descriptiveness: float | None = None) -> RatingScreen:
    """Save the rating of `caption_id`, then the next caption of the queue."""
    if caption_id is None:
        raise ValueError("No caption loaded: choose a collection.")
    rate(account_id, caption_id, overall, fluency, relevance, descriptiveness)
    return rating_screen(account_id, collection_name, message=f"Saved rating of caption {int(caption_id)}.")


def _skip(account_id: int | None, caption_id: int | None, task: str, language: str = "") -> None:
    if caption_id is None:
        raise ValueError("No caption loaded." if task == "rating" else "Load a caption first.")
    with acting(account_id) as (session, user):
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


def transcreation_screen(account_id: int | None, collection_name: str, target_language: str,
                         message: str = "") -> TranscreationScreen:
    if not collection_name:
        raise ValueError("Choose a collection.")
    with acting(account_id, read_only=True) as (session, user):
        task = tasks.next_transcreation_item(session, user, captions.get_collection(session, collection_name),
                                          target_language)
        screen = TranscreationScreen(tasks.TRANSCREATION_INSTRUCTIONS, tasks.TRANSCREATION_EXAMPLES)
        if task is None:
            screen.message = _joined(message, "Nothing left to transcreate into this language.")
            return screen
        return TranscreationScreen(task.instructions, task.examples, task.caption.id, task.caption.text,
                                   _image_file(task.image), round(task.source_score, 3), task.references, message)


def transcreate_and_next(account_id: int | None, collection_name: str, target_language: str,
                         source_id: int | None, text: str) -> TranscreationScreen:
    """Save the transcreation of `source_id`, then the next caption to transcreate."""
    if source_id is None:
        raise ValueError("Load a caption first.")
    with acting(account_id) as (session, user):
        tasks.submit_transcreation(session, user, int(source_id), target_language, text or "")
    return transcreation_screen(account_id, collection_name, target_language, "Saved.")


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


def critical_screen(account_id: int | None, collection_name: str, message: str = "") -> CriticalScreen:
    if not collection_name:
        raise ValueError("Choose a collection.")
    with acting(account_id, read_only=True) as (session, user):
        caption = tasks.next_critical_item(session, user, captions.get_collection(session, collection_name))
        if caption is None:
            return CriticalScreen(tasks.CRITICAL_INSTRUCTIONS, message=_joined(message, "Nothing left to mark."))
        return CriticalScreen(tasks.CRITICAL_INSTRUCTIONS, caption.id, caption.text, _image_file(caption.image), message)


def mark_and_next(account_id: int | None, collection_name: str, caption_id: int | None, objects: str,
                  backgrounds: str, relations: str) -> CriticalScreen:
    """Save the marking of `caption_id` (comma-separated phrases), then the next caption."""
    if caption_id is None:
        raise ValueError("Load a caption first.")
    with acting(account_id) as (session, user):
        tasks.mark_critical(session, user, int(caption_id), objects or "", backgrounds or "", relations or "")
    return critical_screen(account_id, collection_name, "Saved.")


def skip_critical(account_id: int | None, collection_name: str, caption_id: int | None) -> CriticalScreen:
    _skip(account_id, caption_id, "critical")
    return critical_screen(account_id, collection_name, "Skipped.")
