"""Perturbation lab: damage a caption on purpose and see which metrics notice.

The perturbations come from `annotation.perturb`; this tab shows original and perturbed
captions side by side with the changed spans highlighted, and scores both with every
chosen metric in the layout of PR-MCS Table 7 (score and change in % per operation).
"""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr
import pandas as pd

from app import engine, render
from app.langs import AUTO, language_choices, resolve_language
from app.tabs.score import load_images, split_lines
from app.uploads import LoadedImage

ALL_FIVE = "all five (PR-MCS)"
SLOTS = 5


def operation_choices() -> list[str]:
    from annotation.perturb import PRMCS_OPS, UMIC_OPS

    return [ALL_FIVE, *PRMCS_OPS, *[op for op in UMIC_OPS if op not in PRMCS_OPS]]


def parse_critical(text: str | None) -> list[str] | None:
    objects = [part.strip() for part in (text or "").replace("\n", ";").split(";") if part.strip()]
    return objects or None


def run_perturbations(text: str, op: str, p: float, seed: int, lang: str, critical: list[str] | None,
                      corpus: list[str] | None = None) -> list:
    """Perturbation objects for one operation or for the five PR-MCS operations."""
    from annotation.perturb import PRMCS_OPS, perturb

    if not text or not text.strip():
        raise ValueError("Enter a caption to perturb.")
    ops = list(PRMCS_OPS) if op in (ALL_FIVE, "all") else [op]
    return [perturb(text, name, p=p, seed=int(seed), lang=lang, critical=critical, corpus=corpus) for name in ops]


def robustness_table(profile: str, image: LoadedImage | None, original: str, perturbations: list,
                     references: list[str], lang: str, metrics: list[str]) -> tuple[pd.DataFrame, list[dict]]:
    """Rows: metrics; columns: Original, each operation as "score (change %)", Average."""
    from scoring.api import ScoreItem

    texts = [original] + [pert.text for pert in perturbations]
    items = [ScoreItem(image=None if image is None else image.image, candidate=t, references=references, lang=lang)
             for t in texts]
    results = engine.score_items(profile, items, metrics)
    rows, drops = [], []
    for name in metrics:
        result = results[name]
        row = {"metric": name}
        if result.unavailable:
            row["Original"] = f"unavailable: {result.unavailable}"
            rows.append(row)
            continue
        base = result.values[0]
        row["Original"] = "—" if base is None else f"{base:.4f}"
        perturbed_values = []
        for pert, value in zip(perturbations, result.values[1:]):
            change = render.percent_change(base, value)
            row[pert.op] = "—" if value is None else (
                f"{value:.4f}" + ("" if change is None else f" ({change:+.2f}%)"))
            if value is not None:
                perturbed_values.append(value)
            if change is not None:
                drops.append({"metric": name, "operation": pert.op, "change %": round(change, 2)})
        if len(perturbations) > 1 and perturbed_values:
            mean = sum(perturbed_values) / len(perturbed_values)
            change = render.percent_change(base, mean)
            row["Average"] = f"{mean:.4f}" + ("" if change is None else f" ({change:+.2f}%)")
        rows.append(row)
    columns = ["metric", "Original", *[p.op for p in perturbations]] + (["Average"] if len(perturbations) > 1 else [])
    return pd.DataFrame(rows, columns=columns).fillna(""), drops


@dataclass
class PerturbTab:
    image: gr.File
    caption: gr.Textbox
    button: gr.Button


def build(ctx: engine.AppContext) -> PerturbTab:
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
                                   show_legend=False, color_map={render.CHANGED: "#f59e0b"}, elem_id=f"perturb-slot-{i}")
                for i in range(SLOTS)
            ]
            table = gr.Dataframe(label="Scores before and after (PR-MCS Table 7 layout)", interactive=False,
                                 wrap=True, elem_id="perturb-table")
            chart = gr.Plot(label="Change per metric and operation")

    def on_perturb(path, text, refs_text, lang_choice, op_name, p_value, seed_value, critical_text, chosen):
        images, messages = load_images([path] if path else [])
        try:
            lang = resolve_language(lang_choice, text or "")
            perturbations = run_perturbations(text, op_name, float(p_value), int(seed_value or 0), lang,
                                              parse_critical(critical_text), split_lines(refs_text) or None)
        except (ValueError, LookupError) as exc:
            messages.append(str(exc))
            return ("\n".join(messages), gr.skip(), *[gr.skip()] * SLOTS, gr.skip(), gr.skip())
        for pert in perturbations:
            if pert.noop:
                messages.append(f"{pert.op}: no change ({pert.noop_reason or 'nothing to perturb'})")
        slot_updates = []
        for i in range(SLOTS):
            if i < len(perturbations):
                pert = perturbations[i]
                slot_updates.append(gr.HighlightedText(
                    value=render.highlight_spans(pert.text, pert.changed_spans), label=pert.op, visible=True))
            else:
                slot_updates.append(gr.HighlightedText(value=None, visible=False))
        table_frame, chart_figure = gr.skip(), gr.skip()
        if chosen:
            table_frame, drop_rows = robustness_table(
                ctx.profile, images[0] if images else None, text, perturbations, split_lines(refs_text), lang, list(chosen))
            chart_figure = render.drop_bar_chart(drop_rows, "Change vs original (%)")
        else:
            messages.append("No metric chosen: perturbations shown without scores.")
        return ("\n".join(messages), text, *slot_updates, table_frame, chart_figure)

    button.click(
        on_perturb,
        [image, caption, references, lang, op, p, seed, critical, metrics],
        [status, original_view, *slots, table, chart],
        api_visibility="private",
    )
    return PerturbTab(image=image, caption=caption, button=button)
