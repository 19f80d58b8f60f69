"""End to end in headless Debian Chromium through Playwright. Screenshots go to test-artifacts/."""
from __future__ import annotations

import os
import re
import shutil

import pytest

CHROMIUM = "/usr/bin/chromium"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium not installed (/usr/bin/chromium)"),
]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, server):
    """A fresh page on the app that records any JavaScript dialog (an XSS would open one)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.dialogs = []

    def on_dialog(dialog):
        page.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(server.url)
    page.wait_for_selector("#score-button")
    yield page
    context.close()


def cell_texts(page, selector: str) -> list[str]:
    return [(t or "").strip() for t in page.locator(f"{selector} [role=gridcell]").all_text_contents()]


def table_rows(page, selector: str) -> list[list[str]]:
    """The body cells of a Gradio Dataframe, row by row (Gradio 6 draws rows as virtual divs)."""
    return page.eval_on_selector_all(
        f"{selector} [role=row].virtual-row",
        "rows => rows.map(r => Array.from(r.querySelectorAll('[role=gridcell]')).map(c => c.innerText.trim()))")


def header_cells(page, selector: str) -> list[str]:
    return page.eval_on_selector_all(f"{selector} th[role=columnheader]", "ths => ths.map(t => t.title)")


# Words of a Dataframe's headers (and numbers of its cells) that the browser drew over more than
# one line: "pict ure", "lan g", "-0.95 5" (issue 25).
_BROKEN_WORDS_JS = r"""([selector, everyWord]) => { const broken = [];
  const spans = document.querySelectorAll(`${selector} th span.header, ${selector} [role=gridcell]`);
  for (const span of spans) {
    const header = span.matches('span.header');
    const walker = document.createTreeWalker(span, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.textContent.matchAll(/\S+/g)) {
        if (!header && !everyWord && !/^[-+]?\d[\d.,]*%?$/.test(m[0])) continue;  // cells: numbers only
        const range = document.createRange();
        range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) broken.push(m[0]); } } }
  return broken; }"""


def broken_words(page, selector: str, every_word: bool = False) -> list[str]:
    """Header words and cell numbers (with `every_word`, every cell word) of the Dataframe at
    `selector` that break over two lines."""
    return page.evaluate(_BROKEN_WORDS_JS, [selector, every_word])


def column_widths(page, selector: str) -> dict[str, float]:
    """Header title -> rendered width (px) of the Dataframe at `selector`."""
    return page.eval_on_selector_all(f"{selector} th[role=columnheader]",
                                     "ths => Object.fromEntries(ths.map(t => [t.title, t.getBoundingClientRect().width]))")


def column_widths_right(page, selector: str) -> dict[str, float]:
    """Header title -> the right edge (px) of its column in the Dataframe at `selector`."""
    return page.eval_on_selector_all(f"{selector} th[role=columnheader]",
                                     "ths => Object.fromEntries(ths.map(t => [t.title, t.getBoundingClientRect().right]))")


def plot_drawn(page, selector: str) -> None:
    """Wait until Plotly has drawn the chart at `selector` (its SVG is in the page): what a fixed
    second before a screenshot or a look at the chart waited for."""
    page.wait_for_function(f"() => !!document.querySelector({selector + ' .js-plotly-plot .main-svg'!r})")


def wait_for_status(page, text: str) -> str:
    page.wait_for_function(
        f"() => document.querySelector('#score-status textarea')?.value.includes({text!r})")
    return page.locator("#score-status textarea").input_value()


def test_on_a_phone_file_names_keep_their_words_and_the_upload_button_says_upload(page, artifacts, tmp_path):
    """At 390 px the rows table broke a file name inside its words ("phot/o"), and the file
    input's "upload more" button had Gradio's untranslated key `common.upload` as its tooltip."""
    from PIL import Image

    picture = tmp_path / "cat photo with a long name.png"
    Image.new("RGB", (48, 40), (200, 30, 30)).save(picture)
    page.set_viewport_size({"width": 390, "height": 844})
    page.locator("#score-live input").uncheck()
    page.locator("#score-images input[type=file]").set_input_files(str(picture))
    page.wait_for_function("() => [...document.querySelectorAll('#score-rows [role=gridcell]')]"
                           ".some(c => c.innerText.includes('long name'))")
    page.locator("#score-rows").scroll_into_view_if_needed()
    # Words up to 6 characters fit the image column (before: "photo" broke); longer ones may
    # break, as they must somewhere.
    assert [w for w in broken_words(page, "#score-rows", every_word=True) if len(w) <= 6] == []
    titles = page.eval_on_selector_all("#score-images button[title]", "bs => bs.map(b => b.title)")
    assert "Upload" in titles and not [t for t in titles if t.startswith("common.")], titles
    page.screenshot(path=str(artifacts / "score-rows-file-name-390px.png"), full_page=True)


def test_upload_then_scores_appear(page, image_file, artifacts, tmp_path):
    broken = tmp_path / "holiday.jpg"
    broken.write_bytes(b"this is a text file pretending to be a JPEG")
    blue = tmp_path / "blue.png"
    from PIL import Image

    Image.new("RGB", (48, 40), (30, 30, 200)).save(blue)
    page.locator("#score-live input").uncheck()  # this test scores with the button
    page.locator("#score-images input[type=file]").set_input_files([str(image_file), str(blue), str(broken)])
    page.wait_for_selector("#score-images td.filename[aria-label='holiday.jpg']")
    rows = tmp_path / "rows.csv"
    rows.write_text("image,candidate,references\n"
                    'red.png,a red square,"[""a red square""]"\n'
                    'blue.png,a blue square,"[""a blue square"", ""a square""]"\n'
                    "green.png,a green square,\n", encoding="utf-8")
    page.locator("#score-rows-file input[type=file]").set_input_files(str(rows))
    wait_for_status(page, "row(s) read into the table")
    for upload in ("#score-rows-file", "#score-images"):  # the upload and clear buttons cover no label word
        label, buttons = (page.locator(f"{upload} {part}").first.bounding_box()
                          for part in ("[data-testid=block-label]", ".icon-button-wrapper"))
        text_right = page.evaluate(f"""() => {{ const label = document.querySelector('{upload} [data-testid=block-label]');
            const range = document.createRange(); range.selectNodeContents(label);
            return Math.max(...[...range.getClientRects()].map(r => r.right)); }}""")
        assert text_right <= buttons["x"] + 1, (upload, text_right, buttons, label)
    assert [r[:2] for r in table_rows(page, "#score-rows")][:3] == [
        ["red.png", "a red square"], ["blue.png", "a blue square"], ["green.png", "a green square"]]
    page.locator("#score-button").click()
    status = wait_for_status(page, "Scored 2 image–caption pair(s)")
    assert "holiday.jpg: not an image" in status
    assert "row 3: no image named 'green.png'" in status
    assert [r[2:4] for r in table_rows(page, "#score-items")] == [["red.png", "a red square"],
                                                                 ["blue.png", "a blue square"]]
    headers = header_cells(page, "#score-table")
    assert headers[:4] == ["metric", "status", "#1", "#2"]  # the status (an icon) beside the name
    assert headers[-2:] == ["backbone", "status in words"]
    table = {r[0]: r for r in table_rows(page, "#score-table")}
    assert table["BLEU-1"][1] == "✓" and table["BLEU-1"][-1] == "available"
    assert table["BLEU-1"][2] == "1"  # red.png's own reference
    assert all(re.fullmatch(r"\d+(\.\d+)?", v) for v in table["CLIP-S"][2:4]), table["CLIP-S"]
    plot_drawn(page, "#score-chart")
    legend = page.locator("#score-chart .legendtext").all_text_contents()
    assert legend == ["#1 a red square", "#2 a blue square"]  # series named by their row and caption
    # No untranslated Gradio key in the page, read aloud ones included (the status region said
    # `common.complete` after every event).
    keys = page.evaluate("() => [...document.querySelectorAll('[role=status], [title], [aria-label]')]"
                         ".flatMap(e => [e.textContent, e.title, e.getAttribute('aria-label')])"
                         ".filter(t => t && /^common\\./.test(t.trim()))")
    assert keys == []
    page.screenshot(path=str(artifacts / "score-tab.png"), full_page=True)


def test_an_example_scores_in_one_click_and_edits_rescore_live(page, artifacts):
    page.locator("#score-examples button.gallery-item").first.click()
    status = wait_for_status(page, "Scored 6 image–caption pair(s)")
    assert "6 computed now" in status
    rows = table_rows(page, "#score-rows")
    assert rows[0][:2] == ["world-500000.png", "a small green circle"] and len(rows) == 6
    table = {r[0]: r for r in table_rows(page, "#score-table")}
    assert all(re.fullmatch(r"-?\d+(\.\d+)?", v) for v in table["CLIP-S"][2:8]), table["CLIP-S"]
    plot_drawn(page, "#score-chart")
    page.screenshot(path=str(artifacts / "score-example.png"), full_page=True)
    # Edit one candidate in the table: no button press, scored once the edits stop.
    edit_cell(page, "#score-rows [data-testid=cell-1-1]", "a small green square")
    status = wait_for_status(page, "1 computed now")
    assert "Scored 6 image–caption pair(s): 1 computed now, 5 unchanged ones reused." in status
    assert "a small green square" in [r[3] for r in table_rows(page, "#score-items")]
    page.screenshot(path=str(artifacts / "score-live-edit.png"), full_page=True)


def test_score_clicked_while_an_edit_is_scoring_waits_for_it_instead_of_an_error(page, artifacts, monkeypatch):
    """A click on Score while "Score as I edit" is scoring was refused with a red "You already
    have 1 scoring ... request(s) running" popup: now it runs once the live score has finished."""
    import threading
    import time

    import app.tabs.score as score_tab

    page.locator("#score-examples button.gallery-item").first.click()
    wait_for_status(page, "Scored 6 image–caption pair(s)")
    started, spans = threading.Event(), []
    real = score_tab.score_request

    def slow(*args, **kwargs):  # a scoring that takes long enough for a click to land inside it
        begun = time.monotonic()
        started.set()
        time.sleep(2.0)
        try:
            return real(*args, **kwargs)
        finally:
            spans.append((begun, time.monotonic()))

    monkeypatch.setattr(score_tab, "score_request", slow)
    edit_cell(page, "#score-rows [data-testid=cell-1-1]", "a small green square")
    assert started.wait(30), "the edit was not scored live"
    page.locator("#score-button").click()
    page.wait_for_function("() => document.querySelector('#score-status textarea')?.value.includes('6 unchanged')",
                           timeout=30_000)
    page.wait_for_timeout(500)
    page.screenshot(path=str(artifacts / "score-click-during-live.png"), full_page=True)
    errors = page.locator(".toast-body.error").all_text_contents()
    assert errors == [], errors
    assert len(spans) == 2 and spans[0][1] <= spans[1][0]  # the live score, then the click's, one after the other
    assert "a small green square" in [r[3] for r in table_rows(page, "#score-items")]


