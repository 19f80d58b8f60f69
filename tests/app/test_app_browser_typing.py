"""Score as I edit never loses a keystroke: typing at 30 ms per key across the cells of the rows
table while the automatic score of the previous edit runs and returns (issue 25: the table
redrew and kept "a red" of "a red ball against blue")."""
from __future__ import annotations

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.app.test_app_browser import CHROMIUM, TIMEOUT_MS, browser, page, table_rows  # noqa: F401 - fixtures

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not __import__("os").path.exists(CHROMIUM), reason="Debian chromium not installed"),
]
KEY_DELAY_MS = 30
RUNS = 6  # each of the example's six rows once (ten took 61 s of a suite at its 20-minute budget)


def editor_open(cell: str = "") -> str:
    """JavaScript: a cell's editor has the focus (in the rows table cell `cell`, e.g. "cell-2-1")."""
    inside = f" && !!document.activeElement.closest('[data-testid={cell}]')" if cell else ""
    return f"() => ['INPUT', 'TEXTAREA'].includes(document.activeElement?.tagName){inside}"


def test_typing_at_30_ms_per_key_across_cells_keeps_every_character(page, artifacts):
    page.locator("#score-examples button.gallery-item").first.click()
    page.wait_for_function(  # a cold first score of every metric: slow on a busy 2-core machine
        "() => document.querySelector('#score-status textarea')?.value.includes('Scored 6')", timeout=240_000)
    lost, keyboard_missed = [], []
    for run in range(RUNS):
        row = run % 6
        candidate, references = f"a red ball against blue number {run}", f"a blue wall behind a red ball {run}"
        page.locator(f"#score-rows [data-testid=cell-{row}-1]").dblclick()
        page.wait_for_function(editor_open())
        page.keyboard.press("Control+a")
        page.keyboard.type(candidate, delay=KEY_DELAY_MS)
        page.keyboard.press("Enter")  # commits the cell: the live score starts 0.8 s later …
        page.keyboard.press("ArrowRight")
        page.keyboard.press("Enter")  # … while the next cell is being typed into
        editing = editor_open(f"cell-{row}-2")
        try:
            page.wait_for_function(editing, timeout=5_000)
        except PlaywrightTimeout:  # on a loaded machine the grid can miss a hop made right after Enter; a person clicks
            keyboard_missed.append(run)
            page.locator(f"#score-rows [data-testid=cell-{row}-2]").dblclick()
            page.wait_for_function(editing)
        page.keyboard.press("Control+a")
        page.keyboard.type(references, delay=KEY_DELAY_MS)
        page.keyboard.press("Enter")
        page.wait_for_function(  # the score of this run's edits has come back
            f"() => document.querySelector('#score-items')?.innerText.includes({candidate!r})", timeout=TIMEOUT_MS)
        page.wait_for_timeout(500)
        # A clicked cell also holds its menu button (⋮) in the text read back: not typed text.
        cells = [c.removesuffix("⋮").rstrip("\n") for c in table_rows(page, "#score-rows")[row]]
        if cells[1:3] != [candidate, references]:
            lost.append((run, cells[1:3]))
    page.screenshot(path=str(artifacts / "score-typing.png"), full_page=True)
    assert lost == [], (lost, f"keyboard hop to the next cell missed in runs {keyboard_missed}")


GAPS_S = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75)


def test_a_cell_opened_just_before_the_live_score_keeps_what_is_typed(page):
    """The new-user trial's case: Enter commits a cell, and 0.5-0.75 s later (just before the
    0.8 s live score would start) a double click opens the next cell, then typing starts. The
    open editor (not only a key) holds the score back, so its answer cannot cut the cell."""
    page.locator("#score-examples button.gallery-item").first.click()
    page.wait_for_function(
        "() => document.querySelector('#score-status textarea')?.value.includes('Scored 6')", timeout=240_000)
    lost, reopened = [], []
    for run, gap in enumerate(GAPS_S):
        first, second = run % 6, (run + 1) % 6
        text_a, text_b = f"a green cross number {run}", f"a purple diamond above a red triangle {run}"
        page.locator(f"#score-rows [data-testid=cell-{first}-1]").dblclick()
        page.wait_for_function(editor_open())
        page.keyboard.press("Control+a")
        page.keyboard.type(text_a, delay=KEY_DELAY_MS)
        page.keyboard.press("Enter")
        page.wait_for_timeout(int(gap * 1000))
        cell = page.locator(f"#score-rows [data-testid=cell-{second}-1]")
        cell.dblclick()
        # A person types once the editor shows (on a loaded machine later than 150 ms), and double
        # clicks again when it did not open: a CI run saw none open in 60 s, the double click
        # lost while the page was busy. The claim is about text once typed.
        opened = editor_open(f"cell-{second}-1")
        try:
            page.wait_for_function(opened, timeout=5_000)
        except PlaywrightTimeout:
            reopened.append(gap)
            cell.dblclick()
            page.wait_for_function(opened)
        page.wait_for_timeout(150)
        page.keyboard.press("Control+a")
        page.keyboard.type(text_b, delay=KEY_DELAY_MS)
        page.keyboard.press("Enter")
        page.wait_for_function(
            f"() => document.querySelector('#score-items')?.innerText.includes({text_b!r})", timeout=TIMEOUT_MS)
        page.wait_for_timeout(500)
        cells = [row[1].removesuffix("⋮").rstrip("\n") for row in table_rows(page, "#score-rows")]
        if cells[first] != text_a or cells[second] != text_b:
            lost.append((gap, cells[first], cells[second]))
    assert lost == [], (lost, f"double clicked again after gaps {reopened}")
