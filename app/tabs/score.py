"""Score tab: every metric for uploaded images × captions, as a table and a bar chart.

Results are remembered per session keyed by (image hash, caption, references, language),
so editing one caption sends only that caption to the scorer; the scorer's own embedding
cache then encodes only its text.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import gradio as gr
import pandas as pd

from app import engine, render
from app.langs import AUTO, language_choices, resolve_language
from app.uploads import LoadedImage, UploadError, load_upload

MAX_CACHED_ROWS = 2000


@dataclass
class ScoreRequest:
    """One scoring request as the UI and the API receive it."""

    images: list[LoadedImage]
    captions: list[str]
    references: list[str]
    lang: str = AUTO
    metrics: list[str] | None = None


@dataclass
class ScoreOutcome:
    frame: pd.DataFrame
    metric_columns: list[str]
    availability: list[dict]
    messages: list[str] = field(default_factory=list)
    scored_now: int = 0


def split_lines(text: str | None) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def load_images(paths: list[str] | None) -> tuple[list[LoadedImage], list[str]]:
    """Decode uploads; bad ones become messages and are left out."""
    images, messages = [], []
    for path in paths or []:
        try:
            loaded = load_upload(path)
        except UploadError as exc:
            messages.append(str(exc))
            continue
        messages.extend(f"{loaded.name}: {note}" for note in loaded.notes)
        images.append(loaded)
    return images, messages


def _image_key(image: LoadedImage | None) -> str:
    return "" if image is None else hashlib.sha256(image.data).hexdigest()


def run_scoring(profile: str, request: ScoreRequest, cache: dict | None = None) -> ScoreOutcome:
    """Score every image × caption pair, reusing `cache` for pairs already scored."""
    from scoring.api import ScoreItem

    cache = cache if cache is not None else {}
    names = request.metrics or engine.metric_names(profile)
    meta: dict[str, dict] = cache.setdefault("_metrics", {})
    rows_cache: dict = cache.setdefault("_rows", {})
    images: list[LoadedImage | None] = list(request.images) or [None]
    refs = tuple(request.references)

    pairs = []
    for image in images:
        for caption in request.captions:
            lang = resolve_language(request.lang, caption)
            pairs.append((image, caption, lang, (_image_key(image), caption, refs, lang)))

    pending = [(img, cap, lang, key) for img, cap, lang, key in pairs
               if not set(names) <= set(rows_cache.get(key, {}))]
    # Each key once, and each missing metric scored for it.
    unique: dict = {}
    for img, cap, lang, key in pending:
        unique.setdefault(key, (img, cap, lang))
    if unique:
        items = [
            ScoreItem(
                image=None if img is None else img.image,
                candidate=cap,
                references=list(refs),
                lang=lang,
                image_id=None if img is None else img.name,
            )
            for img, cap, lang in unique.values()
        ]
        results = engine.score_items(profile, items, names)
        for position, key in enumerate(unique):
            row = rows_cache.setdefault(key, {})
            for name, result in results.items():
                row[name] = (result.values[position], bool(result.truncated[position]) if result.truncated else False)
        for name, result in results.items():
            meta[name] = {"backbone": result.backbone, "unavailable": result.unavailable}
        if len(rows_cache) > MAX_CACHED_ROWS:
            for stale in list(rows_cache)[: len(rows_cache) - MAX_CACHED_ROWS]:
                del rows_cache[stale]

    table_rows = []
    for number, (image, caption, lang, key) in enumerate(pairs, start=1):
        scored = rows_cache.get(key, {})
        row = {"#": number, "image": "" if image is None else image.name, "caption": caption, "lang": lang}
        for name in names:
            value, _ = scored.get(name, (None, False))
            row[name] = render.format_score(value)
        row["truncated by"] = ", ".join(n for n in names if scored.get(n, (None, False))[1])
        table_rows.append(row)
    frame = pd.DataFrame(table_rows, columns=["#", "image", "caption", "lang", *names, "truncated by"])

    availability = []
    for name in names:
        info = meta.get(name, {})
        reason = info.get("unavailable")
        status = f"unavailable: {reason}" if reason else "available"
        if not reason and all(rows_cache.get(k, {}).get(name, (None,))[0] is None for *_, k in pairs):
            status = "available (needs " + ("references" if not refs else "an image") + " for these rows)"
        availability.append({"metric": name, "backbone": info.get("backbone", ""), "status": status})
    return ScoreOutcome(frame=frame, metric_columns=names, availability=availability, scored_now=len(unique))


def outcome_to_json(outcome: ScoreOutcome) -> dict:
    """The API's answer: rows with every metric, plus each metric's availability."""
    records = outcome.frame.astype(object).where(outcome.frame.notna(), None).to_dict(orient="records")
    return {
        "rows": records,
        "computed_now": outcome.scored_now,
        "metrics": {a["metric"]: {"backbone": a["backbone"], "status": a["status"]} for a in outcome.availability},
        "messages": outcome.messages,
    }


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


def collection_images(user_state: dict | None, collection_name: str) -> dict[str, dict]:
    """Images of a stored collection with their candidate captions and references, by sha256
    (researcher or admin: the library checks)."""
    from annotation.captions import get_collection
    from annotation.exporters import captions_table

    from app.tabs.annotate import _db, acting_user

    with _db() as session:
        rows = captions_table(session, acting_user(session, user_state), get_collection(session, collection_name))
    images: dict[str, dict] = {}
    for row in rows:
        entry = images.setdefault(row["image_sha256"], {
            "file": row["image_file"], "name": row["image_filename"] or row["image_sha256"][:12],
            "captions": [], "references": list(row["references"]), "languages": set()})
        if row["kind"] == "candidate":
            entry["captions"].append(row["caption"])
            entry["languages"].add(row["language"])
    return images


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
            outcome = run_scoring(ctx.profile, request, state)
        except (ValueError, LookupError, OSError) as exc:  # the scorer's "bad input" signals
            messages.append(f"Could not score: {exc}")
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

    def on_login(state):
        from app.tabs.annotate import collection_names

        try:
            available = collection_names(state)
        except PermissionError:
            return gr.Dropdown(choices=[], value=None)
        return gr.Dropdown(choices=available, value=available[0] if available else None)

    def on_collection(state, name):
        if not name:
            return gr.skip(), {}, ""
        try:
            found = collection_images(state, name)
        except (PermissionError, ValueError, LookupError) as exc:
            return gr.Dropdown(choices=[], value=None), {}, str(exc)
        choices = [(f"{entry['name']} ({len(entry['captions'])} captions)", sha) for sha, entry in found.items()]
        return gr.Dropdown(choices=choices, value=choices[0][1] if choices else None), found, f"{len(found)} images."

    def on_pick(found, sha):
        entry = (found or {}).get(sha)
        if not entry:
            return (gr.skip(),) * 4 + ("Choose a collection and an image.",)
        languages = entry["languages"]
        return ([entry["file"]], "\n".join(entry["captions"]), "\n".join(entry["references"]),
                next(iter(languages)) if len(languages) == 1 else AUTO, "")

    user_state.change(on_login, user_state, pick_collection, api_visibility="private")
    pick_collection.change(on_collection, [user_state, pick_collection], [pick_image, picked, pick_status],
                           api_visibility="private")
    pick_button.click(on_pick, [picked, pick_image], [files, captions, references, lang, pick_status],
                      api_visibility="private")
    return ScoreTab(files, captions, references, lang, metrics, button, status, items, table, chart, cache,
                    on_score, inputs, outputs)