@pytest.mark.java
@pytest.mark.skipif(shutil.which("java") is None, reason="CIDEr-D needs a Java runtime (PTB tokenizer)")
def test_cider_says_why_one_image_gives_zero_and_takes_a_collection(page, server, artifacts):
    page.locator("#score-examples button.gallery-item").nth(1).click()
    wait_for_status(page, "Scored 5 image–caption pair(s)")
    # The example counts over every example's references; this batch alone (one image) gives 0.
    page.locator("#score-df-source").get_by_text("this batch", exact=True).click()
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('#score-table [role=gridcell]')).some(td => td.innerText.includes('not meaningful'))")
    cider = {r[0]: r for r in table_rows(page, "#score-table")}["CIDEr"]
    assert "not meaningful: document frequencies from the references of one image" in cider[-1]
    assert cider[1] == "⚠" and set(cider[2:7]) == {"0"}
    # The same words under the table, in view where the words column is not (a phone).
    notes = {line.split(":")[0]: line for line in page.locator("#score-notes").inner_text().splitlines()}
    assert "not meaningful: document frequencies from the references of one image" in notes["⚠ CIDEr"]
    page.screenshot(path=str(artifacts / "score-cider-one-image.png"), full_page=True)
    log_in(page, *server.researcher)
    page.get_by_role("tab", name="Score").click()
    page.locator("#score-df-source").get_by_text("a collection", exact=True).click()
    choose(page, "score-df-collection", server.collection)
    # Choosing the collection rescores live (its own message is replaced by the scoring's).
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('#score-table [role=gridcell]')).some(td => td.innerText.includes(\"collection 'app-test'\"))")
    page.screenshot(path=str(artifacts / "score-cider-collection.png"), full_page=True)


def test_perturb_highlights_spans_and_shows_changes(page, image_file, artifacts):
    page.get_by_role("tab", name="Perturbation lab").click()
    page.locator("#perturb-image input[type=file]").set_input_files(str(image_file))
    page.wait_for_selector("#perturb-image td.filename[aria-label='red.png']")
    page.locator("#perturb-caption textarea").fill("a man in a white shirt rides a brown horse on the beach")
    page.locator("#perturb-button").click()
    page.wait_for_function(
        "() => document.querySelectorAll('#perturb-table td').length > 0", timeout=TIMEOUT_MS)
    # Five operations, each with at least one highlighted (changed) span (the boxes appear with the run).
    page.wait_for_selector("#perturb-slot-4 [class*=hl]", timeout=TIMEOUT_MS)
    for slot in range(5):
        highlighted = page.locator(f"#perturb-slot-{slot} .textspan.hl, #perturb-slot-{slot} [class*=hl]")
        assert highlighted.count() >= 1, f"no highlighted span in slot {slot}"
    table = page.locator("#perturb-table").inner_text()
    assert re.search(r"\([+-]\d+\.\d+%\)", table), table
    status = page.locator("#perturb-status textarea").input_value()
    assert status.startswith("5 perturbation(s) of a caption in en; "), status  # a run says what it did
    # Headers on one line: "Robustness" no longer breaks into "Robust / ness".
    heights = page.eval_on_selector_all(
        "#perturb-table th[role=columnheader]", "ths => ths.map(t => [t.title, t.getBoundingClientRect().height])")
    assert {"Robustness", "Substitution", "Original"} <= {title for title, _ in heights}, heights
    assert max(h for _, h in heights) < 1.5 * min(h for _, h in heights), heights
    # At 1280 px the five operations overflow the table: each metric's status icon still shows
    # beside its name (a trial found the status words cut off at the right edge), its words on hover.
    page.set_viewport_size({"width": 1280, "height": 800})
    page.wait_for_timeout(300)
    box = page.locator("#perturb-table").bounding_box()
    icons = page.locator("#perturb-table [role=row] span[title]")
    assert icons.count() >= 2, page.locator("#perturb-table").inner_text()
    for k in range(icons.count()):
        icon = icons.nth(k).bounding_box()
        assert box["x"] <= icon["x"] and icon["x"] + icon["width"] <= box["x"] + box["width"], (icon, box)
    page.locator("#perturb-table").screenshot(path=str(artifacts / "perturbation-lab-table-1280.png"))
    page.set_viewport_size({"width": 1400, "height": 1000})
    plot_drawn(page, "#perturb-chart")
    page.screenshot(path=str(artifacts / "perturbation-lab.png"), full_page=True)


def test_login_rate_and_rating_is_in_the_database(page, server, artifacts):
    from annotation.people.accounts import get_user
    from annotation.database import database_session
    from annotation.studies.tasks import list_ratings

    page.get_by_role("tab", name="Annotate").click()
    page.locator("#login-name textarea").fill(server.annotator[0])
    page.locator("#login-password input, #login-password textarea").first.fill(server.annotator[1])
    page.locator("#login-button").click()
    page.wait_for_function(
        "() => document.querySelector('#login-status textarea')?.value.startsWith('Logged in')")
    page.wait_for_function("() => Number(document.querySelector('#rate-caption-id input')?.value) > 0")
    caption_id = int(page.locator("#rate-caption-id input").input_value())
    # Keyboard only: "8" sets overall to 0.8 (focus outside text fields), Alt+N saves and moves on,
    # pressed at once as a fast annotator would (the save must not race the slider's own event).
    page.locator("#rate-panel").get_by_text("Rate how well").click()
    page.keyboard.press("8")
    page.keyboard.press("Alt+n")
    page.wait_for_function("() => /saved/i.test("
                           "document.querySelector('#rate-status textarea')?.value || '')")
    assert "Saved rating" in page.locator("#rate-status textarea").input_value()
    page.screenshot(path=str(artifacts / "annotate-rate.png"), full_page=True)
    with database_session() as session:
        user = get_user(session, server.annotator[0])
        ratings = {r.caption_id: r.overall for r in list_ratings(session, user, annotator=user)}
    assert ratings.get(caption_id) == pytest.approx(0.8)


def test_script_in_a_caption_is_shown_as_text_and_never_runs(page, server, image_file, artifacts):
    xss = server.xss
    page.locator("#score-images input[type=file]").set_input_files(str(image_file))
    page.wait_for_selector("#score-images td.filename[aria-label='red.png']")
    page.locator("#score-live input").uncheck()
    edit_cell(page, "#score-rows [data-testid=cell-0-1]", xss)
    page.locator("#score-button").click()
    page.wait_for_function(
        "() => document.querySelector('#score-status textarea')?.value.includes('Scored')")
    assert xss in cell_texts(page, "#score-items")
    page.get_by_role("tab", name="Perturbation lab").click()
    page.locator("#perturb-caption textarea").fill(xss + " on a table")
    page.locator("#perturb-button").click()
    page.wait_for_function("() => document.querySelectorAll('#perturb-table td').length > 0")
    assert "onerror" in page.locator("#perturb-original textarea").input_value()
    page.wait_for_timeout(500)
    page.screenshot(path=str(artifacts / "xss-as-text.png"), full_page=True)
    assert page.locator("img[src='x']").count() == 0
    assert page.dialogs == []


def edit_cell(page, cell: str, text: str) -> None:
    """Type `text` into a table cell, replacing its value: waits for the cell's editor to have
    the focus first (keys typed before that were lost, e.g. the '<' of '<img ...')."""
    page.locator(cell).dblclick()
    page.wait_for_function("() => ['INPUT', 'TEXTAREA'].includes(document.activeElement?.tagName)")
    page.keyboard.press("Control+a")
    page.keyboard.type(text)
    page.keyboard.press("Enter")


def open_tab(page, name: str) -> None:
    """Click a tab; on a narrow screen Gradio moves the tabs that do not fit into a "..." menu."""
    tab = page.get_by_role("tab", name=name, exact=True)
    if not tab.is_visible():
        page.locator(".overflow-menu button").first.click()
        tab = page.locator(".overflow-dropdown button", has_text=name)
    tab.click()


def log_in(page, name: str, password: str) -> None:
    open_tab(page, "Annotate")
    if page.locator("#logout-button").is_visible():  # the form folds away while logged in (issue 24)
        page.locator("#logout-button").click()
        page.locator("#login-name textarea").wait_for()
    page.locator("#login-name textarea").fill(name)
    page.locator("#login-password input, #login-password textarea").first.fill(password)
    page.locator("#login-button").click()
    page.wait_for_function(
        "() => document.querySelector('#login-status textarea')?.value.startsWith('Logged in')")


def choose(page, elem_id: str, value: str) -> None:
    box = page.locator(f"#{elem_id} input")
    box.fill(value)
    box.press("Enter")


def run_on_the_collection(page, server, tab: str, prefix: str, done_text: str) -> None:
    """Log in as the researcher, open `tab`, choose the seeded collection and run."""
    log_in(page, *server.researcher)
    page.get_by_role("tab", name=tab).click()
    choose(page, f"{prefix}-collection", server.collection)
    page.locator(f"#{prefix}-button").click()
    page.wait_for_function(
        f"() => document.querySelector('#{prefix}-status textarea')?.value.includes('{done_text}')")


def test_failure_case_opens_in_the_score_tab(page, server, artifacts, monkeypatch):
    run_on_the_collection(page, server, "Failure cases", "failures", "cases")
    page.screenshot(path=str(artifacts / "failure-cases.png"), full_page=True)
    page.locator("#failures-table").scroll_into_view_if_needed()  # the table renders rows in view only
    headers = header_cells(page, "#failures-table")
    # The deciding columns come first, so they are in view without scrolling sideways.
    assert headers[:5] == ["metric", "lang", "metric score", "human", "rank gap"], headers
    assert "change %" not in headers  # no disagreement has one: an empty column was shown
    assert column_widths(page, "#failures-table")["candidate"] >= 250  # widths follow the columns shown
    for width in (1400, 390):
        page.set_viewport_size({"width": width, "height": 1000 if width > 400 else 844})
        page.locator("#failures-table").scroll_into_view_if_needed()
        box = page.locator("#failures-table").bounding_box()
        visible = page.eval_on_selector_all(
            "#failures-table th[role=columnheader]",
            f"ths => ths.filter(t => t.getBoundingClientRect().right <= {box['x'] + box['width'] + 1}).map(t => t.title)")
        assert {"metric", "lang", "metric score", "human", "rank gap"} <= set(visible), (width, visible)
        assert broken_words(page, "#failures-table") == [], width
        page.screenshot(path=str(artifacts / f"failure-cases-{width}px.png"), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 1000})
    rows = table_rows(page, "#failures-table")
    metrics_of = {}
    for row in rows:
        metrics_of.setdefault(row[headers.index("caption_id")], []).append(row[0])
    assert rows and all(len(m) == 1 for m in metrics_of.values()), metrics_of  # "(any)": each caption once
    # Filtering by a metric: the rows and the status line follow (it kept the count of all cases).
    everything = page.locator("#failures-status textarea").input_value()
    chosen = rows[0][0]
    choose(page, "failures-metric", chosen)
    page.wait_for_function("() => document.querySelector('#failures-status textarea')?.value.includes('with metric')")
    status = page.locator("#failures-status textarea").input_value()
    matching, total, shown = map(int, re.fullmatch(
        rf"(\d+) case\(s\) with metric {re.escape(chosen)}, of (\d+) cases over all metrics; showing the first (\d+)\.",
        status).groups())
    assert everything.endswith(f"each once with its worst metric, of {total} cases over all metrics; showing the first "
                               f"{min(len(metrics_of), 200)}.")
    assert 0 < shown == min(matching, 200) and matching <= total
    assert {row[0] for row in table_rows(page, "#failures-table")} == {chosen}
    choose(page, "failures-metric", "(any)")
    page.wait_for_function(f"() => document.querySelector('#failures-status textarea')?.value === {everything!r}")
    first_caption = page.locator("#failures-table [role=gridcell], #failures-table [role=cell]").nth(
        headers.index("candidate"))
    text = (first_caption.text_content() or "").strip()
    import app.tabs.failures as failures_tab
    import app.tabs.score as score_tab

    counted = []  # each count of a collection's document frequencies, by either tab

    def counting(account, name, count=failures_tab.collection_document_frequency):
        counted.append(name)
        return count(account, name)

    for module in (failures_tab, score_tab):
        monkeypatch.setattr(module, "collection_document_frequency", counting)
    first_caption.click()
    page.wait_for_function(
        "() => document.querySelector('#score-status textarea')?.value.includes('Scored')")
    assert page.get_by_role("tab", name="Score").get_attribute("aria-selected") == "true"
    assert [r[1] for r in table_rows(page, "#score-rows")] == [text]
    # CIDEr-D's document frequencies come from the case's collection, as the case's value did
    assert page.locator("#score-df-source input[value='a collection']").is_checked()
    assert page.locator("#score-df-collection input").input_value() == server.collection
    page.wait_for_function("() => (document.querySelector('#score-table')?.innerText || '')"
                           f".includes(\"document frequencies from collection '{server.collection}'\")")
    page.wait_for_timeout(1500)  # the Score tab's own source events, had they counted again
    assert counted == [server.collection]  # counted once, by the opening, not again by the Score tab
    page.wait_for_function("() => document.querySelectorAll('#score-items [role=gridcell]').length > 0")
    image_cell = table_rows(page, "#score-items")[0][2]  # a stored image: its hash name shortened
    assert len(image_cell) <= 28 and "…" in image_cell, image_cell
    # … and its picture, in the rows table and in the scored pairs (issue 25: not only a hash name).
    for table in ("#score-rows", "#score-items"):
        page.wait_for_function(f"() => document.querySelector('{table} [role=row].virtual-row img')?.naturalWidth > 0")
    assert page.dialogs == []
    plot_drawn(page, "#score-chart")
    page.screenshot(path=str(artifacts / "failure-opened-in-score.png"), full_page=True)


