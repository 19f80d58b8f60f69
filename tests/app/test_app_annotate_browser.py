"""The Annotate tab in headless Chromium (issue 16): a keyboard rating stores no aspects, the
Rate view shows the caption's language and references and fits a 390 px phone, the
transcreation language check, critical objects clicked as words, and the refusal to work on
a caption whose image file is missing. Screenshots go to test-artifacts/."""
from __future__ import annotations

import pytest
from sqlalchemy import select

from tests.app.conftest import png_bytes
from tests.app.test_app_browser import TIMEOUT_MS, browser, log_in, open_tab, page, table_rows  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser
CAPTION = "a man in a white shirt rides a horse"


@pytest.fixture(scope="module")
def seeded(server):
    """Collections of their own: zz-annotate (one rated English candidate and a reference),
    zz-critical (one caption to mark), zz-missing (a rated caption whose image file is gone),
    zz-mine (one caption for My ratings)."""
    from annotation.people.accounts import get_user
    from annotation.captions import add_caption, get_or_create_collection
    from annotation.database import database_session
    from annotation.image_store import add_image, image_path
    from annotation.studies.tasks import submit_rating

    ids = {}
    with database_session() as session:
        researcher, rater = get_user(session, server.researcher[0]), get_user(session, "rater1")
        for n, name in enumerate(("zz-annotate", "zz-critical", "zz-missing", "zz-mine")):
            collection = get_or_create_collection(session, researcher, name)
            image = add_image(session, png_bytes((10 + n, 120, 60), (50 + n, 30)), original_filename=f"{name}.png")
            add_caption(session, researcher, image, "a man riding a horse", kind="reference", collection=collection)
            caption = add_caption(session, researcher, image, CAPTION, collection=collection)
            submit_rating(session, rater, caption.id, 0.6)
            ids[name] = caption.id
            if name == "zz-missing":
                image_path(image).unlink()
    return ids


def choose(page, collection: str) -> None:
    """Pick a collection in the Annotate tab's dropdown, once the first collection (chosen at
    login) has loaded and the Rate view has scrolled to its item, which would move the list."""
    page.wait_for_function("() => document.querySelector('#rate-status textarea')?.value")
    page.wait_for_timeout(300)
    box = page.locator("#annotate-collection input")
    box.click()
    box.fill(collection)  # filters the list to this name, so its option sits right under the box
    # Enter takes the filtered list's active option: a click could miss on a phone, where the
    # Rate view scrolling to its item moves the list out of the viewport (seen under load)
    page.get_by_role("option", name=collection, exact=True).wait_for()
    box.press("Enter")
    page.wait_for_function(f"() => document.querySelector('#annotate-collection input')?.value === {collection!r}")


def stored_rating(server, caption_id: int):
    from annotation.people.accounts import get_user
    from annotation.database import database_session
    from annotation.studies.tasks import list_ratings

    with database_session() as session:
        user = get_user(session, server.annotator[0])
        rating = next(r for r in list_ratings(session, user, annotator=user) if r.caption_id == caption_id)
        return rating.overall, rating.fluency, rating.relevance, rating.descriptiveness


# A slider's label drops "not set yet" once the annotator sets it (a key, the slider or its box).
LABEL_SET = "() => !document.querySelector('#{}').innerText.includes('not set yet')"


def value_is(elem: str, text: str, what: str = "textarea") -> str:
    return f"() => document.querySelector('#{elem} {what}')?.value.includes({text!r})"


def open_rate(page, server, collection: str, caption: str = CAPTION) -> None:
    log_in(page, *server.annotator)
    choose(page, collection)
    page.wait_for_function(value_is("rate-caption", caption))


