"""Score tab: every metric for uploaded images × captions, as a table and a bar chart.

Scoring is `scoring.session_scoring.score_request`, which remembers the session's scored
pairs, so editing one caption sends only that caption to the scorer.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import gradio as gr

from annotation.errors import user_message
from annotation.lab import collection_images
from app import engine, render
from app.langs import language_choices
from app.session import account_id, collection_dropdown, private_copies
from app.uploads import LoadedImage, UploadError, load_upload
from scoring.language_id import AUTO
from scoring.session_scoring import ScoreRequest, score_request


def split_lines(text: str | None) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


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


@dataclass
class ScoreTab:
    files: gr.File
    captions: gr.Textbox
    references: gr.Textbox
    lang: gr.Dropdown
    metrics: gr.CheckboxGroup
    button: gr.Button
    status: gr.Textbox
    items: gr.Dataframe
    table: gr.Dataframe
    chart: gr.Plot
    cache: gr.State
    score_fn: object = None  # the click handler, so other tabs can chain a scoring run
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)


def build(ctx: engine.AppContext, user_state: gr.State) -> ScoreTab:
    names = engine.metric_names(ctx.profile)
    with gr.Row():
        with gr.Column(scale=1):
            files = gr.File(label="Images (one or more)", file_count="multiple", elem_id="score-images")
            with gr.Accordion("…or pick an image from a collection (researcher login, Annotate tab)", open=False):
                pick_collection = gr.Dropdown([], label="Collection", allow_custom_value=True,
                                              elem_id="score-pick-collection")
                pick_image = gr.Dropdown([], label="Image", elem_id="score-pick-image")
                pick_button = gr.Button("Use this image and its captions")
                pick_status = gr.Textbox(label="", show_label=False, interactive=False)
                picked = gr.State({})
            captions = gr.Textbox(
                label="Captions, one per line (any language)", lines=5, elem_id="score-captions",
                placeholder="a dog runs across the grass\nein Hund läuft über die Wiese",
            )
            references = gr.Textbox(label="References, one per line (optional)", lines=3, elem_id="score-references")
            lang = gr.Dropdown(language_choices(), value=AUTO, label="Language")
            metrics = gr.CheckboxGroup(names, value=names, label="Metrics")
            button = gr.Button("Score", variant="primary", elem_id="score-button")
        with gr.Column(scale=2):
            status = gr.Textbox(label="Messages", interactive=False, lines=2, elem_id="score-status")
            items = gr.Dataframe(label="Scored pairs", interactive=False, wrap=True, elem_id="score-items")
            table = gr.Dataframe(label="Scores: one row per metric, one column per pair", interactive=False,
                                 wrap=True, elem_id="score-table")
            chart = gr.Plot(label="Scores by metric")
    cache = gr.State({})

    def on_score(paths, captions_text, references_text, lang_choice, chosen, state):
        images, messages = load_images(paths)
        caption_list = split_lines(captions_text)
        if not caption_list:
            messages.append("Enter at least one caption (one per line).")
            return "\n".join(messages), gr.skip(), gr.skip(), gr.skip(), state
        if not chosen:
            messages.append("Choose at least one metric.")
            return "\n".join(messages), gr.skip(), gr.skip(), gr.skip(), state
        if paths and not images:
            messages.append("No usable image: only text metrics can score.")
        request = ScoreRequest(images, caption_list, split_lines(references_text), lang_choice, list(chosen))
        try:
            outcome = score_request(engine.AppScorer(ctx.profile), request, state)
        except (ValueError, LookupError, OSError) as exc:  # the scorer's "bad input" signals
            messages.append(f"Could not score: {user_message(exc)}")
            return "\n".join(messages), gr.skip(), gr.skip(), gr.skip(), state
        reused = len(outcome.frame) - outcome.scored_now
        refs = len(request.references)
        messages.append(f"Scored {len(outcome.frame)} image–caption pair(s) with {refs} reference(s): "
                        f"{outcome.scored_now} computed now" + (f", {reused} unchanged ones reused." if reused else "."))
        chart_figure = render.scores_bar_chart(outcome.frame, outcome.metric_columns, "Scores by metric")
        pairs, per_metric = render.score_tables(outcome.frame, outcome.metric_columns, outcome.availability)
        return "\n".join(messages), pairs, per_metric, chart_figure, state

    inputs = [files, captions, references, lang, metrics, cache]
    outputs = [status, items, table, chart, cache]
    button.click(on_score, inputs, outputs, api_visibility="private")
    # Leaving the caption box after an edit re-scores; only the changed captions are new.
    captions.blur(on_score, inputs, outputs, api_visibility="private", trigger_mode="always_last")

    def on_collection(name, request: gr.Request):
        if not name:
            return gr.skip(), {}, ""
        try:
            found = collection_images(account_id(request), name)
        except (PermissionError, ValueError, LookupError) as exc:
            return gr.Dropdown(choices=[], value=None), {}, user_message(exc)
        choices = [(f"{entry['name']} ({len(entry['captions'])} captions)", sha) for sha, entry in found.items()]
        return gr.Dropdown(choices=choices, value=choices[0][1] if choices else None), found, f"{len(found)} images."

    def on_pick(found, sha, request: gr.Request):
        entry = (found or {}).get(sha)
        if not entry:
            return (gr.skip(),) * 4 + ("Choose a collection and an image.",)
        try:
            image = private_copies(request, [entry["file"]])
        except PermissionError as exc:
            return (gr.skip(),) * 4 + (user_message(exc),)
        return image, "\n".join(entry["captions"]), "\n".join(entry["references"]), entry["language"], ""

    user_state.change(collection_dropdown, None, pick_collection, api_visibility="private")
    pick_collection.change(on_collection, pick_collection, [pick_image, picked, pick_status],
                           api_visibility="private")
    pick_button.click(on_pick, [picked, pick_image], [files, captions, references, lang, pick_status],
                      api_visibility="private")
    return ScoreTab(files, captions, references, lang, metrics, button, status, items, table, chart, cache,
                    on_score, inputs, outputs)