def test_perturbation_cases_keep_the_change_and_the_operation_in_view_on_a_phone(page, server, artifacts):
    """The perturbation view has no human rating: its change % and operation come right after
    the metric and language, inside the table's edge at 390 px (they were past it)."""
    log_in(page, *server.researcher)
    page.get_by_role("tab", name="Failure cases").click()
    choose(page, "failures-collection", server.collection)
    page.get_by_text("perturbation barely moved the metric").click()
    page.locator("#failures-button").click()
    page.wait_for_function("() => document.querySelector('#failures-status textarea')?.value.includes('cases')")
    page.set_viewport_size({"width": 390, "height": 844})
    page.locator("#failures-table").scroll_into_view_if_needed()
    box = page.locator("#failures-table").bounding_box()
    visible = page.eval_on_selector_all(
        "#failures-table th[role=columnheader]",
        f"ths => ths.filter(t => t.getBoundingClientRect().right <= {box['x'] + box['width'] + 1}).map(t => t.title)")
    assert {"metric", "lang", "change %", "op"} <= set(visible), visible
    widths = column_widths(page, "#failures-table")
    assert widths["candidate"] >= 250 and widths["op"] < 120, widths
    assert any(row[3] for row in table_rows(page, "#failures-table")), "no operation shown"
    page.screenshot(path=str(artifacts / "failure-cases-perturbation-390px.png"), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 1000})


