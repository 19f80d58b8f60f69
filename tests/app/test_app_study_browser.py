"""Issue 24 in headless Chromium: the rating defects (unset sliders refuse the save, Save on
the first screen of a 390 px phone and the view back at its top after saving, Back after
Skip), the login form folding away, an admin inviting an annotator who joins through the
link and is refused admin actions, changing one's own password, and a collection imported in
Data appearing in Annotate's list. Screenshots go to test-artifacts/."""
from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from tests.app.conftest import png_bytes
from tests.app.test_app_annotate_browser import LABEL_SET, choose, log_in, open_tab, value_is
from tests.app.test_app_browser import TIMEOUT_MS, browser, page  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser
ADMIN = ("boss", "boss-password-1")
RATER = ("rater-s", "rater-s-password")
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def study(server):
    """An admin, an annotator of its own, and the collections zz-phone and zz-skip (three
    captions each, each of its own image)."""
    from annotation.people.accounts import create_user, get_user
    from annotation.captions import add_caption, get_or_create_collection
    from annotation.database import database_session
    from annotation.image_store import add_image

    ids = {}
    with database_session() as session:
        create_user(session, *ADMIN[:1], "admin", ADMIN[1])
        create_user(session, RATER[0], "annotator", RATER[1])
        researcher = get_user(session, server.researcher[0])
        for n, name in enumerate(("zz-phone", "zz-skip")):
            collection = get_or_create_collection(session, researcher, name)
            ids[name] = []
            for i in range(3):
                image = add_image(session, png_bytes((60 * i, 40 + n * 50, 90), (64, 48)),
                                  original_filename=f"{name}-{i}.png")
                ids[name].append(add_caption(session, researcher, image, f"{name} caption number {i}",
                                             collection=collection).id)
    return ids


def ratings_of(name: str, caption_ids) -> dict:
    from annotation.database import database_session
    from db.models import Rating, User

    with database_session() as session:
        rows = session.execute(select(Rating.caption_id, Rating.overall).join(User, User.id == Rating.annotator_id)
                               .where(User.name == name, Rating.caption_id.in_(caption_ids))).all()
        return dict(rows)


def shown_caption_id(page) -> int:
    return int(page.locator("#rate-caption-id input").input_value())


def test_an_unset_slider_refuses_the_save_and_back_after_skip_shows_the_skipped_item(page, server, study,
                                                                                       artifacts):
    log_in(page, *RATER)
    choose(page, "zz-skip")
    page.wait_for_function(value_is("rate-caption", "zz-skip caption"))
    first = shown_caption_id(page)
    assert "not set yet" in page.locator("#rate-overall").inner_text()
    page.locator("#rate-save").click()  # nothing set: refused, nothing stored, the item stays
    page.wait_for_function(value_is("rate-status", "Set the overall score first"))
    assert ratings_of(RATER[0], study["zz-skip"]) == {} and shown_caption_id(page) == first
    page.screenshot(path=str(artifacts / "study-unset-refused.png"), full_page=True)
    page.locator("#rate-panel").get_by_text("Rate how well").click()
    page.keyboard.press("3")
    page.wait_for_function(LABEL_SET.format("rate-overall"))
    page.locator("#rate-save").click()
    page.wait_for_function(value_is("rate-status", "Saved rating"))
    assert ratings_of(RATER[0], study["zz-skip"]) == {first: pytest.approx(0.3)}
    second = shown_caption_id(page)
    assert "not set yet" in page.locator("#rate-overall").inner_text()  # the next item starts unset, not 0.3
    page.locator("#rate-skip").click()
    page.wait_for_function(value_is("rate-status", "Skipped caption"))
    page.locator("#rate-back").click()
    page.wait_for_function(value_is("rate-status", "Showing the item you skipped"))
    assert shown_caption_id(page) == second
    page.locator("#rate-back").click()
    page.wait_for_function(value_is("rate-status", "Showing your earlier item"))
    assert shown_caption_id(page) == first
    assert page.locator("#rate-overall input[type=number]").input_value() == "0.3"


