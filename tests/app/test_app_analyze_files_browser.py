"""Analyze from files in a real browser: upload, run, the table and the status line."""
from __future__ import annotations

import json
import os

import pytest

from tests.app.test_app_analyze_files import flickr8k_upload, pascal_files  # noqa: F401 - fixtures

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


@pytest.fixture
def page(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(server.url)
            page.get_by_role("tab", name="Analyze").click()
            page.locator("#analyze-files").get_by_text("Analyze from files").first.click()
            yield page
        finally:
            browser.close()


def wait_for_status(page, name: str, text: str) -> str:
    page.wait_for_function(
        f"() => document.querySelector('#files-{name}-status textarea')?.value.includes({json.dumps(text)})")
    return page.locator(f"#files-{name}-status textarea").input_value()


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium not installed")
def test_browser_pascal50s_upload_shows_the_table(page, pascal_files, artifacts):
    page.get_by_role("tab", name="Pascal-50S").click()
    page.locator("#files-pascal50s-upload input[type=file]").set_input_files(pascal_files)
    page.wait_for_selector("#files-pascal50s-upload td.filename[aria-label='consensus_pascal.mat']")
    page.locator("#files-pascal50s-button").click()
    wait_for_status(page, "pascal50s", "3 pairs")
    table = page.locator("#files-pascal50s-table").inner_text()
    assert "BLEU-1" in table and "HC" in table and "MM" in table
    page.screenshot(path=str(artifacts / "analyze-from-files.png"), full_page=True)


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium not installed")
def test_browser_correlation_upload_without_images_says_which_metrics_scored_nothing(page, flickr8k_upload,
                                                                                       artifacts):
    path, _ = flickr8k_upload
    page.locator("#files-correlation-upload input[type=file]").set_input_files(str(path))
    page.wait_for_selector("#files-correlation-upload td.filename[aria-label='flickr8k.json']")
    page.locator("#files-correlation-button").click()
    status = wait_for_status(page, "correlation", "rated captions")
    assert status == "5 rated captions of flickr8k-expert. No scores for CLIP-S (image metrics need the images)."
    table = page.locator("#files-correlation-table").inner_text()
    assert "Flickr8k-Expert" in table and "BLEU-4" in table and "kendall_c" in table
    page.wait_for_timeout(1000)  # let Plotly draw the heat map before the screenshot
    page.screenshot(path=str(artifacts / "analyze-correlation-from-files.png"), full_page=True)


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium not installed")
def test_browser_the_notice_links_to_analyze_from_files_below_the_collection_tools(page):
    """Logged out, "Analyze from files" sat about 2,000 px below the collection tools, named only
    in the notice's text: the notice now links to it."""
    page.evaluate("() => window.scrollTo(0, 0)")
    assert page.locator("#analyze-files").bounding_box()["y"] > 1000  # below the first screen
    page.locator("#analyze-login-notice").get_by_role("link", name="Analyze from files").click()
    page.wait_for_function("() => { const r = document.querySelector('#analyze-files').getBoundingClientRect(); "
                           "return r.top >= -5 && r.top < window.innerHeight / 2; }")