def test_analyze_tab_shows_correlations(page, server, artifacts):
    run_on_the_collection(page, server, "Analyze", "analyze", "with human ratings")
    table = page.locator("#analyze-correlations").inner_text()
    assert "CLIP-S" in table and "[" in table
    page.wait_for_timeout(1000)
    page.screenshot(path=str(artifacts / "analyze-tab.png"), full_page=True)
    assert page.dialogs == []


def test_a_researcher_reproduces_a_benchmark_kept_on_the_server(page, server, artifacts, tmp_path):
    """The Analyze tab's offer of `caplens analyze reproduce`: FOIL files in the server's
    benchmark folder appear in the list after login, and Reproduce shows ours beside the paper."""
    from annotation.scores.server_benchmarks import benchmark_folder
    from scoring.world.benchmark import write_world_benchmark

    write_world_benchmark(tmp_path / "made", scenes=2, annotators=3, size=48)
    shutil.rmtree(benchmark_folder() / "foil", ignore_errors=True)
    shutil.copytree(tmp_path / "made" / "foil", benchmark_folder() / "foil")
    log_in(page, *server.researcher)
    page.get_by_role("tab", name="Analyze").click()
    page.locator("#reproduce-section").get_by_text("Reproduce a published benchmark").click()
    page.locator("#reproduce-refresh").click()
    page.wait_for_function("() => document.querySelector('#reproduce-benchmark input')?.value === 'foil'")
    page.locator("#reproduce-button").click()
    page.wait_for_function(
        "() => document.querySelector('#reproduce-status textarea')?.value.includes('foil: 1 items scored')")
    rows = table_rows(page, "#reproduce-table")
    assert {(r[0], r[2]) for r in rows} >= {("foil", "foil_1ref"), ("foil", "foil_4ref")}
    assert str(benchmark_folder()) not in page.locator("#reproduce-status textarea").input_value()
    page.screenshot(path=str(artifacts / "analyze-reproduce.png"), full_page=True)


