"""Issue 24's study quality control in headless Chromium: a researcher sets up a qualification
item, a gold item, the check rate and a pausing threshold in the Study tab; an annotator gets
the qualification item first, sees the feedback, passes, rates, fails the gold item and is
flagged and paused (told why); the researcher sees it, makes another annotator a reviewer, who
settles the item the annotators disagree on most in the Review tab. Screenshots go to
test-artifacts/."""
from __future__ import annotations

import pytest
from sqlalchemy import select

from tests.app.conftest import png_bytes
from tests.app.test_app_annotate_browser import LABEL_SET, choose, log_in, open_tab, value_is
from tests.app.test_app_browser import TIMEOUT_MS, browser, page, table_rows  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser
ANNOTATOR = ("qc-ann", "qc-ann-password")
REVIEWER = ("qc-rev", "qc-rev-password")
COLLECTION = "zz-qc"


@pytest.fixture(scope="module")
def qc_study(server):
    """Collection zz-qc: captions q0 (to be the qualification item), g0 (the gold item), r0 (rated
    0.1, 0.5 and 0.9 by three raters: the largest spread), r1 (0.4, 0.5, 0.5) and r2, r3."""
    from annotation.people.accounts import create_user, get_user
    from annotation.captions import add_caption, get_or_create_collection
    from annotation.database import database_session
    from annotation.image_store import add_image
    from annotation.studies.tasks import submit_rating

    ids = {}
    with database_session() as session:
        create_user(session, ANNOTATOR[0], "annotator", ANNOTATOR[1])
        create_user(session, REVIEWER[0], "annotator", REVIEWER[1])
        raters = [create_user(session, f"qc-rater{i}", "annotator", f"qc-rater-password-{i}") for i in range(3)]
        researcher = get_user(session, server.researcher[0])
        collection = get_or_create_collection(session, researcher, COLLECTION)
        for n, name in enumerate(("q0", "g0", "r0", "r1", "r2", "r3")):
            image = add_image(session, png_bytes((40 * n, 90, 160 - 20 * n), (64, 48)), original_filename=f"{name}.png")
            ids[name] = add_caption(session, researcher, image, f"zz-qc caption {name}", collection=collection).id
        for name, values in (("r0", (0.1, 0.5, 0.9)), ("r1", (0.4, 0.5, 0.5))):
            for rater, value in zip(raters, values):
                submit_rating(session, rater, ids[name], value)
    return ids


def study_panel(page, server) -> None:
    log_in(page, *server.researcher)
    open_tab(page, "Study")
    page.locator("#agreement-collection input").click()
    page.get_by_role("option", name=COLLECTION, exact=True).click()
    if not page.locator("#qc-save").is_visible():  # the panel stays open from an earlier visit
        page.locator("#qc-box").get_by_text("Quality control").first.click()
    page.locator("#qc-save").wait_for(state="visible")


def fill(page, elem: str, value) -> None:
    page.locator(f"#{elem} input, #{elem} textarea").first.fill(str(value))


def press_overall(page, key: str) -> None:
    page.locator("#rate-panel").get_by_text("Rate how well").click()
    page.keyboard.press(key)
    page.wait_for_function(LABEL_SET.format("rate-overall"))


def notice_has(text: str) -> str:
    return f"() => document.querySelector('#rate-notice')?.innerText.includes({text!r})"


