"""Issue 24 in headless Chromium: a pairwise study. A researcher makes the pairs of a
collection in the Pairwise tab; two annotators judge every pair in the Annotate tab's Compare
view with keys 1, 2 and 3 (each in their own blind left/right order); the researcher then sees
each metric's pairwise accuracy and the sources' Bradley–Terry ranking. Screenshots go to
test-artifacts/."""
from __future__ import annotations

import os

import pytest
from sqlalchemy import select

from tests.app.conftest import png_bytes
from tests.app.test_app_annotate_browser import choose, log_in, open_tab, value_is
from tests.app.test_app_browser import CHROMIUM, browser, page, table_rows  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium not installed (/usr/bin/chromium)")]
COLLECTION = "zz-pairs"
JUDGES = (("judge-one", "judge-one-password"), ("judge-two", "judge-two-password"))


@pytest.fixture(scope="module")
def pairs_study(server):
    """Two images, each with a caption of system m1 and one of m2, and two annotators."""
    from annotation.people.accounts import create_user, get_user
    from annotation.captions import add_caption, get_or_create_collection
    from annotation.database import database_session
    from annotation.image_store import add_image

    with database_session() as session:
        for name, password in JUDGES:
            create_user(session, name, "annotator", password)
        researcher = get_user(session, server.researcher[0])
        collection = get_or_create_collection(session, researcher, COLLECTION)
        for n, (good, bad) in enumerate((("a red square", "a blue circle"), ("a green square", "a red cross"))):
            image = add_image(session, png_bytes((200 * (n == 0), 200 * (n == 1), 30), (64, 48)),
                              original_filename=f"pair-{n}.png")
            add_caption(session, researcher, image, f"{good} on a white table", kind="reference", collection=collection)
            add_caption(session, researcher, image, f"{good} on white", source_model="m1", collection=collection)
            add_caption(session, researcher, image, f"{bad} on white", source_model="m2", collection=collection)


def judgments_of(name: str) -> dict:
    from annotation.database import database_session
    from db.models import PairwiseItem, PairwiseJudgment, User

    with database_session() as session:
        rows = session.execute(select(PairwiseItem.caption_a_id, PairwiseJudgment.choice, PairwiseJudgment.a_left)
                               .join(PairwiseItem, PairwiseItem.id == PairwiseJudgment.item_id)
                               .join(User, User.id == PairwiseJudgment.annotator_id)
                               .where(User.name == name)).all()
    return {a: (choice, a_left) for a, choice, a_left in rows}


def pairwise_tab(page, server) -> None:
    log_in(page, *server.researcher)
    open_tab(page, "Pairwise")
    page.locator("#pairwise-collection input").click()
    page.get_by_role("option", name=COLLECTION, exact=True).click()


def judge_all(page, keys: str, artifacts, shot: str) -> None:
    page.get_by_role("tab", name="Compare", exact=True).click()
    page.locator("#pair-next").click()  # the view may still be open from the previous login
    page.wait_for_function(value_is("pair-status", "You judged 0 of 2 pairs"))
    page.screenshot(path=str(artifacts / shot), full_page=True)
    for done, key in enumerate(keys, 1):
        page.locator("#pair-keys").click()  # the focus off any text field: keys choose
        page.keyboard.press(key)
        page.wait_for_function(value_is("pair-status", f"You judged {done} of 2 pairs"))
    page.wait_for_function(value_is("pair-left-text", "Nothing left to compare"))


def test_a_pairwise_study_with_two_annotators_ends_with_each_metrics_accuracy(page, server, pairs_study, artifacts):
    pairwise_tab(page, server)
    page.locator("#pairwise-make").click()
    page.wait_for_function(value_is("pairwise-status", "2 new pairs; zz-pairs has 2 pairs to compare."))

    for (name, password), keys in zip(JUDGES, ("13", "22")):
        log_in(page, name, password)
        choose(page, COLLECTION)
        judge_all(page, keys, artifacts, f"pairwise-{name}.png")
    one, two = judgments_of(JUDGES[0][0]), judgments_of(JUDGES[1][0])
    assert len(one) == len(two) == 2
    # Key 1 chose the left caption, 3 a tie, 2 the right one, whichever side caption A was on.
    assert [choice for choice, _ in one.values()].count("tie") == 1
    assert all(choice == ("a" if a_left else "b") for choice, a_left in one.values() if choice != "tie")
    assert all(choice == ("b" if a_left else "a") for choice, a_left in two.values())

    pairwise_tab(page, server)
    page.locator("#pairwise-button").click()
    page.wait_for_function(value_is("pairwise-status", "4 judgments by 2 annotators"), timeout=240_000)
    status = page.locator("#pairwise-status textarea").input_value()
    rows = table_rows(page, "#pairwise-accuracy")
    from app import engine
    assert [row[0] for row in rows] == engine.metric_names(server.ctx.profile)
    scored = [row for row in rows if f"{row[0]}: " not in status.split("Unavailable:")[-1]]
    assert len(scored) >= 3
    for row in scored:  # accuracy over the 2 pairs with a majority: 0, 0.25, ..., 1 (ties count half)
        assert float(row[4]) in (0.0, 0.25, 0.5, 0.75, 1.0) and row[5] == row[4] and row[6] == "2"
    ranking = {row[1]: row for row in table_rows(page, "#pairwise-ranking")}
    assert set(ranking) == {"m1", "m2"}
    page.screenshot(path=str(artifacts / "pairwise-accuracy.png"), full_page=True)