def test_keyboard_rating_stores_no_aspects_and_the_view_shows_language_and_references(page, server, seeded,
                                                                                      artifacts):
    open_rate(page, server, "zz-annotate")
    assert page.locator("#rate-language textarea, #rate-language input").first.input_value() == "English (en)"
    assert "a man riding a horse" in page.locator("#rate-references textarea").input_value()
    assert not page.locator("#rate-fluency").is_visible()  # aspects are off until asked for
    page.screenshot(path=str(artifacts / "annotate-rate-language-references.png"), full_page=True)
    page.locator("#rate-panel").get_by_text("Rate how well").click()
    page.keyboard.press("7")
    page.wait_for_function("() => document.querySelector('#rate-overall input[type=number]').value === '0.7'")
    page.wait_for_function(LABEL_SET.format("rate-overall"))
    page.keyboard.press("Alt+n")
    page.wait_for_function(value_is("rate-status", "Saved rating"))
    assert stored_rating(server, seeded["zz-annotate"]) == (pytest.approx(0.7), None, None, None)

    # Back to it, ask for aspects and move only Fluency: the two untouched aspects stay unset.
    page.locator("#rate-back").click()
    page.wait_for_function(value_is("rate-status", "Showing your earlier item"))
    page.locator("#rate-use-aspects input").check()
    fluency = page.locator("#rate-fluency input[type=number]")
    fluency.fill("0.9")
    fluency.press("Enter")
    page.wait_for_function(LABEL_SET.format("rate-fluency"))
    page.locator("#rate-save").click()  # relevance and descriptiveness neither set nor skipped: refused
    page.wait_for_function(value_is("rate-status", "Set or skip relevance, descriptiveness first"))
    for aspect in ("relevance", "descriptiveness"):
        page.locator("#rate-skip-aspects").get_by_label(aspect, exact=True).check()
    page.locator("#rate-save").click()
    page.wait_for_function(value_is("rate-status", "Saved rating"))
    assert stored_rating(server, seeded["zz-annotate"]) == (pytest.approx(0.7), pytest.approx(0.9), None, None)

    # A page reload forgets nothing Back needs: it comes from the stored ratings.
    page.reload()
    page.wait_for_selector("#score-button")
    open_tab(page, "Annotate")  # still logged in: the login form stays folded away
    page.wait_for_function("() => document.querySelector('#login-status textarea')?.value.startsWith('Logged in')")
    assert not page.locator("#login-name").is_visible()
    choose(page, "zz-annotate")
    page.wait_for_function(value_is("rate-caption", "Nothing left to rate"))
    page.locator("#rate-back").click()
    page.wait_for_function(value_is("rate-status", "Showing your earlier item"))
    assert page.locator("#rate-caption textarea").input_value() == CAPTION


def test_the_rate_view_fits_a_390_px_phone(browser, server, seeded, artifacts):  # noqa: F811
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True,
                                  device_scale_factor=2)
    phone = context.new_page()
    phone.set_default_timeout(TIMEOUT_MS)
    phone.goto(server.url)
    phone.wait_for_selector("#score-button")
    open_rate(phone, server, "app-test", "")
    phone.wait_for_function("() => Number(document.querySelector('#rate-caption-id input')?.value) > 0")
    phone.wait_for_timeout(500)
    width = phone.evaluate("() => document.scrollingElement.scrollWidth")
    phone.screenshot(path=str(artifacts / "annotate-rate-390px.png"), full_page=True)
    assert width <= 390, f"the Rate view is {width} px wide on a 390 px phone"
    save = phone.locator("#rate-save").bounding_box()
    assert save["x"] >= 0 and save["x"] + save["width"] <= 390
    phone.locator("#rate-use-aspects input").check()  # the aspect sliders fit too
    phone.locator("#rate-descriptiveness").wait_for()
    assert phone.evaluate("() => document.scrollingElement.scrollWidth") <= 390
    phone.screenshot(path=str(artifacts / "annotate-rate-390px-aspects.png"), full_page=True)
    context.close()


