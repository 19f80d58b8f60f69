"""The annotator's screens of issue 16: aspects left unset, language and references on the
rating screen, the transcreation language check, critical objects as clicked character spans,
and the refusal to record work on a caption whose image file is missing."""
from __future__ import annotations

import pytest
from sqlalchemy import func, select

from annotation.studies import queue_screens

from annotation.studies import tasks
from annotation.captions import add_caption, get_or_create_collection
from annotation.image_store import add_image, image_path
from db.models import CriticalAnnotation, Rating, Transcreation
from db.session import session_scope


@pytest.fixture
def rated(engine, accounts, make_png):
    """One English candidate (rated 0.6 by bea) with two references, in collection "c"."""
    with session_scope(engine) as session:
        collection = get_or_create_collection(session, accounts["rita"], "c")
        image = add_image(session, make_png(), "a.png")
        for text in ("a red square", "a square in red"):
            add_caption(session, accounts["rita"], image, text, kind="reference", collection=collection)
        add_caption(session, accounts["rita"], image, "ein rotes Quadrat", language="de", kind="reference",
                    collection=collection)
        caption = add_caption(session, accounts["rita"], image, "a man in a white shirt, rides a horse",
                              collection=collection)
        tasks.submit_rating(session, accounts["bea"], caption.id, 0.6)
        return caption.id, image_path(image)


def test_rating_screen_shows_language_and_references_and_stores_no_untouched_aspect(engine, accounts, rated):
    caption_id, _ = rated
    ann = accounts["ann"].id
    screen = queue_screens.rating_screen(ann, "c")
    assert screen.caption_id == caption_id and screen.language_name == "English (en)"
    assert screen.references == ["a red square", "a square in red"]  # its language only
    assert not screen.aspects_rated
    queue_screens.rate(ann, caption_id, 0.8, fluency=0.7)
    with session_scope(engine) as session:
        rating = session.scalar(select(Rating).where(Rating.annotator_id == ann))
        assert (rating.overall, rating.fluency, rating.relevance, rating.descriptiveness) == (0.8, 0.7, None, None)
    again = queue_screens.rating_screen(ann, "c", caption_id)
    assert again.aspects_rated and again.values["relevance"] is None


def test_transcreation_in_another_language_is_held_back_once(engine, accounts, rated):
    caption_id, _ = rated
    ann = accounts["ann"].id
    queue_screens.rate(ann, caption_id, 0.6)  # blind overlap: one transcreates (sees the score) once rated
    english = "a man in a white shirt rides a horse"
    held = queue_screens.transcreate_and_next(ann, "c", "de", caption_id, english)
    assert held.caption_id == caption_id and held.draft == english
    assert "reads as English (en), not German (de)" in held.message
    with session_scope(engine) as session:
        assert session.scalar(select(func.count()).select_from(Transcreation)) == 0
    saved = queue_screens.transcreate_and_next(ann, "c", "de", caption_id, english, held.draft)
    assert saved.message.startswith("Saved.")
    german = "ein Mann in einem weißen Hemd reitet ein Pferd"
    assert queue_screens.language_warning(german, "de") == ""
    queue_screens.transcreate_and_next(ann, "c", "de", caption_id, german)  # no warning: saved at once
    with session_scope(engine) as session:
        assert session.scalar(select(Transcreation.text)) == german


