"""Perturbation lab: damage a caption on purpose and see which metrics notice.

The perturbations come from `scoring.perturb.ops`; this tab shows original and perturbed
captions side by side with the changed spans highlighted, and scores both with every
chosen metric in the layout of PR-MCS Table 7 (score and change in % per operation).
"""
from __future__ import annotations

import math

import gradio as gr
import pandas as pd

from app import engine, render
from app.langs import AUTO, language_choices, resolve_language
from app.tabs.score import load_images, split_lines
from app.uploads import LoadedImage

ALL_FIVE = "all five (PR-MCS)"
SLOTS = 5


def operation_choices() -> list[str]:
    from scoring.perturb.ops import PRMCS_OPS, UMIC_OPS

    return [ALL_FIVE, *PRMCS_OPS, *[op for op in UMIC_OPS if op not in PRMCS_OPS]]


def parse_critical(text: str | None) -> list[str] | None:
    objects = [part.strip() for part in (text or "").replace("\n", ";").split(";") if part.strip()]
    return objects or None


def run_perturbations(text: str, op: str, p: float, seed: int, lang: str, critical: list[str] | None,
                      corpus: list[str] | None = None) -> list:
    """Perturbation objects for one operation or for the five PR-MCS operations."""
    from scoring.perturb.ops import PRMCS_OPS, perturb

    if not text or not text.strip():
        raise ValueError("Enter a caption to perturb.")
    ops = list(PRMCS_OPS) if op in (ALL_FIVE, "all") else [op]
    return [perturb(text, name, p=p, seed=int(seed), lang=lang, critical=critical, corpus=corpus) for name in ops]


def robustness_table(profile: str, image: LoadedImage | None, original: str, perturbations: list,
                     references: list[str], lang: str, metrics: list[str]) -> tuple[pd.DataFrame, list[dict]]:
    """Rows: metrics; columns: Original, each operation as "score (change %)", Average, and
    the metric's status (why it is unavailable); "—" where a metric needs what is missing."""
    from scoring.analysis.robustness import percent_change
    from scoring.api import ScoreItem

    def change_of(before, after):
        return None if before is None or after is None or math.isnan(percent_change(before, after)) \
            else percent_change(before, after)

    texts = [original] + [pert.text for pert in perturbations]
    items = [ScoreItem(image=None if image is None else image.image, candidate=t, references=references, lang=lang)
             for t in texts]
    results = engine.score_items(profile, items, metrics)
    rows, drops = [], []
    for name in metrics:
        result = results[name]
        row = {"metric": name, "status": "available"}
        if result.unavailable:
            row["status"] = f"unavailable: {result.unavailable}"
            rows.append(row)
            continue
        base = result.values[0]
        row["Original"] = "—" if base is None else f"{base:.4f}"
        perturbed_values = []
        for pert, value in zip(perturbations, result.values[1:]):
            change = change_of(base, value)
            row[pert.op] = "—" if value is None else (
                f"{value:.4f}" + ("" if change is None else f" ({change:+.2f}%)"))
            if value is not None:
                perturbed_values.append(value)
            if change is not None:
                drops.append({"metric": name, "operation": pert.op, "change %": round(change, 2)})
        if len(perturbations) > 1 and perturbed_values:
            mean = sum(perturbed_values) / len(perturbed_values)
            change = change_of(base, mean)
            row["Average"] = f"{mean:.4f}" + ("" if change is None else f" ({change:+.2f}%)")
        rows.append(row)
    columns = (["metric", "Original", *[p.op for p in perturbations]] + (["Average"] if len(perturbations) > 1 else [])
               + ["status"])
    return pd.DataFrame(rows, columns=columns).fillna(""), drops


def save_to_collection(user_state: dict | None, image: LoadedImage | None, original: str, lang: str,
                       perturbations: list, collection_name: str, critical: list[str] | None) -> str:
    """Store image, original caption (as a candidate), its critical objects and the perturbed
    captions with their provenance in `collection_name` (researcher or admin)."""
    from annotation.captions import add_caption, get_or_create_collection
    from annotation.image_store import add_image
    from annotation.perturbations import store_perturbation
    from annotation.tasks import mark_critical

    from app.tabs.annotate import _db, acting_user

    if image is None:
        raise ValueError("Upload the image first: stored captions belong to an image.")
    if not perturbations:
        raise ValueError("Run a perturbation first.")
    if not (collection_name or "").strip():
        raise ValueError("Name the collection to save into.")
    with _db() as session:
        user = acting_user(session, user_state)
        collection = get_or_create_collection(session, user, collection_name.strip())
        stored_image = add_image(session, image.data, original_filename=image.name)
        parent = add_caption(session, user, stored_image, original, language=lang, kind="candidate",
                             collection=collection)
        if critical:
            mark_critical(session, user, parent.id, critical)
        saved = [store_perturbation(session, user, parent, pert, collection=collection)
                 for pert in perturbations if not pert.noop]
        return (f"Saved caption {parent.id} and {len(saved)} perturbed caption(s) into {collection.name}"
                + (f", with {len(critical)} critical object(s)." if critical else "."))


