"""Perturbation lab: damage a caption on purpose and see which metrics notice.

The perturbations and their scores come from `app.perturb_lab`; this tab shows original
and perturbed captions side by side with the changed spans highlighted, and the scores of
every chosen metric in the layout of PR-MCS Table 7 (score and change in % per operation).
Each operation takes its own default p from the library unless the user sets one; examples
(world scenes in four languages, PR-MCS Figure 5) run the lab in one click.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import gradio as gr

from annotation.errors import user_message
from annotation.lab import save_perturbations
from app import engine, render
from app.langs import language_choices
from app.perturb_lab import (ALL_FIVE, caption_robustness_cells, lab_default_p, lab_examples, operation_choices,
                             p_help, parse_critical, perturb_and_score)
from app.session import account_id
from app.tabs.score import load_images, split_lines
from scoring.analysis.plots import robustness_drop_bars
from scoring.language_id import AUTO

SLOTS = 5
# The examples' rendered world scenes: in the system's temp folder, which Gradio serves files
# from, and never the data directory, which it must not serve.
EXAMPLE_IMAGES = Path(tempfile.gettempdir()) / "caplens-lab-examples"


def build(ctx: engine.AppContext) -> None:
    names = engine.metric_names(ctx.profile)
    with gr.Row():
        with gr.Column(scale=1):
            image = gr.File(label="Image (optional for text metrics)", file_count="single", elem_id="perturb-image")
            caption = gr.Textbox(label="Caption", lines=2, elem_id="perturb-caption")
            references = gr.Textbox(label="References, one per line (optional)", lines=2)
            lang = gr.Dropdown(language_choices(), value=AUTO, label="Language")
            op = gr.Dropdown(operation_choices(), value=ALL_FIVE, label="Operation", elem_id="perturb-op")
            paper_p = gr.Checkbox(value=True, label="Each operation's default p (as in the papers)",
                                  info=p_help(), elem_id="perturb-paper-p")
            with gr.Row():
                # Shows the chosen operation's default while the box above is ticked; untick it
                # to apply your own p to every operation that takes one.
                p = gr.Slider(0.0, 1.0, value=0.4, step=0.05, label="p (per token)",
                              interactive=False, elem_id="perturb-p")
                seed = gr.Number(value=0, precision=0, label="Seed")
            critical = gr.Textbox(
                label="Critical objects (separated by ;) — used by substitution",
                placeholder="man; white sports uniform; helmet", elem_id="perturb-critical",
            )
            metrics = gr.CheckboxGroup(names, value=names, label="Metrics")
            button = gr.Button("Perturb and score", variant="primary", elem_id="perturb-button")
            # Ready-made inputs: a click fills them in and runs the lab, no upload needed.
            # (A Dataset rather than gr.Examples: its click runs through the queue like every
            # event of the page; gr.Examples loads through /gradio_api/run, which app.access refuses.)
            examples = lab_examples(EXAMPLE_IMAGES)
            example_table = gr.Dataset(components=["textbox"], samples=[[e.label] for e in examples],
                                       sample_labels=[e.label for e in examples], type="index",
                                       label="Examples (click one to perturb and score it)", elem_id="perturb-examples")
        with gr.Column(scale=2):
            status = gr.Textbox(label="Messages", interactive=False, lines=2, elem_id="perturb-status")
            original_view = gr.Textbox(label="Original", interactive=False, elem_id="perturb-original")
            slots = [  # shown by a run, one per perturbation (before one, an empty box with a legend said nothing)
                gr.HighlightedText(label=f"Perturbed {i + 1}", visible=False, combine_adjacent=True,
                                   show_legend=True, show_inline_category=False,
                                   color_map={render.CHANGED: "#f59e0b", render.REMOVED: "#ef4444"}, elem_id=f"perturb-slot-{i}")
                for i in range(SLOTS)
            ]
            table = gr.Dataframe(render.empty_table(render.LAB_COLUMNS),
                                 label="Scores before and after (PR-MCS Table 7 layout; each metric's status as an "
                                       "icon; the reasons are listed under the table)", interactive=False,
                                 wrap=True, elem_id="perturb-table", **render.lab_table_options(render.LAB_COLUMNS))
            notes = gr.Markdown("", elem_id="perturb-notes")  # as the Score tab's: in view on a phone
            chart = gr.Plot(label="Change per metric and operation", elem_id="perturb-chart")
            with gr.Accordion("Save into a collection (researcher login, Annotate tab)", open=False):
                with gr.Row():
                    save_collection = gr.Textbox(label="Collection", value="perturbation-lab",
                                                 elem_id="perturb-save-collection")
                    save_button = gr.Button("Save original, critical objects and perturbations",
                                            elem_id="perturb-save-button")
                save_status = gr.Textbox(label="Saved", interactive=False, elem_id="perturb-save-status")
    last_run = gr.State(None)

    def on_op(op_name, use_paper_p, p_value):
        """The slider shows the operation's own default while the paper's p is used."""
        if not use_paper_p:
            return gr.Slider(interactive=True)
        default = lab_default_p(op_name)
        return gr.Slider(value=p_value if default is None else default, interactive=False)

    def on_perturb(path, text, refs_text, lang_choice, op_name, use_paper_p, p_value, seed_value, critical_text,
                   chosen):
        images, messages = load_images([path] if path else [])
        image = images[0] if images else None
        try:
            lab = perturb_and_score(engine.AppScorer(ctx.profile), text, op_name,
                                    None if use_paper_p else float(p_value), int(seed_value or 0),
                                    lang_choice, parse_critical(critical_text),
                                    image=None if image is None else image.image, references=split_lines(refs_text),
                                    metrics=list(chosen or []))
        except (ValueError, LookupError) as exc:
            messages.append(user_message(exc))
            return ("\n".join(messages), gr.skip(), *[gr.skip()] * SLOTS, gr.skip(), gr.skip(), gr.skip(), gr.skip())
        for pert in lab.perturbations:
            if pert.noop:
                messages.append(f"{pert.op}: no change ({pert.noop_reason or 'nothing to perturb'})")
        slot_updates = []
        for i in range(SLOTS):
            if i < len(lab.perturbations):
                pert = lab.perturbations[i]
                slot_updates.append(gr.HighlightedText(
                    value=render.perturbation_segments(pert), label=pert.op,
                    visible=True))
            else:
                slot_updates.append(gr.HighlightedText(value=None, visible=False))
        table_frame, notes_text, chart_figure = gr.skip(), gr.skip(), gr.skip()
        if not chosen:
            messages.append("No metric chosen: perturbations shown without scores.")
        elif lab.problem:
            messages.append(f"Could not score: {lab.problem}")
        else:
            messages.append(lab.robustness.summary(len(lab.perturbations), lab.lang))
            messages.extend(lab.robustness.messages)
            cells = caption_robustness_cells(lab.robustness)
            table_frame = gr.Dataframe(value=cells, **render.lab_table_options(cells.columns))
            notes_text = render.status_notes([{"metric": m, "status": w} for m, w in lab.robustness.statuses.items()])
            chart_figure = None if lab.robustness.table.empty else robustness_drop_bars(lab.robustness.table,
                                                                                        lab.robustness.ops)
        # The session keeps the upload's bytes for a later save, not its decoded pixels (a large
        # image would hold ~100 MB per browser session).
        run = {"image_data": image.data if image else None, "image_name": image.name if image else None,
               "text": text, "lang": lab.lang, "perturbations": lab.perturbations,
               "critical": parse_critical(critical_text)}
        return ("\n".join(messages), text, *slot_updates, table_frame, notes_text, chart_figure, run)

    def on_save(run, name, request: gr.Request):
        if not run:
            return "Run a perturbation first."
        try:
            return save_perturbations(account_id(request), run["image_data"], run["image_name"], run["text"],
                                      run["lang"], run["perturbations"], name, run["critical"])
        except (PermissionError, ValueError, LookupError) as exc:
            return user_message(exc)

    run_inputs = [image, caption, references, lang, op, paper_p, p, seed, critical, metrics]
    run_outputs = [status, original_view, *slots, table, notes, chart, last_run]
    op.change(on_op, [op, paper_p, p], p, api_visibility="private")
    paper_p.change(on_op, [op, paper_p, p], p, api_visibility="private")
    button.click(on_perturb, run_inputs, run_outputs, api_visibility="private")

    def on_example(index):
        if not isinstance(index, int) or not 0 <= index < len(examples):
            raise gr.Error("No such example.")
        example = examples[index]
        return (example.image, example.caption, example.references, example.lang, example.op, example.critical,
                True)

    example_table.click(on_example, example_table, [image, caption, references, lang, op, critical, paper_p],
                        api_visibility="private").then(on_perturb, run_inputs, run_outputs, api_visibility="private")
    save_button.click(on_save, [last_run, save_collection], save_status, api_visibility="private")