def test_on_a_390_px_phone_save_is_on_the_first_screen_and_saving_returns_to_the_top(browser, server, study,
                                                                                        artifacts):
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2)
    phone = context.new_page()
    phone.set_default_timeout(TIMEOUT_MS)
    phone.goto(server.url)
    phone.wait_for_selector("#score-button")
    log_in(phone, *server.annotator)
    choose(phone, "zz-phone")
    phone.wait_for_function(value_is("rate-caption", "zz-phone caption"))
    phone.wait_for_timeout(700)

    def on_first_screen(elem: str) -> bool:
        box = phone.locator(elem).bounding_box()
        return box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"]

    phone.screenshot(path=str(artifacts / "study-phone-first-screen.png"))
    assert on_first_screen("#rate-save") and on_first_screen("#rate-image")
    phone.locator("#rate-overall input[type=number]").fill("0.8")
    phone.locator("#rate-overall input[type=number]").press("Enter")
    phone.wait_for_function(LABEL_SET.format("rate-overall"))
    phone.evaluate("() => window.scrollTo(0, document.scrollingElement.scrollHeight)")
    assert not on_first_screen("#rate-image")
    phone.locator("#rate-save").click()
    phone.wait_for_function(value_is("rate-status", "Saved rating"))
    phone.wait_for_timeout(700)
    phone.screenshot(path=str(artifacts / "study-phone-after-save.png"))
    assert on_first_screen("#rate-image") and on_first_screen("#rate-save")
    context.close()


def test_the_login_form_folds_away_once_logged_in(page, server, study):
    open_tab(page, "Annotate")
    assert page.locator("#login-hint").is_visible() and page.locator("#login-name").is_visible()
    assert not page.locator("#logout-button").is_visible()
    log_in(page, *server.annotator)
    page.wait_for_function("() => !document.querySelector('#login-name')?.offsetParent")
    assert not page.locator("#login-hint").is_visible() and page.locator("#logout-button").is_visible()
    page.wait_for_function("() => !document.querySelector('#annotate-login-notice')?.innerText.includes('Needs a login')")
    # who is logged in is said once, in the Account box beside the Log out button
    assert page.locator("#login-status textarea").input_value().startswith("Logged in as ")
    assert "Log in below" not in (notice := page.locator("#annotate-login-notice").inner_text())
    assert "Logged in as" not in notice and notice.startswith("Annotate")
    page.locator("#logout-button").click()
    page.wait_for_function("() => !!document.querySelector('#login-name')?.offsetParent")
    assert page.locator("#login-status textarea").input_value() == "Not logged in."


# A Gradio table draws only the rows in its viewport: step its scroller down until `text` shows.
SCROLLED_TO = """() => {
    const table = document.querySelector('#admin-accounts');
    if (table?.innerText.includes(%r)) return true;
    for (const el of table?.querySelectorAll('*') ?? []) {
        if (el.scrollHeight > el.clientHeight + 4) { el.scrollTop += el.clientHeight / 2; }
    }
    return false;
}"""


def test_an_admin_invites_an_annotator_who_joins_and_is_refused_admin_actions(browser, page, server, study,
                                                                             artifacts):
    log_in(page, *ADMIN)
    open_tab(page, "Admin")
    page.locator("#admin-role input").click()
    page.get_by_role("option", name="annotator", exact=True).click()
    page.locator("#admin-invite").click()
    page.wait_for_function(value_is("admin-link", "?invite="))
    link = page.locator("#admin-link textarea").input_value()
    assert link.startswith(server.url.rstrip("/"))
    page.screenshot(path=str(artifacts / "study-admin-invite.png"), full_page=True)

    context = browser.new_context()
    guest = context.new_page()
    guest.set_default_timeout(TIMEOUT_MS)
    guest.goto(link)
    guest.wait_for_selector("#score-button")
    open_tab(guest, "Annotate")
    guest.wait_for_function("() => document.querySelector('#join-text')?.innerText.includes('invited as')")
    guest.locator("#join-name textarea").fill("newbie")
    guest.locator("#join-password input, #join-password textarea").first.fill("newbie-password")
    guest.locator("#join-again input, #join-again textarea").first.fill("newbie-password")
    guest.locator("#join-button").click()
    guest.wait_for_function(value_is("login-status", "Logged in as newbie (annotator)"))
    guest.screenshot(path=str(artifacts / "study-joined.png"), full_page=True)

    # The annotator's own admin requests are refused by the server, whatever the page shows.
    open_tab(guest, "Admin")
    assert guest.locator("#admin-status textarea").input_value() == ""  # no refusal before any click
    guest.locator("#admin-invite").click()
    guest.wait_for_function(value_is("admin-status", "may not do this"))
    assert guest.locator("#admin-link textarea").input_value() == ""

    # The link works once; the audit log has the invite and the join.
    again = context.new_page()
    again.goto(link)
    again.wait_for_selector("#score-button")
    open_tab(again, "Annotate")
    again.wait_for_function(value_is("login-status", "already used"))
    page.locator("#admin-refresh").click()
    page.wait_for_function("() => document.querySelector('#admin-audit')?.innerText.includes('joined')")
    # The accounts table draws only the rows in view (alphabetical): scroll through it to newbie's row.
    page.wait_for_function(SCROLLED_TO % "newbie")

    # Disabled, newbie's next action is refused; re-enabled, newbie logs in again.
    page.locator("#admin-name textarea").fill("newbie")
    page.locator("#admin-disable").click()
    page.wait_for_function(value_is("admin-status", "Account newbie disabled."))
    open_tab(guest, "Annotate")
    choose(guest, "zz-phone")
    guest.wait_for_function(value_is("rate-status", "log in again"))
    page.locator("#admin-enable").click()
    page.wait_for_function(value_is("admin-status", "Account newbie enabled."))
    context.close()


