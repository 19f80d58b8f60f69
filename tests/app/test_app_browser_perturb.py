"""The Perturbation lab in headless Chromium: the paper's p per operation and the examples a
visitor runs in one click. Screenshots go to test-artifacts/."""
from __future__ import annotations

import re

import pytest

from tests.app.test_app_browser import CHROMIUM, TIMEOUT_MS, browser, cell_texts, page, plot_drawn  # noqa: F401 - fixtures

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not __import__("os").path.exists(CHROMIUM), reason="Debian chromium not installed"),
]


def slider_value(page) -> float:
    return float(page.locator("#perturb-p input[type=number]").input_value())


def test_an_example_runs_the_lab_with_the_operations_own_p(page, artifacts):
    page.get_by_role("tab", name="Perturbation lab").click()
    # All five at once: each operation takes its own default, the slider is not used.
    assert page.locator("#perturb-p input[type=number]").is_disabled()
    assert not page.locator("#perturb-slot-0").is_visible()  # no empty box before a run
    page.get_by_text("world scene, de, removal").click()
    # The example fills in a German world scene and runs: removal with p = 0.6, shown on the slider.
    page.wait_for_function("() => document.querySelectorAll('#perturb-table td').length > 0", timeout=TIMEOUT_MS)
    page.wait_for_function("() => document.querySelector('#perturb-p input[type=number]')?.value === '0.6'")
    assert slider_value(page) == pytest.approx(0.6)
    assert "Dreieck" in page.locator("#perturb-caption textarea").input_value()
    assert page.locator("#perturb-image td.filename").count() == 1  # the scene's image, no upload needed
    table = page.locator("#perturb-table").inner_text()
    assert "Removal" in table and "CLIP-S" in table and "BLEU-1" in table
    assert re.search(r"\d\.\d{4} \([+-]\d+\.\d{2}%\)", table), table  # a score with its change
    # Each caveat in words under the table (German captions for English-only CLIP-S).
    notes = page.locator("#perturb-notes").inner_text().splitlines()  # metrics with the same words share a line
    assert [line for line in notes if line.startswith("⚠ ") and "CLIP-S" in line.split(":")[0]
            and "made for en" in line], notes
    # The removed words are shown struck through in their places, not as bare marks.
    slot = page.locator("#perturb-slot-0").inner_text()
    caption = page.locator("#perturb-caption textarea").input_value()
    assert "⌫" not in slot and "\u0336" in slot, slot
    assert all(word in slot.replace("\u0336", "") for word in caption.split()), (slot, caption)
    plot_drawn(page, "#perturb-chart")
    page.screenshot(path=str(artifacts / "perturbation-lab-example.png"), full_page=True)
    page.locator("#perturb-slot-0").screenshot(path=str(artifacts / "perturbation-lab-removal.png"))


def test_unticking_the_paper_p_lets_the_user_set_one(page):
    page.get_by_role("tab", name="Perturbation lab").click()
    page.get_by_text("PR-MCS Figure 5, en, substitution").click()
    page.wait_for_function("() => document.querySelectorAll('#perturb-table td').length > 0", timeout=TIMEOUT_MS)
    # Figure 5's critical objects swapped places (the slot shows the substituted caption).
    assert "substitution" in page.locator("#perturb-slot-0").inner_text()
    assert slider_value(page) == pytest.approx(0.4)  # substitution takes no p: the slider keeps its value
    page.locator("#perturb-paper-p input[type=checkbox]").uncheck()
    page.wait_for_function("() => !document.querySelector('#perturb-p input[type=number]')?.disabled")
    assert not page.locator("#perturb-p input[type=number]").is_disabled()