def test_critical_objects_are_clicked_words_stored_as_spans(engine, accounts, rated):
    caption_id, _ = rated
    ann = accounts["ann"].id
    screen = queue_screens.critical_screen(ann, "c")
    while screen.caption_id != caption_id:  # the queue offers the references too
        screen = queue_screens.skip_critical(ann, "c", screen.caption_id)
    text = screen.text
    words = dict((label, value) for label, value in screen.words)
    assert words["white"] == "11:16" and words["shirt"] == "17:22" and len(screen.words) == 9
    # "white" + "shirt" are neighbours: one phrase; "shirt" and "rides" have a comma between them.
    queue_screens.mark_and_next(ann, "c", caption_id, [words["white"], words["shirt"], words["horse"]],
                                [], [words["rides"]])
    with session_scope(engine) as session:
        marked = session.scalar(select(CriticalAnnotation))
        assert marked.spans == {"critical_objects": [[11, 22], [32, 37]], "backgrounds": [],
                                "relationships": [[24, 29]]}
        assert [text[s:e] for s, e in marked.spans["critical_objects"]] == marked.critical_objects \
            == ["white shirt", "horse"]
        assert tasks.critical_objects(session, caption_id) == ["white shirt", "horse"]
    with pytest.raises(ValueError, match="outside the caption"):
        queue_screens.mark_and_next(ann, "c", caption_id, ["30:99"])
    with pytest.raises(ValueError, match="at least one critical object"):
        queue_screens.mark_and_next(ann, "c", caption_id, [], [words["horse"]])


def test_transcreate_and_critical_refuse_a_caption_whose_image_is_missing(engine, accounts, rated):
    caption_id, path = rated
    ann = accounts["ann"].id
    queue_screens.rate(ann, caption_id, 0.6)  # blind overlap: one transcreates (sees the score) once rated
    path.unlink()
    tc = queue_screens.transcreation_screen(ann, "c", "de")
    assert tc.caption_id == caption_id and not tc.can_submit
    assert f"image of caption {caption_id} is missing" in tc.message and "cannot be transcreated" in tc.message
    with pytest.raises(ValueError, match="missing from the image store"):
        queue_screens.transcreate_and_next(ann, "c", "de", caption_id, "ein Mann reitet ein Pferd am Strand")
    cr = queue_screens.critical_screen(ann, "c")
    assert cr.caption_id is not None and not cr.can_mark and "cannot be marked" in cr.message
    with pytest.raises(ValueError, match="missing from the image store"):
        queue_screens.mark_and_next(ann, "c", cr.caption_id, ["0:1"])
    with session_scope(engine) as session:
        assert session.scalar(select(func.count()).select_from(Transcreation)) == 0
        assert session.scalar(select(func.count()).select_from(CriticalAnnotation)) == 0
    assert queue_screens.skip_transcreation(ann, "c", "de", caption_id).caption_id is None  # Skip moves on


def test_back_steps_through_the_annotators_own_ratings_and_needs_no_session_memory(engine, accounts, make_png):
    """Back is read from the stored ratings: a fresh screen (as after a page reload) still goes
    back, one earlier item at a time, and never to another annotator's ratings."""
    with session_scope(engine) as session:
        collection = get_or_create_collection(session, accounts["rita"], "three")
        ids = [add_caption(session, accounts["rita"], add_image(session, make_png(color=(40 * n, 0, 0)), f"{n}.png"),
                           f"caption number {n}", collection=collection).id for n in range(3)]
    ann, bea = accounts["ann"].id, accounts["bea"].id
    with pytest.raises(ValueError, match="Nothing to go back to"):
        queue_screens.earlier_rating_screen(ann, "three", None)
    first = queue_screens.rating_screen(ann, "three")
    second = queue_screens.rate_and_next(ann, "three", first.caption_id, 0.3)
    third = queue_screens.rate_and_next(ann, "three", second.caption_id, 0.6)
    queue_screens.rate(bea, third.caption_id, 0.9)  # someone else's rating is not ann's way back
    assert sorted([first.caption_id, second.caption_id, third.caption_id]) == sorted(ids)
    back = queue_screens.earlier_rating_screen(ann, "three", third.caption_id)  # third not rated by ann yet
    assert (back.caption_id, back.values["overall"]) == (second.caption_id, 0.6)
    assert back.message.startswith("Showing your earlier item")
    further = queue_screens.earlier_rating_screen(ann, "three", back.caption_id)
    assert (further.caption_id, further.values["overall"]) == (first.caption_id, 0.3)
    with pytest.raises(ValueError, match="Nothing to go back to"):
        queue_screens.earlier_rating_screen(ann, "three", further.caption_id)
    # Editing an earlier rating keeps the order: back from the first-rated item is still nothing.
    queue_screens.rate(ann, first.caption_id, 0.4)
    assert queue_screens.earlier_rating_screen(ann, "three", second.caption_id).caption_id == first.caption_id


