"""Edit to repainted scores in a real browser: headless Chromium on `caplens serve`'s app.

The Score tab's first example is scored, then one caption cell is edited at a time. Live
scoring waits for the edits to stop (0.8 s, on purpose) and then presses the hidden live
button; this measures from that press to the first animation frame in which the pairs table
shows the edited caption's new scores, the part a faster server or transport can shorten.
The same is measured for the visible Score button, which presses the same hidden button at once.
The routes the page used are counted from its network log.

    python benchmarks/bench_browser_edit.py --profile world --edits 8
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"]
# In the page: the time of the last press of either score button (a listener on the document,
# since the page re-renders its buttons), and of the first frame showing `text` in the pairs table.
WATCH_PRESSES = """() => document.addEventListener('click', (event) => {
  if (event.target?.closest?.('#score-live-press, #score-button')) window.__pressedAt = performance.now();
}, true)"""
SHOWN = """(text) => {
  const shown = window.__pressedAt !== null && !!document.querySelector('#score-items')?.innerText.includes(text);
  if (shown && window.__shownAt === null) window.__shownAt = performance.now();
  return shown;
}"""


def press_to_repaint(page, text: str, press=None) -> float:
    """Milliseconds from a score button's press to the first frame showing `text` (polled every frame)."""
    page.evaluate("() => { window.__pressedAt = null; window.__shownAt = null; }")
    if press is not None:
        press()
    page.wait_for_function(SHOWN, arg=text, polling="raf", timeout=120_000)
    return page.evaluate("() => window.__shownAt - window.__pressedAt")


def edit_cell(page, row: int, text: str) -> None:
    page.locator(f"#score-rows [data-testid=cell-{row}-1]").dblclick()
    page.wait_for_function("() => ['INPUT', 'TEXTAREA'].includes(document.activeElement?.tagName)")
    page.keyboard.press("Control+a")
    page.keyboard.type(text, delay=5)
    page.keyboard.press("Enter")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="world")
    parser.add_argument("--edits", type=int, default=8)
    parser.add_argument("--metrics", choices=("embedding", "all"), default="embedding",
                        help="the profile's embedding metrics (the latency target's nine) or every metric")
    args = parser.parse_args()
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("CAPLENS_DATA_DIR", tempfile.mkdtemp(prefix="caplens-bench-browser-"))
    from playwright.sync_api import sync_playwright

    from app.serve import create_app, launch, launch_kwargs
    from scoring.api import metric_names

    demo, ctx = create_app(args.profile, seed_demo=False)
    from bench_latency import embedding_metrics, free_port

    wanted = embedding_metrics(args.profile) if args.metrics == "embedding" else None
    unticked = [name for name in metric_names(args.profile) if wanted is not None and name not in wanted]
    kwargs = launch_kwargs("127.0.0.1", free_port(), False)
    kwargs.update(prevent_thread_lock=True, quiet=True)
    launch(demo, kwargs)  # as `caplens serve` does: its queue, then the warm-up
    routes: list[str] = []
    live, clicked = [], []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("request", lambda request: routes.append(request.url.split("/gradio_api/")[-1].split("?")[0])
                    if "/gradio_api/" in request.url and request.method == "POST" else None)
            page.goto(demo.local_url)
            for name in unticked:
                page.locator("#score-metrics").get_by_label(name, exact=True).uncheck()
            page.locator("#score-examples button.gallery-item").first.click()
            page.wait_for_function(
                "() => document.querySelector('#score-status textarea')?.value.includes('Scored 6')", timeout=600_000)
            page.evaluate(WATCH_PRESSES)
            for run in range(args.edits + 1):  # the first round warms up the edited shapes
                text = f"a red ball against a blue wall, edit {run}"
                seconds = press_to_repaint(page, text, lambda: edit_cell(page, run % 6, text))
                if run:
                    live.append(seconds)
            page.locator("#score-live input").uncheck()
            for run in range(args.edits // 2 + 1):
                text = f"a green square under a yellow circle, edit {run}"
                edit_cell(page, run % 6, text)
                page.wait_for_timeout(300)
                seconds = press_to_repaint(page, text, lambda: page.locator("#score-button").click())
                if run:
                    clicked.append(seconds)
            browser.close()
    finally:
        demo.close()
    counted = {route: routes.count(route) for route in sorted(set(routes))}
    print(f"profile {ctx.profile}, metrics: {args.metrics} ({len(metric_names(args.profile)) - len(unticked)}); "
          "headless Chromium; press -> repainted pairs table, ms")
    print(f"live scoring (hidden button, direct POST): median {statistics.median(live):.0f}  "
          + ", ".join(f"{v:.0f}" for v in live))
    print(f"Score button (the same event, no debounce): median {statistics.median(clicked):.0f}  "
          + ", ".join(f"{v:.0f}" for v in clicked))
    print(f"POST routes the page used: {counted}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
