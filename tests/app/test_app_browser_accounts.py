"""What a visitor without an account sees, in headless Chromium: each tab behind a login says
what it is for and how to get an account, a wrong password is a message on the page and one
line in the server log, and the Analyze tab states its filters and reports its progress."""
from __future__ import annotations

import logging

import pytest

from tests.app.test_app_browser import browser, cell_texts, log_in, page, run_on_the_collection  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser
GATED = [("Annotate", "annotate", "rate captions"), ("Analyze", "analyze", "correlates with the collection's human"),
         ("Failure cases", "failures", "disagree most"), ("Data", "data", "export ratings"),
         ("Train", "train", "Fine-tune a metric")]


def notice(page, prefix: str) -> str:
    return page.locator(f"#{prefix}-login-notice").inner_text()


@pytest.fixture
def no_failed_logins():
    """Every test logs in from 127.0.0.1: forget its failed attempts before and after."""
    from sqlalchemy import delete

    from annotation.database import database_session
    from db.models import LoginFailure

    def forget():
        with database_session() as session:
            session.execute(delete(LoginFailure))

    forget()
    yield
    forget()


def test_each_gated_tab_says_what_it_is_for_and_how_to_get_an_account(page, server, artifacts):
    for tab, prefix, purpose in GATED:
        page.get_by_role("tab", name=tab).click()
        text = notice(page, prefix)
        assert purpose in text, (tab, text)
        assert "Needs a login" in text and "caplens user add NAME --role annotator" in text, (tab, text)
        assert "CAPLENS_ADMIN_USER" in text and "demo" in text, (tab, text)
        # where to log in: the Annotate tab elsewhere; on it, once, by the form's hint right below
        if prefix == "annotate":
            assert "Log in below" not in text, text
            assert page.locator("#login-hint").inner_text().startswith("Log in below, or open the one-time link")
        else:
            assert text.rstrip().endswith("Log in on the Annotate tab."), (tab, text)
        if tab == "Analyze":
            page.screenshot(path=str(artifacts / "analyze-needs-login.png"), full_page=True)
    log_in(page, *server.annotator)
    page.get_by_role("tab", name="Analyze").click()
    page.wait_for_function("() => document.querySelector('#analyze-login-notice')?.innerText.includes('Logged in')")
    text = notice(page, "analyze")
    assert f"Logged in as {server.annotator[0]} (annotator), but this tab needs the role researcher or admin" in text
    assert f"caplens user set-role {server.annotator[0]} researcher" in text
    page.get_by_role("tab", name="Annotate").click()
    # the Annotate tab holds the login form: its Account box says who, and the notice above it does not repeat it
    assert page.locator("#login-status textarea").input_value() == f"Logged in as {server.annotator[0]} (annotator)."
    assert "Logged in" not in notice(page, "annotate") and "Needs a login" not in notice(page, "annotate")
    log_in(page, *server.researcher)
    page.get_by_role("tab", name="Data").click()
    page.wait_for_function(
        f"() => document.querySelector('#data-login-notice')?.innerText.includes('Logged in as {server.researcher[0]}')")
    assert "Needs a login" not in notice(page, "data")
    assert page.dialogs == []


def test_a_wrong_password_is_a_message_and_one_log_line(page, server, caplog, capfd, artifacts, no_failed_logins):
    capfd.readouterr()
    caplog.clear()
    with caplog.at_level(logging.INFO):
        page.get_by_role("tab", name="Annotate").click()
        page.locator("#login-name textarea").fill(server.annotator[0])
        page.locator("#login-password input, #login-password textarea").first.fill("not-the-password")
        page.locator("#login-button").click()
        page.wait_for_function(
            "() => document.querySelector('#login-status textarea')?.value === 'Wrong user name or password.'")
        page.screenshot(path=str(artifacts / "wrong-password.png"), full_page=True)
    refused = [r for r in caplog.records if "login refused" in r.getMessage()]
    assert [r.getMessage() for r in refused] == [
        f"login refused: {server.annotator[0]!r} from 127.0.0.1: wrong user name or password"]
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    printed = capfd.readouterr()
    assert "Traceback" not in printed.err + printed.out
    assert "Needs a login" in notice(page, "annotate")  # still nobody logged in


def test_analyze_states_its_filters_and_both_ways_of_counting(page, server, artifacts):
    run_on_the_collection(page, server, "Analyze", "analyze", "with human ratings")
    filters = page.locator("#analyze-filters").inner_text()
    assert "one row per caption, human = the mean of its overall ratings" in filters
    assert "references and perturbed captions left out" in filters
    by_caption = cell_texts(page, "#analyze-correlations")
    page.locator("#analyze-per-rating input").check()
    page.locator("#analyze-button").click()
    page.wait_for_function(
        "() => document.querySelector('#analyze-status textarea')?.value.includes('overall ratings)')")
    page.wait_for_function(
        "() => document.querySelector('#analyze-filters')?.innerText.includes('each overall rating is one row')")
    by_rating = cell_texts(page, "#analyze-correlations")
    assert by_rating != by_caption  # two ratings per seeded caption: n doubles
    page.wait_for_timeout(1000)
    page.screenshot(path=str(artifacts / "analyze-filters.png"), full_page=True)