def test_an_annotator_changes_their_own_password(page, server, study):
    from annotation.people.admin import create_account, use_link
    from annotation.people.accounts import get_user
    from annotation.database import database_session

    with database_session() as session:
        token = create_account(session, get_user(session, ADMIN[0]), "pwchanger", "annotator")
    use_link(token, "pwchanger", "first-password")
    log_in(page, "pwchanger", "first-password")
    page.locator("#password-box").get_by_text("Change my password").click()
    page.locator("#password-current input, #password-current textarea").first.fill("first-password")
    page.locator("#password-new input, #password-new textarea").first.fill("second-password")
    page.locator("#password-again input, #password-again textarea").first.fill("second-password")
    page.locator("#password-button").click()
    page.wait_for_function(value_is("login-status", "Password changed"))
    assert page.locator("#login-name").is_visible()  # every login ended: log in again
    log_in(page, "pwchanger", "second-password")


def test_a_collection_imported_in_data_appears_in_annotate(page, server, study, tmp_path):
    from annotation.database import database_session
    from db.models import Image

    with database_session() as session:
        digest = session.scalar(select(Image.sha256).limit(1))
    rows = tmp_path / "zz-imported.jsonl"
    rows.write_text(json.dumps({"image": f"sha256:{digest}", "caption": "an imported caption", "lang": "en"}))
    log_in(page, *server.researcher)
    open_tab(page, "Data")
    page.locator("#data-import-file input[type=file]").set_input_files(str(rows))
    page.locator("#data-import-button").click()
    page.wait_for_function(value_is("data-import-report", "into 'zz-imported' as import #"))
    report = page.locator("#data-import-report textarea").input_value()
    assert "Written: 1 caption, 0 references, 0 ratings, 0 critical-object annotations." in report, report
    assert "Images: 0 new, 1 already stored." in report, report
    open_tab(page, "Annotate")
    page.locator("#annotate-collection input").click()
    page.get_by_role("option", name="zz-imported", exact=True).wait_for()