def test_transcreation_in_the_wrong_language_is_held_back_until_submitted_again(page, server, seeded, artifacts):
    from annotation.people.accounts import get_user
    from annotation.database import database_session
    from annotation.studies.tasks import own_rating, submit_rating
    from db.models import Transcreation

    with database_session() as session:  # blind overlap: one transcreates (sees the score) once rated
        annotator = get_user(session, server.annotator[0])
        if own_rating(session, annotator, seeded["zz-annotate"]) is None:
            submit_rating(session, annotator, seeded["zz-annotate"], 0.7)
    log_in(page, *server.annotator)
    choose(page, "zz-annotate")
    open_tab(page, "Transcreate")  # opening the tab loads the next caption; a Load next click on top of it
    # could answer after the text below was typed and empty the box (CI under load: the submit then
    # saw no text and the language warning never came)
    page.wait_for_function(f"() => Number(document.querySelector('#transcreate-caption-id input')"
                           f"?.value) === {seeded['zz-annotate']}")
    page.locator("#transcreate-text textarea").fill("a man in a white shirt is riding a horse")
    page.locator("#transcreate-submit").click()
    page.wait_for_function(value_is("transcreate-status", "reads as English (en), not German (de)"))
    assert page.locator("#transcreate-text textarea").input_value() == "a man in a white shirt is riding a horse"
    page.screenshot(path=str(artifacts / "annotate-transcreate-language-warning.png"), full_page=True)
    with database_session() as session:
        assert session.scalar(select(Transcreation).where(
            Transcreation.source_caption_id == seeded["zz-annotate"])) is None
    page.locator("#transcreate-submit").click()  # the same text again: saved as it is
    page.wait_for_function(value_is("transcreate-status", "Saved."))
    with database_session() as session:
        saved = session.scalar(select(Transcreation).where(Transcreation.source_caption_id == seeded["zz-annotate"]))
        assert saved.text == "a man in a white shirt is riding a horse" and saved.target_language == "de"


def test_critical_objects_are_chosen_by_clicking_words(page, server, seeded, artifacts, monkeypatch):
    """Clicks land while the previous click's round trip is still out (each takes 0.5 s here, as on
    a busy server): every ticked word is marked, none is dropped."""
    import time

    from annotation.database import database_session
    from annotation.studies import queue_screens
    from db.models import CriticalAnnotation

    log_in(page, *server.annotator)
    choose(page, "zz-critical")
    open_tab(page, "Critical objects")  # opening the tab loads its first caption
    shown = "Number(document.querySelector('#critical-caption-id input')?.value)"
    page.wait_for_function(f"() => {shown} > 0")
    caption_id = int(page.locator("#critical-caption-id input").input_value())
    # Every load has landed before a word is clicked: a load clicked on top of the tab's own
    # (as this test once did) may land after the clicks, and a new screen starts unmarked.
    while caption_id != seeded["zz-critical"]:  # the queue also offers the reference caption
        page.locator("#critical-skip").click()
        page.wait_for_function(f"() => {shown} !== {caption_id}")
        caption_id = int(page.locator("#critical-caption-id input").input_value())
    # The words are shown once; the group chosen above them decides what a click marks, and
    # the preview shows the phrases Save stores as they are marked.
    words, group = page.locator("#critical-words"), page.locator("#critical-group")
    assert words.get_by_label("white", exact=True).count() == 1
    preview = queue_screens.marking_preview

    def slow_preview(*args):
        time.sleep(0.5)
        return preview(*args)

    monkeypatch.setattr(queue_screens, "marking_preview", slow_preview)
    for word in ("white", "shirt", "horse"):
        words.get_by_label(word, exact=True).check()
    page.wait_for_function(value_is("critical-preview", "Critical objects: white shirt | horse"))
    group.get_by_label("Relationships", exact=True).check()
    page.wait_for_function("() => !document.querySelector('#critical-words input:checked')")
    words.get_by_label("rides", exact=True).check()
    page.wait_for_function(value_is("critical-preview", "Relationships: rides"))
    assert "Critical objects: white shirt | horse" in page.locator("#critical-preview textarea").input_value()
    page.screenshot(path=str(artifacts / "annotate-critical-words.png"), full_page=True)
    page.locator("#critical-save").click()
    page.wait_for_function(value_is("critical-status", "Saved."))
    with database_session() as session:
        marked = session.scalar(select(CriticalAnnotation).where(CriticalAnnotation.caption_id == caption_id))
        assert marked.critical_objects == ["white shirt", "horse"]
        assert marked.spans["critical_objects"] == [[11, 22], [31, 36]]
        assert marked.spans["relationships"] == [[23, 28]] and marked.relationships == ["rides"]
        assert [CAPTION[s:e] for s, e in marked.spans["critical_objects"]] == marked.critical_objects


