"""Score tab: every metric for rows of (image, candidate, references), as tables and a chart.

Each image has its own candidates and references: an editable table, filled by hand, from an
uploaded rows file (CSV, JSONL, Parquet, COCO; `scoring.session_scoring.rows_from_files`), from
a collection or from the examples. Scoring is `scoring.session_scoring.score_request`, which
remembers the session's scored pairs, so editing one caption sends only that caption to the
scorer. It runs on the Score button and, while "Score as I edit" is on, 0.8 s after the last
edit (a debounce in the browser that presses the button).
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr

from annotation.errors import user_message
from annotation.lab import collection_document_frequency, collection_frequencies_label, collection_images
from app import engine, render
from app.langs import language_choices
from app.session import account_id, collection_dropdown, follow_login, private_copies
from app.uploads import LoadedImage, UploadError, load_upload
from scoring.language_id import AUTO
from scoring.session_scoring import BATCH, EXAMPLES, ScoreRequest, ScoreRow, example_document_frequencies, \
    row_thumbnails, rows_from_files, score_request, table_records, table_rows
from scoring.world.demo import score_examples

COLLECTION = "a collection"
DEBOUNCE_MS = 800
# Runs in the browser on an edit: unless live scoring is off, score once the edits stop (through
# the hidden live button, whose event skips the queue: one HTTP request, docs/app.md).
# The press waits while the rows table is in use: a key or a click in it in the last DEBOUNCE_MS,
# or a cell's editor open (opened by a double click, nothing typed yet): the score's answer
# redraws the page around the table, which cut the cell being typed into.
LIVE_JS = f"""() => {{
  if (!window.__caplensKeys) {{
    window.__caplensKeys = true;
    for (const kind of ['keydown', 'pointerdown']) {{
      document.addEventListener(kind, (event) => {{
        if (event.target?.closest?.('#score-rows')) window.__caplensLastKey = Date.now();
      }}, true);
    }}
  }}
  const live = document.querySelector('#score-live input');
  if (live && !live.checked) return;
  clearTimeout(window.__caplensScoreTimer);
  const editing = () => {{
    const active = document.activeElement;
    return ['INPUT', 'TEXTAREA'].includes(active?.tagName) && !!active.closest('#score-rows [data-testid^=cell-]');
  }};
  const press = () => {{
    const quiet = Date.now() - (window.__caplensLastKey || 0);
    if (editing()) {{
      window.__caplensScoreTimer = setTimeout(press, {DEBOUNCE_MS});
      return;
    }}
    if (quiet < {DEBOUNCE_MS}) {{
      window.__caplensScoreTimer = setTimeout(press, {DEBOUNCE_MS} - quiet);
      return;
    }}
    document.querySelector('#score-live-press')?.click();
  }};
  window.__caplensScoreTimer = setTimeout(press, {DEBOUNCE_MS});
}}"""

# The Score button presses the same hidden live button, at once: one event, whose
# trigger_mode "always_last" holds a press made while an edit is scoring until that score is
# back. As its own queued event, such a click was a second heavy request from the client,
# refused with a red error popup (app.access).
SCORE_NOW_JS = """() => {
  clearTimeout(window.__caplensScoreTimer);
  document.querySelector('#score-live-press')?.click();
}"""

# A rows file dropped on the rows table goes to the rows upload below it. Gradio's own drop
# import refuses a table with a read-only column (the pictures) with "Cannot import into a
# table with read-only columns", so the drop is taken before Gradio sees it.
ROWS_DROP_JS = """() => {
  if (window.__caplensRowsDrop) return;
  window.__caplensRowsDrop = true;
  const onRows = (event) => !!event.target?.closest?.('#score-rows')
    && Array.from(event.dataTransfer?.types || []).includes('Files');
  document.addEventListener('dragover', (event) => {
    if (onRows(event)) { event.preventDefault(); event.stopPropagation(); }
  }, true);
  document.addEventListener('drop', (event) => {
    if (!onRows(event)) return;
    event.preventDefault();
    event.stopPropagation();
    const input = document.querySelector('#score-rows-file input[type=file]');
    if (!input) return;
    const files = new DataTransfer();
    for (const file of event.dataTransfer.files) files.items.add(file);
    input.files = files.files;
    input.dispatchEvent(new Event('change', { bubbles: true }));
  }, true);
}"""

EXAMPLE_DIR = Path(tempfile.gettempdir()) / "caplens-score-examples"


def load_images(paths: list[str] | None) -> tuple[list[LoadedImage], list[str]]:
    """Decode uploads; bad ones become messages and are left out."""
    images, messages = [], []
    for path in paths or []:
        try:
            loaded = load_upload(path)
        except UploadError as exc:
            messages.append(user_message(exc))
            continue
        messages.extend(f"{loaded.name}: {note}" for note in loaded.notes)
        images.append(loaded)
    return images, messages


ROW_HEADERS = ["image", "candidate", "references (separate with |)", render.PICTURE]


def with_pictures(records, paths: list[str] | None, images: list[LoadedImage] | None = None) -> list[list[str]]:
    """The rows table's cells (image, candidate, references) with each row's picture after them,
    from the images at `paths` (`scoring.session_scoring.row_thumbnails`), or from `images` when
    the caller has decoded them already."""
    if hasattr(records, "values"):  # the table's own value (a DataFrame)
        records = records.values.tolist()
    cells = [[("" if c is None or c != c else str(c)) for c in list(r)[:3]] for r in records or []]
    cells = [row + [""] * (3 - len(row)) for row in cells]
    if images is None:
        images, _ = load_images(paths)
    return [row + [render.picture_cell(picture)] for row, picture in zip(cells, row_thumbnails(cells, images))]


def split_lines(text: str | None) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


@dataclass
class ScoreTab:
    files: gr.File
    rows: gr.Dataframe
    lang: gr.Dropdown
    metrics: gr.CheckboxGroup
    button: gr.Button
    status: gr.Textbox
    items: gr.Dataframe
    table: gr.Dataframe
    chart: gr.Plot
    cache: gr.State
    df_source: gr.Radio  # where CIDEr-D's document frequencies come from …
    df_collection: gr.Dropdown  # … which collection, when one …
    df_state: gr.State  # … and those frequencies
    score_fn: object = None  # the click handler, so other tabs can chain a scoring run
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)


def build(ctx: engine.AppContext, user_state: gr.State) -> ScoreTab:
    names = engine.metric_names(ctx.profile)
    # Made first and placed below, so that the examples can sit at the top of the tab.
    files = gr.File(label="Images (one or more)", file_count="multiple", elem_id="score-images", render=False)
    # The picture is the last column, drawn from the images (not editable), so the cells typed
    # into keep their places.
    rows = gr.Dataframe(
        value=[["", "", "", ""]], headers=ROW_HEADERS, datatype=["str", "str", "str", "html"], column_count=4,
        static_columns=[3], interactive=True, wrap=True, column_widths=["17%", "26%", "29%", "28%"],  # each header word fits (app.ui.PAGE_CSS: at 390 px too)
        label="Rows: image file name (empty: every image), candidate, references for this row",
        elem_id="score-rows", render=False,
    )
    # The examples: a gr.Dataset with the layout of gr.Examples, whose click runs through the
    # queue like every handler of the page (gr.Examples loads through /gradio_api/run, which
    # `app.access` refuses), then scores.
    examples = score_examples(EXAMPLE_DIR)
    example_frequencies = {}  # counted (with Java) on the first example's click, then kept

    def examples_df():
        if "df" not in example_frequencies:
            example_frequencies["df"] = example_document_frequencies([example["rows"] for example in examples])
        return example_frequencies["df"]

    shown = gr.Dataset(
        components=[files, rows], samples=[[example["images"], example["rows"]] for example in examples],
        sample_labels=[example["label"] for example in examples], type="index",
        label="Examples: world images with captions (one click scores them, no upload needed)",
        elem_id="score-examples",
    )
    # Inputs on the left, results on the right. On a phone the columns stack, and the page CSS
    # (app.ui.PAGE_CSS) puts the results right after the rows table and the Score button, before
    # the other inputs, so that they start within the second screen.
    with gr.Row(elem_id="score-main"):
        with gr.Column(scale=1, elem_id="score-inputs"):
            with gr.Column(elem_id="score-inputs-top"):
                files.render()
                rows.render()
                with gr.Row():
                    button = gr.Button("Score", variant="primary", elem_id="score-button", scale=2)
                    live_press = gr.Button("Score (live)", visible="hidden", elem_id="score-live-press")
                    gr.Checkbox(value=True, label="Score as I edit", elem_id="score-live", scale=1,
                                interactive=True)
            with gr.Column(elem_id="score-options"):
                rows_file = gr.File(
                    label="…or upload rows: CSV or JSONL (image, candidate, references), Parquet, or COCO results + "
                          "captions JSON", file_count="multiple", file_types=[".csv", ".jsonl", ".ndjson", ".parquet",
                                                                           ".json"], elem_id="score-rows-file")
                with gr.Accordion("…or pick an image from a collection (researcher login, Annotate tab)", open=False):
                    pick_collection = gr.Dropdown([], label="Collection", allow_custom_value=True,
                                                  elem_id="score-pick-collection")
                    pick_image = gr.Dropdown([], label="Image", elem_id="score-pick-image")
                    pick_button = gr.Button("Use this image and its captions")
                    pick_status = gr.Textbox(label="", show_label=False, interactive=False)
                    picked = gr.State({})
                lang = gr.Dropdown(language_choices(), value=AUTO, label="Language")
                metrics = gr.CheckboxGroup(names, value=names, label="Metrics", elem_id="score-metrics")
                df_source = gr.Radio([BATCH, EXAMPLES, COLLECTION], value=BATCH, elem_id="score-df-source",
                                     label="CIDEr document frequencies from",
                                     info="From one image every IDF is 0. An example counts them over every example "
                                          "image's references; a collection's references give a wider count.")
                df_collection = gr.Dropdown([], label="Collection for the document frequencies (researcher login)",
                                            allow_custom_value=True, visible=False, elem_id="score-df-collection")
                df_state = gr.State(None)
        with gr.Column(scale=2, elem_id="score-results"):
            status = gr.Textbox(label="Messages", interactive=False, lines=2, elem_id="score-status")
            table = gr.Dataframe(render.empty_table(render.METRIC_ROW_COLUMNS),
                                 label="Scores: one row per metric (its status as an icon; the reasons are listed "
                                       "under the table), one column per pair",
                                 datatype=render.metric_table_datatypes(render.METRIC_ROW_COLUMNS),
                                 interactive=False, wrap=True, pinned_columns=2, column_widths=["104px", "72px"],
                                 elem_id="score-table")
            # The reasons behind ⚠ and ✗ in words under the table: the table's own words column is
            # its last, off-screen on a phone, and a tooltip needs a mouse.
            notes = gr.Markdown("", elem_id="score-notes")
            chart = gr.Plot(label="Scores by metric", elem_id="score-chart")
            # Fixed widths: left to itself the table gave "truncated by" 32 px, its header one
            # letter a line (a 247 px header row), and pushed lang past the box's edge.
            items = gr.Dataframe(render.empty_table(render.PAIR_COLUMNS), label="Scored pairs", interactive=False,
                                 datatype=render.PAIR_DATATYPES, wrap=True, elem_id="score-items",
                                 column_widths=["44px", "76px", "140px", "340px", "56px", "112px"])
    cache = gr.State({})

    def no_scores(messages, state):
        """The message, and the result panels emptied: scores of earlier rows must not stay on
        screen beside rows that no longer hold them."""
        return ("\n".join(messages), render.empty_table(render.PAIR_COLUMNS),
                gr.Dataframe(render.empty_table(render.METRIC_ROW_COLUMNS),
                             datatype=render.metric_table_datatypes(render.METRIC_ROW_COLUMNS)), "", None, state)

    def on_score(paths, table_value, lang_choice, chosen, source, frequencies, state, file_read):
        images, messages = load_images(paths)
        score_rows = table_rows(table_value)
        if file_read and file_read["problems"] and file_read["candidates"] == [r.candidate for r in score_rows]:
            # The table still holds the rows file as read: say which of its rows it left out.
            messages.insert(0, "Left out of the rows file: " + "; ".join(file_read["problems"]) + ".")
        if not score_rows:
            messages.append("Enter at least one candidate in the rows table (or upload rows, or click an example).")
            return no_scores(messages, state)
        if not chosen:
            messages.append("Choose at least one metric.")
            return no_scores(messages, state)
        if paths and not images and any(not row.image for row in score_rows):
            messages.append("No usable image: only text metrics can score the rows without an image name.")
        if source == COLLECTION and frequencies is None:
            messages.append("No collection's document frequencies yet (choose one after logging in): CIDEr uses "
                            "this batch.")
        if source == EXAMPLES:
            frequencies = examples_df()
        request = ScoreRequest(images, score_rows, lang_choice, list(chosen),
                               frequencies if source in (COLLECTION, EXAMPLES) else None)
        try:
            outcome = score_request(engine.AppScorer(ctx.profile), request, state)
        except (ValueError, LookupError, OSError) as exc:  # the scorer's "bad input" signals
            messages.append(f"Could not score: {user_message(exc)}")
            return no_scores(messages, state)
        messages.extend(outcome.messages)
        reused = len(outcome.frame) - outcome.scored_now
        messages.append(f"Scored {len(outcome.frame)} image–caption pair(s): {outcome.scored_now} computed now"
                        + (f", {reused} unchanged ones reused." if reused else "."))
        chart_figure = render.scores_bar_chart(outcome.frame, outcome.metric_columns,
                                               "Scores by metric", outcome.ranges)
        pairs, per_metric = render.score_tables(outcome.frame, outcome.metric_columns, outcome.availability,
                                                outcome.thumbnails)
        per_metric = gr.Dataframe(per_metric, datatype=render.metric_table_datatypes(per_metric.columns))
        return "\n".join(messages), pairs, per_metric, render.status_notes(outcome.availability), chart_figure, state

    file_read = gr.State(None)  # the last rows file's candidates and the rows it left out
    inputs = [files, rows, lang, metrics, df_source, df_state, cache, file_read]
    outputs = [status, items, table, notes, chart, cache]
    # Scoring, for live edits and the Score button alike, is one direct HTTP request beside the
    # queue (app.access still bounds it per client and in total): the scores come back without
    # the queue's join and event stream.
    live_press.click(on_score, inputs, outputs, api_visibility="private", trigger_mode="always_last", queue=False)
    button.click(None, None, None, js=SCORE_NOW_JS)
    # Live scoring: every edit restarts a short timer in the browser; when it runs out the
    # hidden live button is pressed (not on blur, and not once per keystroke).
    for event in (rows.input, lang.input, metrics.input, df_source.input, files.upload, files.clear):
        event(None, None, None, js=LIVE_JS)

    def on_rows_file(paths, image_paths):
        """The rows read (and True), or the reason none were (and False: then no live score
        follows, whose "enter at least one candidate" would replace the reason)."""
        if not paths:
            return gr.skip(), "", False, gr.skip()
        try:
            records, problems = rows_from_files(paths)
        except (ValueError, OSError) as exc:
            return gr.skip(), f"Could not read the rows: {user_message(exc)}", False, gr.skip()
        if not records:
            return gr.skip(), "\n".join(problems + ["No usable row in the file."]), False, gr.skip()
        note = [f"{len(records)} row(s) read into the table; upload their images above if they have any."]
        read = {"candidates": [r.candidate for r in table_rows(records)], "problems": problems}
        return with_pictures(records, image_paths), "\n".join(problems + note), True, read

    rows_read = gr.Checkbox(False, visible=False)
    rows_file.upload(on_rows_file, [rows_file, files], [rows, status, rows_read, file_read],
                     api_visibility="private").then(None, rows_read, None, js=f"(read) => {{ if (read) ({LIVE_JS})(); }}")

    def on_images(paths, table_value, source):
        """New images: each row shows its picture; an empty table gets one row per image to type
        its candidate into. Own images count CIDEr-D's document frequencies as chosen, not the
        examples'."""
        if not paths:
            return gr.skip(), gr.skip()
        source = BATCH if source == EXAMPLES else gr.skip()
        images, _ = load_images(paths)  # decoded once for both the rows and their pictures
        if not table_rows(table_value):  # a row per image that decodes (a bad file's message comes with the score)
            readable = [[image.name, "", ""] for image in images]
            return (with_pictures(readable, paths, images) if readable else gr.skip()), source
        return with_pictures(table_value, paths, images), source

    files.upload(on_images, [files, rows, df_source], [rows, df_source], api_visibility="private")

    def on_df_source(source):
        return gr.Dropdown(visible=source == COLLECTION)

    def on_df_collection(name, source, counted, request: gr.Request):
        """The chosen collection's document frequencies (and True), counted only while a collection
        is the source: a login fills in the first collection, which costs nothing until chosen.
        Frequencies already counted for it (a failure case opened here brings them) are kept."""
        if source != COLLECTION or not name:
            return None, gr.skip(), False
        if counted is not None and counted.label == collection_frequencies_label(name):
            return gr.skip(), gr.skip(), False
        try:
            frequencies = collection_document_frequency(account_id(request), name)
        except (PermissionError, ValueError, LookupError) as exc:
            return None, user_message(exc), False
        return frequencies, (f"CIDEr document frequencies from {frequencies.label}: "
                             f"{frequencies.frequencies.reference_sets} reference sets."), True

    df_counted = gr.Checkbox(False, visible=False)
    df_source.change(on_df_source, df_source, df_collection, api_visibility="private")
    for event in (df_source.change, df_collection.change):
        event(on_df_collection, [df_collection, df_source, df_state], [df_state, status, df_counted],
              api_visibility="private").then(None, df_counted, None, js=f"(counted) => {{ if (counted) ({LIVE_JS})(); }}")
    follow_login(user_state, collection_dropdown, [], [df_collection])

    def on_collection(name, request: gr.Request):
        if not name:  # none chosen, or the list emptied by a logout: no images of the last one's
            return gr.Dropdown(choices=[], value=None), {}, ""
        try:
            found = collection_images(account_id(request), name)
        except (PermissionError, ValueError, LookupError) as exc:
            return gr.Dropdown(choices=[], value=None), {}, user_message(exc)
        choices = [(f"{entry['name']} ({len(entry['captions'])} captions)", sha) for sha, entry in found.items()]
        return gr.Dropdown(choices=choices, value=choices[0][1] if choices else None), found, f"{len(found)} images."

    def on_pick(found, sha, request: gr.Request):
        entry = (found or {}).get(sha)
        if not entry:
            return (gr.skip(),) * 3 + ("Choose a collection and an image.",)
        try:
            image = private_copies(request, [entry["file"]])
        except PermissionError as exc:
            return (gr.skip(),) * 3 + (user_message(exc),)
        records = table_records([ScoreRow("", caption, list(entry["references"])) for caption in entry["captions"]])
        return image, with_pictures(records, image), entry["language"], ""

    follow_login(user_state, collection_dropdown, [], [pick_collection])
    pick_collection.change(on_collection, pick_collection, [pick_image, picked, pick_status],
                           api_visibility="private")
    pick_button.click(on_pick, [picked, pick_image], [files, rows, lang, pick_status],
                      api_visibility="private").then(on_score, inputs, outputs, api_visibility="private")

    def on_example(index):
        """The example's images and rows, and CIDEr-D's document frequencies from every
        example's references (one example of one image would give every IDF 0)."""
        example = examples[int(index)]
        return example["images"], with_pictures(example["rows"], example["images"]), EXAMPLES

    shown.click(on_example, shown, [files, rows, df_source], api_visibility="private").then(
        on_score, inputs, outputs, api_visibility="private")
    return ScoreTab(files, rows, lang, metrics, button, status, items, table, chart, cache, df_source, df_collection,
                    df_state, on_score, inputs, outputs)