def test_perturbations_saved_from_the_lab_are_in_the_collection(page, server, image_file, artifacts):
    from annotation.people.acting import acting
    from annotation.people.auth_sessions import log_in as library_log_in
    from annotation.captions import get_caption
    from annotation.studies.tasks import critical_objects

    log_in(page, *server.researcher)
    page.get_by_role("tab", name="Perturbation lab").click()
    page.locator("#perturb-image input[type=file]").set_input_files(str(image_file))
    page.wait_for_selector("#perturb-image td.filename[aria-label='red.png']")
    page.locator("#perturb-caption textarea").fill("a man in a white shirt rides a brown horse")
    page.locator("#perturb-critical textarea").fill("white shirt; brown horse")
    page.locator("#perturb-button").click()
    page.wait_for_function("() => document.querySelectorAll('#perturb-table td').length > 0")
    page.get_by_text("Save into a collection").click()
    # The accordion mounts its contents as it opens: fill only once it has, and blur so the
    # value reaches the server before the click (CI once saved under the default name).
    page.locator("#perturb-save-button").wait_for(state="visible")
    collection_box = page.locator("#perturb-save-collection textarea")
    collection_box.fill("browser-lab")
    collection_box.press("Tab")
    page.wait_for_function(
        "() => document.querySelector('#perturb-save-collection textarea')?.value === 'browser-lab'")
    page.locator("#perturb-save-button").click()
    page.wait_for_function(
        "() => document.querySelector('#perturb-save-status textarea')?.value.startsWith('Saved caption')")
    message = page.locator("#perturb-save-status textarea").input_value()
    page.screenshot(path=str(artifacts / "perturbation-lab-saved.png"), full_page=True)
    match = re.fullmatch(r"Saved caption (\d+) and (\d) perturbed caption\(s\) into browser-lab, "
                         r"with 2 critical object\(s\)\.", message)
    assert match, message
    with acting(library_log_in(*server.researcher, None).account.id) as (session, _):
        parent = get_caption(session, int(match.group(1)))
        assert parent.text == "a man in a white shirt rides a brown horse"
        assert critical_objects(session, parent.id) == ["white shirt", "brown horse"]
        children = [c for c in parent.image.captions if c.parent_id == parent.id]
        assert len(children) == int(match.group(2)) >= 4