def test_qualification_gold_flag_and_review_in_the_browser(page, server, qc_study, artifacts):
    from annotation.database import database_session
    from db.models import Adjudication, CheckAnswer, Rating, StudyParticipant, User

    page.set_default_timeout(TIMEOUT_MS)
    # the researcher: q0 a qualification item (0.8 +- 0.1), g0 a gold item (0.9 +- 0.05),
    # pass mark 1.0, every second item a check, pause below 50 % after one check
    study_panel(page, server)
    for kind, caption, expected, tolerance in (("qualification", "q0", 0.8, 0.1), ("gold", "g0", 0.9, 0.05)):
        fill(page, "qc-caption", qc_study[caption])
        page.locator("#qc-kind input").click()
        page.get_by_role("option", name=kind, exact=True).click()
        fill(page, "qc-expected", expected)
        fill(page, "qc-tolerance", tolerance)
        if kind == "qualification":
            fill(page, "qc-explanation", "The colours are right but the shape is not named.")
        else:
            fill(page, "qc-explanation", "")
        page.locator("#qc-add").click()
        page.wait_for_function(value_is("agreement-status", f"Caption {qc_study[caption]} is a {kind} item now."))
    fill(page, "qc-pass", 1)
    fill(page, "qc-rate", 0.5)
    fill(page, "qc-threshold", 0.5)
    fill(page, "qc-min", 1)
    page.locator("#qc-pause input").check()
    page.locator("#qc-save").click()
    page.wait_for_function(value_is("agreement-status", f"Quality control of {COLLECTION} saved."))
    assert [(int(r[0]), r[1], float(r[2]), float(r[3])) for r in table_rows(page, "#qc-items")] == [
        (qc_study["g0"], "gold", 0.9, 0.05), (qc_study["q0"], "qualification", 0.8, 0.1)]
    page.screenshot(path=str(artifacts / "qc-study-setup.png"), full_page=True)

    # the annotator: the qualification item first, with its feedback after saving
    log_in(page, *ANNOTATOR)
    choose(page, COLLECTION)
    page.wait_for_function(value_is("rate-caption", "zz-qc caption q0"))
    page.wait_for_function(notice_has("Qualification round"))
    assert "0.8" not in page.locator("#rate-notice").inner_text()
    page.screenshot(path=str(artifacts / "qc-qualification-item.png"), full_page=True)
    press_overall(page, "7")  # 0.7: within 0.8 +- 0.1
    page.locator("#rate-save").click()
    page.wait_for_function(notice_has("You passed the qualification round"))
    notice = page.locator("#rate-notice").inner_text()
    assert "expected 0.80 (± 0.10), you gave 0.70: within the tolerance" in notice
    assert "shape is not named" in notice
    page.screenshot(path=str(artifacts / "qc-qualification-feedback.png"), full_page=True)
    real = page.locator("#rate-caption textarea").input_value()
    assert real.startswith("zz-qc caption r") and real not in ("zz-qc caption r0", "zz-qc caption r1")
    press_overall(page, "6")
    page.locator("#rate-save").click()
    page.wait_for_function(value_is("rate-caption", "zz-qc caption g0"))  # the gold item, every second one
    assert not page.locator("#rate-notice").is_visible()  # nothing tells it apart
    press_overall(page, "2")  # 0.2 against 0.9 +- 0.05: wrong
    page.locator("#rate-save").click()
    page.wait_for_function(notice_has("You are paused in zz-qc"))
    notice = page.locator("#rate-notice").inner_text()
    assert "0 of your 1 answers" in notice and "below the study's 50%" in notice
    assert page.locator("#rate-save").is_disabled()
    page.screenshot(path=str(artifacts / "qc-paused.png"), full_page=True)
    with database_session() as session:
        ann = session.scalar(select(User).where(User.name == ANNOTATOR[0]))
        answers = session.execute(select(CheckAnswer.phase, CheckAnswer.overall, CheckAnswer.passed)
                                  .where(CheckAnswer.annotator_id == ann.id).order_by(CheckAnswer.id)).all()
        assert [tuple(a) for a in answers] == [("qualification", 0.7, True), ("queue", 0.2, False)]
        assert list(session.scalars(select(Rating.overall).where(Rating.annotator_id == ann.id))) == [0.6]
        participant = session.scalar(select(StudyParticipant).where(StudyParticipant.annotator_id == ann.id))
        assert participant.qualification == "passed" and participant.flagged_at and participant.paused_at

    # the researcher sees the flag and the pause, and makes qc-rev a reviewer
    study_panel(page, server)
    page.wait_for_function(f"() => document.querySelector('#qc-people')?.innerText.includes({ANNOTATOR[0]!r})")
    people = {row[0]: row for row in table_rows(page, "#qc-people")}
    row = people[ANNOTATOR[0]]  # qualification, its score, checks answered, gold accuracy, flagged, paused
    assert (row[1], float(row[2]), int(row[3]), float(row[4]), row[5], row[6]) == ("passed", 1.0, 1, 0.0, "yes", "yes")
    fill(page, "qc-name", REVIEWER[0])
    page.locator("#qc-reviewer").click()
    page.wait_for_function(value_is("qc-reviewers", REVIEWER[0]))
    page.screenshot(path=str(artifacts / "qc-flagged-and-reviewer.png"), full_page=True)

    # the annotator may not review; the reviewer settles r0 (spread 0.8) first
    log_in(page, *ANNOTATOR)
    choose(page, COLLECTION)
    page.get_by_role("tab", name="Review", exact=True).click()
    page.locator("#review-next").click()
    page.wait_for_function(value_is("review-status", "qc-ann is not a reviewer of zz-qc"))
    log_in(page, *REVIEWER)
    choose(page, COLLECTION)
    page.get_by_role("tab", name="Review", exact=True).click()  # already open: Load next loads zz-qc's item
    page.locator("#review-next").click()
    page.wait_for_function(value_is("review-caption", "zz-qc caption r0"))
    assert page.locator("#review-ratings textarea").input_value() == \
        "3 ratings: 0.10, 0.50, 0.90 (spread 0.80, mean 0.50)"
    page.locator("#review-value input[type=number]").fill("0.65")
    page.locator("#review-value input[type=number]").press("Enter")
    page.locator("#review-note textarea").fill("half of the object is hidden")
    page.locator("#review-save").click()
    page.wait_for_function(value_is("review-status", "Settled caption"))
    page.wait_for_function(value_is("review-caption", "zz-qc caption r1"))  # the next largest spread
    # The value starts again at this item's mean, not at the 0.65 just given to r0.
    mean = page.locator("#review-ratings textarea").input_value().rsplit("mean ", 1)[1].rstrip(")")
    assert float(page.locator("#review-value input[type=number]").input_value()) == pytest.approx(float(mean), abs=0.006)
    page.screenshot(path=str(artifacts / "qc-review.png"), full_page=True)
    with database_session() as session:
        settled = session.execute(select(Adjudication.caption_id, Adjudication.overall, Adjudication.note,
                                         User.name).join(User, User.id == Adjudication.reviewer_id)).all()
        assert [tuple(s) for s in settled] == [(qc_study["r0"], 0.65, "half of the object is hidden", REVIEWER[0])]
        assert sorted(session.scalars(select(Rating.overall).where(Rating.caption_id == qc_study["r0"]))) == \
            [0.1, 0.5, 0.9]  # the raw ratings as they were