def build(ctx: engine.AppContext, user_state: gr.State) -> None:
    names = engine.metric_names(ctx.profile)
    with gr.Row():
        with gr.Column(scale=1):
            image = gr.File(label="Image (optional for text metrics)", file_count="single", elem_id="perturb-image")
            caption = gr.Textbox(label="Caption", lines=2, elem_id="perturb-caption")
            references = gr.Textbox(label="References, one per line (optional)", lines=2)
            lang = gr.Dropdown(language_choices(), value=AUTO, label="Language")
            op = gr.Dropdown(operation_choices(), value=ALL_FIVE, label="Operation", elem_id="perturb-op")
            with gr.Row():
                p = gr.Slider(0.0, 1.0, value=0.4, step=0.05, label="p (per token)")
                seed = gr.Number(value=0, precision=0, label="Seed")
            critical = gr.Textbox(
                label="Critical objects (separated by ;) — used by substitution",
                placeholder="man; white sports uniform; helmet", elem_id="perturb-critical",
            )
            metrics = gr.CheckboxGroup(names, value=names, label="Metrics")
            button = gr.Button("Perturb and score", variant="primary", elem_id="perturb-button")
        with gr.Column(scale=2):
            status = gr.Textbox(label="Messages", interactive=False, lines=2, elem_id="perturb-status")
            original_view = gr.Textbox(label="Original", interactive=False, elem_id="perturb-original")
            slots = [
                gr.HighlightedText(label=f"Perturbed {i + 1}", visible=i == 0, combine_adjacent=True,
                                   show_legend=True, show_inline_category=False,
                                   color_map={render.CHANGED: "#f59e0b", render.REMOVED: "#ef4444"}, elem_id=f"perturb-slot-{i}")
                for i in range(SLOTS)
            ]
            table = gr.Dataframe(label="Scores before and after (PR-MCS Table 7 layout)", interactive=False,
                                 wrap=True, elem_id="perturb-table")
            chart = gr.Plot(label="Change per metric and operation")
            with gr.Accordion("Save into a collection (researcher login, Annotate tab)", open=False):
                with gr.Row():
                    save_collection = gr.Textbox(label="Collection", value="perturbation-lab")
                    save_button = gr.Button("Save original, critical objects and perturbations")
                save_status = gr.Textbox(label="Saved", interactive=False, elem_id="perturb-save-status")
    last_run = gr.State(None)

    def on_perturb(path, text, refs_text, lang_choice, op_name, p_value, seed_value, critical_text, chosen):
        images, messages = load_images([path] if path else [])
        try:
            lang = resolve_language(lang_choice, text or "")
            perturbations = run_perturbations(text, op_name, float(p_value), int(seed_value or 0), lang,
                                              parse_critical(critical_text), split_lines(refs_text) or None)
        except (ValueError, LookupError) as exc:
            messages.append(str(exc))
            return ("\n".join(messages), gr.skip(), *[gr.skip()] * SLOTS, gr.skip(), gr.skip(), gr.skip())
        for pert in perturbations:
            if pert.noop:
                messages.append(f"{pert.op}: no change ({pert.noop_reason or 'nothing to perturb'})")
        slot_updates = []
        for i in range(SLOTS):
            if i < len(perturbations):
                pert = perturbations[i]
                slot_updates.append(gr.HighlightedText(
                    value=render.highlight_spans(pert.text, pert.changed_spans, mark_removals=True), label=pert.op,
                    visible=True))
            else:
                slot_updates.append(gr.HighlightedText(value=None, visible=False))
        table_frame, chart_figure = gr.skip(), gr.skip()
        if chosen:
            try:
                table_frame, drop_rows = robustness_table(ctx.profile, images[0] if images else None, text,
                                                          perturbations, split_lines(refs_text), lang, list(chosen))
                chart_figure = render.drop_bar_chart(drop_rows, "Change vs original (%)")
            except (ValueError, LookupError, OSError) as exc:
                messages.append(f"Could not score: {exc}")
        else:
            messages.append("No metric chosen: perturbations shown without scores.")
        run = {"image": images[0] if images else None, "text": text, "lang": lang, "perturbations": perturbations,
               "critical": parse_critical(critical_text)}
        return ("\n".join(messages), text, *slot_updates, table_frame, chart_figure, run)

    def on_save(state, run, name):
        if not run:
            return "Run a perturbation first."
        try:
            return save_to_collection(state, run["image"], run["text"], run["lang"], run["perturbations"], name,
                                      run["critical"])
        except (PermissionError, ValueError, LookupError) as exc:
            return str(exc)

    button.click(
        on_perturb,
        [image, caption, references, lang, op, p, seed, critical, metrics],
        [status, original_view, *slots, table, chart, last_run],
        api_visibility="private",
    )
    save_button.click(on_save, [user_state, last_run, save_collection], save_status, api_visibility="private")