# -- Train tab: a tiny real training job runs to the end, shows before/after, registers a
# new metric version, and is found again after a reload.
JOB_TIMEOUT_MS = 180_000


def status_js(text: str) -> str:
    return f"() => document.querySelector('#train-status textarea')?.value.includes({text!r})"


@pytest.fixture
def user_registry_restored():
    """The job registers a metric version in the suite's data directory: take it out again,
    so later tests see the profiles' own metric lists."""
    from scoring.user_registry import user_registry_path

    path = user_registry_path()
    saved = path.read_text(encoding="utf-8") if path.exists() else None
    yield
    if saved is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(saved, encoding="utf-8")


def test_tiny_job_runs_to_the_end_and_a_reload_finds_it(page, server, artifacts, user_registry_restored):
    from scoring.api import metric_names
    from scoring.tiny import ensure_tiny_checkpoints

    ensure_tiny_checkpoints()  # the tiny preset starts from the tiny CLIP
    log_in(page, *server.researcher)
    page.get_by_role("tab", name="Train").click()
    choose(page, "train-recipe", "specs")
    page.wait_for_function("() => document.querySelector('#train-summary textarea')?.value.startsWith('SPECS')")
    choose(page, "train-preset", "specs-tiny")
    before_run = metric_names("tiny")
    # Before any job: no Cancel to press and no empty loss axes.
    assert not page.locator("#train-cancel").is_visible() and not page.locator("#train-loss").is_visible()
    assert page.locator("#train-progress").inner_text() == "No job shown: start one, or click one of your jobs."
    page.locator("#train-start").click()
    # A tiny preset is a smoke run: it stays in the researcher's scratch space …
    page.wait_for_function(status_js("kept in your scratch space"), timeout=JOB_TIMEOUT_MS)
    assert metric_names("tiny") == before_run
    table = page.locator("#train-result").inner_text()
    assert "before" in table and "after" in table and "R@1" in table, table
    assert "higher ↑" in table and "top 1" in table and "nan" not in table.lower(), table
    # … until they register it on purpose.
    page.locator("#train-register").click()
    page.wait_for_function(status_js("registered as SPECS@"), timeout=JOB_TIMEOUT_MS)
    status = page.locator("#train-status textarea").input_value()
    name = status.split("registered as ")[1].split()[0]
    assert name in metric_names("tiny")
    page.wait_for_selector("#train-register", state="hidden")
    assert "100 %" in page.locator("#train-progress").inner_text()
    assert "step 6/6" in page.locator("#train-log textarea").input_value()
    assert "done" in page.locator("#train-jobs").inner_text() and name in page.locator("#train-jobs").inner_text()
    plot_drawn(page, "#train-loss")
    assert page.locator("#train-loss .js-plotly-plot").count() == 1
    assert not page.locator("#train-cancel").is_visible()  # the job has ended
    assert broken_words(page, "#train-result") == []
    box = page.locator("#train-result").bounding_box()  # every column in view at 1,400 px (it scrolled)
    right = max(column_widths_right(page, "#train-result").values())
    assert right <= box["x"] + box["width"] + 1, (right, box)
    page.screenshot(path=str(artifacts / "train-tab.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.locator("#train-result").scroll_into_view_if_needed()
    assert broken_words(page, "#train-result") == []  # it scrolls sideways instead ("b e f o r e")
    page.screenshot(path=str(artifacts / "train-tab-390px.png"), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 1000})

    # The Score tab's metric list offers the new version at once …
    page.get_by_role("tab", name="Score").click()
    page.locator("label", has_text=name).first.wait_for()
    job = status.split()[1]
    page.reload()
    page.wait_for_selector("#score-button")
    # … and after a reload.
    page.locator("label", has_text=name).first.wait_for()
    log_in(page, *server.researcher)
    page.get_by_role("tab", name="Train").click()
    page.wait_for_function(status_js(f"Job {job} "))
    assert "R@1" in page.locator("#train-result").inner_text()
    jobs_listed = page.locator("#train-jobs").inner_text()
    assert job in jobs_listed and name in jobs_listed


def test_annotators_may_not_train(page, server):
    from annotation.training.training_jobs import runner

    jobs_before = len(runner().jobs())
    log_in(page, *server.annotator)
    page.get_by_role("tab", name="Train").click()
    page.locator("#train-start").click()
    page.wait_for_function(status_js("may not do this"))
    status = page.locator("#train-status textarea").input_value()
    assert f"{server.annotator[0]} (annotator) may not do this: needs role researcher or admin" in status, status
    assert "Traceback" not in status
    assert len(runner().jobs()) == jobs_before  # refused server-side: no job was started


def test_transcreate_and_critical_objects_load_their_first_item_when_opened(page, server, artifacts):
    from sqlalchemy import select

    from annotation.captions import get_collection, in_collection as of_collection
    from annotation.database import database_session
    from db.models import Caption

    from sqlalchemy import func

    from annotation.people.accounts import get_user
    from annotation.studies.tasks import DEFAULT_RATINGS_PER_ITEM
    from db.models import Rating

    rated = set(server.caption_ids.values())
    with database_session() as session:
        in_collection = set(session.scalars(
            select(Caption.id).where(of_collection(get_collection(session, server.collection)))).all())
        # Blind overlap: transcreation (which shows the mean score) offers only captions this
        # annotator has rated or that have all k ratings.
        mine = set(session.scalars(select(Rating.caption_id).where(
            Rating.annotator_id == get_user(session, server.annotator[0]).id)))
        complete = set(session.scalars(select(Rating.caption_id).group_by(Rating.caption_id).having(
            func.count(Rating.id) >= DEFAULT_RATINGS_PER_ITEM)))
    assert rated and rated <= in_collection
    transcreatable = rated & (mine | complete)
    log_in(page, *server.annotator)
    page.wait_for_function("() => Number(document.querySelector('#rate-caption-id input')?.value) > 0")
    for tab, prefix in (("Transcreate", "transcreate"), ("Critical objects", "critical")):
        page.get_by_role("tab", name=tab, exact=True).click()
        # No "Load next" press: opening the sub-tab shows an item (or says why there is none).
        page.wait_for_function(
            f"() => Number(document.querySelector('#{prefix}-caption-id input')?.value) > 0"
            f" || (document.querySelector('#{prefix}-status textarea')?.value || '').length > 0")
        caption_id = page.locator(f"#{prefix}-caption-id input").input_value()
        status = page.locator(f"#{prefix}-status textarea").input_value()
        # ann has transcreated and marked nothing in the seeded collection, so each queue has an
        # item for them: one of the three rated captions (transcreate), a caption of the
        # collection (critical objects); no message, so neither "Nothing left" nor an error.
        if prefix == "transcreate" and not transcreatable:
            assert status.startswith("Nothing left to transcreate"), (tab, caption_id, status)
            continue
        offered = transcreatable if prefix == "transcreate" else in_collection
        assert caption_id and int(float(caption_id)) in offered and status == "", (tab, caption_id, status)
        page.screenshot(path=str(artifacts / f"annotate-{prefix}-opened.png"), full_page=True)


def test_lab_example_without_an_image_says_what_is_missing_and_why_cider_is_zero(page, artifacts):
    page.get_by_role("tab", name="Perturbation lab").click()
    page.locator("#perturb-examples").get_by_text("PR-MCS Figure 5").click()
    page.wait_for_function("() => document.querySelectorAll('#perturb-table td').length > 0")
    page.wait_for_function("() => document.querySelector('#perturb-status textarea')?.value.includes('needs an image')")
    assert "CLIP-S" in page.locator("#perturb-status textarea").input_value()
    page.locator("#perturb-table").scroll_into_view_if_needed()
    rows = {r[0]: r for r in table_rows(page, "#perturb-table") if r}
    assert rows["CLIP-S"][-1] == "available (needs an image for these rows)", rows["CLIP-S"]
    assert "not meaningful" in rows["CIDEr"][-1], rows["CIDEr"]
    page.screenshot(path=str(artifacts / "perturbation-lab-no-image.png"), full_page=True)


@pytest.mark.parametrize("width", [900, 380])
def test_long_metric_names_stay_clear_of_the_chart_legend(browser, tmp_path, artifacts, width):
    """Trained versions register as "CapLens-R@world-2026-12-01": the legend, placed at a share of
    the plot's height, ran through such names. Every tick label ends above every legend entry."""
    import pandas as pd

    from app.render import scores_bar_chart

    metrics = ["CLIP-S", "RefCLIP-S", "PAC-S", "MCS", "PR-MCS", "SPECS", "UMIC", "CapLens-R", "BLEU-4",
               "CIDEr", "UMIC-C@world-2026-12-01-2", "CapLens-R@world-2026-12-01"]
    frame = pd.DataFrame([{"#": k + 1, "image": "a.png", "caption": f"caption number {k} of a long list",
                           **{m: 0.1 * (k + 1) for m in metrics}} for k in range(5)])
    html = tmp_path / "chart.html"
    scores_bar_chart(frame, metrics, "Scores by metric").write_html(str(html), include_plotlyjs=True)
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(html.as_uri())
    page.wait_for_selector(".legendtext")
    ticks = page.eval_on_selector_all(".xtick text", "ts => ts.map(t => t.getBoundingClientRect().bottom)")
    legend = page.eval_on_selector_all(".legend .traces", "ts => ts.map(t => t.getBoundingClientRect().top)")
    page.screenshot(path=str(artifacts / f"chart-long-names-{width}.png"), full_page=True)
    page.close()
    assert len(ticks) == len(metrics) and len(legend) == 5
    assert max(ticks) < min(legend), (max(ticks), min(legend))