def test_the_agreement_tab_shows_the_dashboards_numbers(page, server, study, artifacts, monkeypatch):
    """The same click refreshes the quality-control panel; when that refresh lands last (held
    1.5 s here) the agreement's status line stays (it was blanked)."""
    import time

    import app.tabs.agreement as agreement_tab
    from annotation.studies.agreement import study_agreement
    from annotation.people.accounts import get_user
    from annotation.captions import get_collection
    from annotation.database import database_session
    from tests.app.test_app_browser import table_rows

    log_in(page, *server.researcher)
    open_tab(page, "Study")
    page.locator("#agreement-collection input").click()
    page.get_by_role("option", name=server.collection, exact=True).click()
    page.wait_for_function(value_is("agreement-status", server.collection))  # the pick's own status first
    view = agreement_tab.quality_view
    monkeypatch.setattr(agreement_tab, "quality_view", lambda *args: (time.sleep(1.5), view(*args))[1])
    page.locator("#agreement-button").click()
    page.wait_for_function(value_is("agreement-status", "bootstrap samples"))
    page.wait_for_timeout(2500)  # the panel's refresh has landed
    assert "bootstrap samples" in page.locator("#agreement-status textarea").input_value()
    with database_session() as session:
        report = study_agreement(session, get_user(session, server.researcher[0]),
                                 get_collection(session, server.collection))
    shown = table_rows(page, "#agreement-study")
    assert shown[0][0].startswith("Krippendorff") and float(shown[0][1]) == pytest.approx(report.alpha_interval,
                                                                                           abs=1e-4)
    people = {row[0]: row for row in table_rows(page, "#agreement-annotators")}
    assert float(people["rater1"][3]) == pytest.approx(report.annotators[[a.annotator for a in report.annotators]
                                                                         .index("rater1")].bias, abs=1e-3)
    page.screenshot(path=str(artifacts / "study-agreement.png"), full_page=True)


def save_guidelines(page, collection: str, markdown: str) -> str:
    """In the Study tab, as a researcher: `collection`'s guidelines saved as `markdown`. Returns
    what the box held when the collection was picked (the guidelines saved before)."""
    open_tab(page, "Study")
    page.locator("#agreement-collection input").click()
    page.get_by_role("option", name=collection, exact=True).click()
    # the saved guidelines load into the box first (a fill before would be overwritten)
    page.wait_for_function("(c) => { const s = document.querySelector('#agreement-status textarea')?.value || '';"
                           " return s.startsWith(`Guidelines of ${c} loaded`) || s.startsWith(`${c} has no guidelines`); }",
                           arg=collection)
    loaded = page.locator("#study-guidelines textarea").input_value()
    page.locator("#study-guidelines textarea").fill(markdown)
    page.locator("#study-guidelines-save").click()
    page.wait_for_function(value_is("agreement-status", f"Guidelines of {collection} saved."))
    return loaded


def test_guidelines_come_before_the_first_item_and_stay_one_click_away(page, server, study, artifacts):
    log_in(page, *server.researcher)
    assert save_guidelines(page, "zz-skip", "## Rate the caption\n\nA **1.0** needs every detail right.") == ""
    log_in(page, *server.annotator)  # ann has not started zz-skip: the guidelines come first, opened
    choose(page, "zz-skip")
    page.wait_for_function(value_is("rate-caption", "zz-skip caption"))
    page.wait_for_function("() => document.querySelector('#rate-guidelines-text')?.innerText"
                           ".includes('needs every detail right')")
    assert page.locator("#rate-guidelines-text").is_visible()
    page.screenshot(path=str(artifacts / "study-guidelines-first.png"), full_page=True)
    page.locator("#rate-overall input[type=number]").fill("0.6")
    page.locator("#rate-overall input[type=number]").press("Enter")
    page.wait_for_function(LABEL_SET.format("rate-overall"))
    page.locator("#rate-save").click()
    page.wait_for_function(value_is("rate-status", "Saved rating"))
    page.reload()  # started now: the guidelines are folded, one click away
    page.wait_for_selector("#score-button")
    open_tab(page, "Annotate")
    choose(page, "zz-skip")
    page.locator("#rate-guidelines").wait_for()
    page.wait_for_timeout(500)
    assert not page.locator("#rate-guidelines-text").is_visible()
    page.locator("#rate-guidelines").get_by_text("Guidelines of this study").click()
    page.wait_for_function("() => document.querySelector('#rate-guidelines-text')?.offsetParent !== null")
    # Guidelines edited in Study show when the Annotate tab is opened again, the collection kept.
    log_in(page, *server.researcher)
    choose(page, "zz-skip")
    page.wait_for_function("() => document.querySelector('#rate-guidelines-text')?.innerText"
                           ".includes('needs every detail right')")
    # Picking the collection in Study puts its saved guidelines in the box, to edit, not retype
    assert save_guidelines(page, "zz-skip", "## Rate the caption\n\nColours count double.") == \
        "## Rate the caption\n\nA **1.0** needs every detail right."
    open_tab(page, "Annotate")
    page.wait_for_function("() => document.querySelector('#rate-guidelines-text')?.innerText"
                           ".includes('Colours count double')")