def test_transcreate_and_critical_refuse_a_caption_whose_image_is_missing(page, server, seeded, artifacts):
    from annotation.people.accounts import get_user
    from annotation.database import database_session
    from annotation.studies.tasks import own_rating, submit_rating

    with database_session() as session:  # blind overlap: transcreation offers captions one has rated
        annotator = get_user(session, server.annotator[0])
        if own_rating(session, annotator, seeded["zz-missing"]) is None:
            submit_rating(session, annotator, seeded["zz-missing"], 0.5)
    log_in(page, *server.annotator)
    choose(page, "zz-missing")
    open_tab(page, "Transcreate")
    page.locator("#transcreate-next").click()
    page.wait_for_function(value_is("transcreate-status", "cannot be transcreated"))
    assert page.locator("#transcreate-submit").is_disabled()
    open_tab(page, "Critical objects")
    page.locator("#critical-next").click()
    page.wait_for_function(value_is("critical-status", "cannot be marked"))
    assert page.locator("#critical-save").is_disabled()
    page.screenshot(path=str(artifacts / "annotate-critical-missing-image.png"), full_page=True)


def test_my_ratings_lists_opens_for_editing_and_withdraws_ones_own_rating(page, server, seeded, artifacts):
    from annotation.people.accounts import get_user
    from annotation.database import database_session
    from annotation.studies.tasks import list_ratings

    caption_id = seeded["zz-mine"]
    open_rate(page, server, "zz-mine")
    page.locator("#rate-panel").get_by_text("Rate how well").click()
    page.keyboard.press("4")
    page.keyboard.press("Alt+n")
    page.wait_for_function(value_is("rate-status", "Saved rating"))

    page.locator("#my-ratings").get_by_text("My ratings in this collection").click()
    page.wait_for_function(f"() => document.querySelector('#my-ratings-table [data-testid=cell-0-1]')"
                           f"?.innerText.includes({CAPTION!r})")
    page.locator("#my-ratings-table [data-testid=cell-0-1]").click()  # choosing a row fills in its caption id
    page.wait_for_function(f"() => document.querySelector('#my-caption-id input')?.value === '{caption_id}'")
    page.locator("#my-open").click()
    page.wait_for_function(value_is("rate-status", f"Showing your rating of caption {caption_id}; saving edits it"))
    assert page.locator("#rate-overall input[type=number]").input_value() == "0.4"
    page.locator("#rate-panel").get_by_text("Rate how well").click()
    page.keyboard.press("9")
    page.keyboard.press("Alt+n")
    page.wait_for_function(value_is("rate-status", "Saved rating"))
    assert stored_rating(server, caption_id)[0] == pytest.approx(0.9)
    page.wait_for_function("() => document.querySelector('#my-ratings-table [data-testid=cell-0-6]')"
                           "?.innerText.trim() === '1'")  # one edit: the table refreshed after the save
    row = table_rows(page, "#my-ratings-table")[0]
    assert row[:3] == [str(caption_id), CAPTION, "0.9"], row
    page.screenshot(path=str(artifacts / "annotate-my-ratings.png"), full_page=True)

    page.locator("#my-withdraw").click()
    page.wait_for_function(value_is("rate-status", f"Withdrew your rating of caption {caption_id}"))
    page.wait_for_function("() => !document.querySelector('#my-ratings-table [data-testid=cell-0-1]')")
    with database_session() as session:
        user = get_user(session, server.annotator[0])
        assert caption_id not in {r.caption_id for r in list_ratings(session, user, annotator=user)}
    # Withdrawing again is refused in words; the screen stays
    page.locator("#my-withdraw").click()
    page.wait_for_function(value_is("rate-status", f"You have no rating of caption {caption_id} in zz-mine"))