def test_my_ratings_open_one_to_edit_with_its_history_and_withdraw_it(engine, accounts, rated):
    caption_id, _ = rated
    ann, bea = accounts["ann"].id, accounts["bea"].id
    assert queue_screens.my_ratings(ann, "c") == []
    queue_screens.rate(ann, caption_id, 0.3)
    queue_screens.rate(ann, caption_id, 0.7)  # rating again edits it
    queue_screens.rate(ann, caption_id, 0.5, fluency=0.9)
    [mine] = queue_screens.my_ratings(ann, "c")
    assert (mine.caption_id, mine.edits, mine.text) == (caption_id, 2, "a man in a white shirt, rides a horse")
    assert mine.values == {"overall": 0.5, "fluency": 0.9, "relevance": None, "descriptiveness": None}
    screen = queue_screens.own_rating_screen(ann, "c", float(caption_id))
    assert screen.caption_id == caption_id and screen.values["overall"] == 0.5
    assert screen.message == f"Showing your rating of caption {caption_id}; saving edits it. Overall so far: 0.3 → 0.7 → 0.5."
    # The aspects it left unrated while rating fluency come back skipped, so saving the opened
    # rating with a new overall is a decided rating, not refused for "unset" aspects.
    assert screen.skipped_aspects == ["relevance", "descriptiveness"]
    edited = queue_screens.rating_values(0.6, {"fluency": 0.9, "relevance": 0.0, "descriptiveness": 0.0}, True,
                                         "overall,fluency", screen.skipped_aspects)
    assert edited == {"overall": 0.6, "fluency": 0.9, "relevance": None, "descriptiveness": None}
    assert queue_screens.rating_screen(ann, "c").skipped_aspects == []  # a new item: nothing decided yet
    # Only one's own ratings, only in this collection, only whole caption ids
    for account, name, value, refusal in ((bea + 99, "c", caption_id, PermissionError),
                                          (ann, "c", caption_id + 1, LookupError),
                                          (ann, "c", caption_id + 0.5, ValueError),
                                          (ann, "c", "abc", ValueError), (ann, "c", "", ValueError),
                                          (ann, "c", 0, ValueError)):
        with pytest.raises(refusal):
            queue_screens.own_rating_screen(account, name, value)
    with pytest.raises(ValueError, match="^Choose one of your ratings first: click its row under My ratings"):
        queue_screens.own_rating_screen(ann, "c", 0)  # the id box before a row is clicked
    after = queue_screens.withdraw_rating(ann, "c", caption_id)
    assert after.message == f"Withdrew your rating of caption {caption_id}."
    assert queue_screens.my_ratings(ann, "c") == []
    assert after.caption_id == caption_id  # back in the queue, and this annotator is next to rate it
    with session_scope(engine) as session:  # bea's rating of the same caption stays; ann's history went with it
        assert session.scalars(select(Rating.annotator_id)).all() == [bea]
    with pytest.raises(LookupError, match="no rating of caption"):
        queue_screens.withdraw_rating(ann, "c", caption_id)


def test_an_annotator_cannot_withdraw_someone_elses_rating(engine, accounts, rated):
    caption_id, _ = rated
    with session_scope(engine) as session:
        beas = session.scalar(select(Rating).where(Rating.annotator_id == accounts["bea"].id))
        with pytest.raises(PermissionError, match="only withdraw their own"):
            tasks.delete_rating(session, accounts["ann"], beas.id)
    with pytest.raises(LookupError):  # through the screen: ann has no rating of it to withdraw
        queue_screens.withdraw_rating(accounts["ann"].id, "c", caption_id)
