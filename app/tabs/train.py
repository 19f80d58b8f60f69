"""Train tab (researchers and admins): fine-tune a metric as a background job.

Pick a recipe, a config preset and the data (the preset's own, an uploaded set, or a
collection's exported set); the run is a job of `annotation.training.training_jobs` (one per device,
the rest queued). A timer reads the job's state every second: progress bar with ETA, loss
curve, log, and at the end the held-out numbers before and after side by side plus the
metric version it registered. A smoke/tiny preset registers nothing until its owner presses
"Register as a metric version"; an ended job, or a registered version, can be deleted. The
job lives on the server, so after a reload (and a new login) the tab finds it again. The
library checks the role; this tab only shows its answers.

Every view of a job goes through `Panel` and `show`: a new output (another plot) is one more
field of Panel and one more entry in show's dict.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import gradio as gr
import pandas as pd
import plotly.graph_objects as go

from annotation.training import training_jobs as jobs
from annotation.people.accounts import RESEARCH_ROLES
from app import engine
from app.login_notice import login_notice
from app.session import account_id, collection_dropdown, follow_login

PRESET_DATA, SET_FILE, COLLECTION = "the preset's data", "a set file", "a collection"
REFRESH_S = 1.0
# The numbers first (readable on a phone without scrolling sideways), the explanation last.
RESULT_COLUMNS = ["held-out measure", "before", "after", "change", "better", "scale", "what it measures"]
RESULT_WIDTHS = ["150px", "84px", "84px", "220px", "110px", "160px", "300px"]  # a phone scrolls; no word breaks
EMPTY_RESULT = pd.DataFrame(columns=RESULT_COLUMNS)
BETTER = {"higher": "higher ↑", "lower": "lower ↓", "neither": "neither (context)"}
JOB_COLUMNS = ["job", "owner", "recipe", "preset", "data", "status", "progress", "metric version"]
PROBLEMS = (PermissionError, ValueError, LookupError, OSError)


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


NO_JOB_SHOWN = "No job shown: start one, or click one of your jobs."


def progress_bar(view: jobs.JobView | None) -> str:
    """Numbers only (no user text goes into HTML); no bar before a job is shown (an empty 0 %
    bar read as a job stuck at its start)."""
    if view is None:
        return f'<div id="train-progress-text">{NO_JOB_SHOWN}</div>'
    percent = round(100 * view.progress, 1)
    eta = f" · ETA {_clock(view.eta_s)}" if view.active else ""
    elapsed = f" · {_clock(view.elapsed_s)} elapsed"
    return (
        '<div style="border:1px solid #999;border-radius:4px;height:14px;width:100%">'
        f'<div id="train-progress-fill" style="background:#3b82f6;height:100%;width:{percent}%"></div></div>'
        f'<div id="train-progress-text">{percent:g} %{eta}{elapsed}</div>'
    )


def loss_figure(view: jobs.JobView | None) -> go.Figure:
    figure = go.Figure()
    if view is not None and view.losses:
        steps, values = zip(*view.losses)
        figure.add_trace(go.Scatter(x=list(steps), y=list(values), mode="lines+markers", name="training loss"))
    figure.update_layout(title="Training loss", xaxis_title="step", yaxis_title="loss", height=320,
                         margin=dict(l=40, r=10, t=40, b=40))
    return figure


def learning_curve_figure(view: jobs.JobView | None) -> go.Figure:
    """Held-out tau_c against the amount of training data (ratings for CapLens-R), one point per
    budget of the run's learning curve: how many ratings a study needs."""
    figure = go.Figure()
    curve = view.learning_curve if view is not None else None
    unit = (curve or {}).get("unit", "ratings")
    if curve and curve.get("points"):
        points = [p for p in curve["points"] if p.get("tau_c") is not None]
        figure.add_trace(go.Scatter(x=[p["budget"] for p in points], y=[p["tau_c"] for p in points],
                                    mode="lines+markers", name="held-out tau_c"))
    figure.update_layout(title=f"Learning curve: held-out tau_c by {unit} trained on", xaxis_title=unit,
                         yaxis_title="tau_c vs the mean rating", xaxis_type="log", height=320,
                         margin=dict(l=40, r=10, t=40, b=40))
    return figure


def _shown(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.4g}"


def _change(row: dict) -> str:
    """The change with what it means; where there is none, why."""
    return row["verdict"] if row["change"] is None else f"{row['change']:+.4g} ({row['verdict']})"


def result_table(view: jobs.JobView | None) -> pd.DataFrame:
    """One row per held-out number: what it measures, which way is better, its scale, and the
    change in words (never a bare NaN or delta)."""
    if view is None or not view.comparison:
        return EMPTY_RESULT
    return pd.DataFrame([
        {"held-out measure": row["key"], "what it measures": row["measure"], "better": BETTER[row["better"]],
         "scale": row["scale"], "before": _shown(row["before"]), "after": _shown(row["after"]), "change": _change(row)}
        for row in view.comparison
    ], columns=RESULT_COLUMNS)


def status_text(view: jobs.JobView | None) -> str:
    if view is None:
        return ""  # the progress line says it once (NO_JOB_SHOWN)
    lines = [f"Job {view.id} ({view.recipe}, preset {view.preset}, {view.data}) on {view.device}: {view.status}"]
    if view.queue_position:
        lines.append(f"waiting: number {view.queue_position} in the {view.device} queue")
    lines.append(view.message)
    if view.metric_name:
        lines.append(f"New metric version: {view.metric_name} (score with it in the Score tab, the API or --metrics)")
    lines += [f"warning: {warning}" for warning in view.warnings]
    return "\n".join(lines)


def jobs_table(listed: list[jobs.JobView]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"job": j.id, "owner": j.owner, "recipe": j.recipe, "preset": j.preset, "data": j.data,
          "status": j.status + (" (scratch)" if j.scratch and not j.metric_name else ""),
          "progress": f"{100 * j.progress:.0f} %", "metric version": j.metric_name or ""} for j in listed],
        columns=JOB_COLUMNS)


@dataclass
class Panel:
    """The components that show one job (and the list of jobs)."""

    job_id: gr.State
    timer: gr.Timer
    status: gr.Textbox
    bar: gr.HTML
    curve: gr.Plot
    learning: gr.Plot
    result: gr.Dataframe
    log: gr.Textbox
    listed: gr.Dataframe
    registry_event: gr.State  # changes whenever a version is registered or deleted
    register: gr.Button
    delete: gr.Button
    cancel: gr.Button

    def outputs(self) -> list:
        return [getattr(self, f.name) for f in fields(self)]


def delete_label(view) -> str:
    """Say what Delete removes: the job, and its metric version only when it registered one."""
    if view is not None and view.metric_name:
        return f"Delete this job and its version {view.metric_name}"
    return "Delete this job"


def show(panel: Panel, view: jobs.JobView | None, listed: list[jobs.JobView] | None = None) -> dict:
    """Every component of the panel for a job view; the job list stays as it is when not given."""
    return {
        panel.job_id: None if view is None else view.id,
        panel.timer: gr.Timer(active=bool(view and view.active)),
        panel.status: status_text(view),
        panel.bar: progress_bar(view),
        panel.curve: gr.Plot(loss_figure(view), visible=view is not None),  # no empty axes before a job
        panel.learning: gr.Plot(learning_curve_figure(view), visible=bool(view and view.learning_curve)),
        panel.result: result_table(view),
        panel.log: "" if view is None else "\n".join(view.log),
        panel.listed: gr.skip() if listed is None else jobs_table(listed),
        panel.registry_event: f"+{view.metric_name}" if view is not None and view.metric_name else gr.skip(),
        panel.register: gr.Button(visible=bool(view and view.registerable)),
        panel.delete: gr.Button(visible=bool(view and not view.active),
                                value=delete_label(view)),
        panel.cancel: gr.Button(visible=bool(view and view.active)),
    }


def problem(panel: Panel, exc: Exception) -> dict:
    """Leave everything as it is and say why (no traceback, no server paths)."""
    return {component: gr.skip() for component in panel.outputs()} | {panel.status: jobs.public_message(exc)}


def build(ctx: engine.AppContext, user_state: gr.State, score_metrics: gr.CheckboxGroup) -> None:
    """The tab; ``score_metrics`` (the Score tab's metric list) follows the versions registered and deleted."""
    try:
        options, unavailable = jobs.training_options(), ""
    except ImportError as exc:  # a deployment without the training stack
        options, unavailable = {}, f"Training is unavailable here: {exc}"
    recipes = list(options)
    presets = options[recipes[0]]["presets"] if recipes else []
    login_notice("train", "**Fine-tune a metric** on the synthetic world, an uploaded fine-tuning set or a "
                 "collection, as a background job. A finished run becomes a new version of its metric (e.g. "
                 "`PR-MCS@world-2026-11-23`) in the Score tab, the API and the CLI; a smoke run (a `-tiny` "
                 "preset) stays in your scratch space until you register it.", RESEARCH_ROLES, user_state)
    with gr.Row():
        with gr.Column(scale=1):
            recipe = gr.Dropdown(recipes, value=recipes[0] if recipes else None, label="Recipe", elem_id="train-recipe")
            summary = gr.Textbox(options[recipes[0]]["summary"] if recipes else "", label="What it trains",
                                 interactive=False, lines=2, elem_id="train-summary")
            preset = gr.Dropdown(presets, value=presets[0] if presets else None, label="Config preset",
                                 elem_id="train-preset")
            source = gr.Radio([PRESET_DATA, SET_FILE, COLLECTION], value=PRESET_DATA, label="Data",
                              elem_id="train-source")
            set_file = gr.File(label="Fine-tuning set: the zipped set folder, or its JSONL/Parquet/CSV file",
                               file_types=[".zip", *jobs.SET_SUFFIXES], elem_id="train-set", visible=False)
            collection = gr.Dropdown([], label="Collection", allow_custom_value=True, elem_id="train-collection",
                                     visible=False)
            with gr.Row():
                start = gr.Button("Start training", variant="primary", elem_id="train-start")
                cancel = gr.Button("Cancel job", variant="stop", visible=False, elem_id="train-cancel")
            with gr.Accordion("Registered versions", open=False, elem_id="train-versions-box"):
                versions = gr.Dropdown([], label="Versions you may delete (yours; an admin's: all)",
                                       elem_id="train-versions")
                delete_version = gr.Button("Delete this version from every metric list", variant="stop",
                                           elem_id="train-delete-version")
                versions_note = gr.Textbox(label="", show_label=False, interactive=False, elem_id="train-versions-note")
        with gr.Column(scale=2):
            status = gr.Textbox(label="Job", value=unavailable, lines=4, interactive=False, elem_id="train-status")
            bar = gr.HTML(progress_bar(None), elem_id="train-progress")
            with gr.Row():
                register = gr.Button("Register as a metric version", variant="primary", visible=False,
                                     elem_id="train-register")
                delete = gr.Button(delete_label(None), variant="stop", visible=False,
                                   elem_id="train-delete")
            curve = gr.Plot(loss_figure(None), label="Loss curve", visible=False, elem_id="train-loss")
            learning = gr.Plot(learning_curve_figure(None), label="Learning curve", visible=False,
                               elem_id="train-learning-curve")
            log = gr.Textbox(label="Log", lines=8, max_lines=16, interactive=False, autoscroll=True,
                             elem_id="train-log")
            listed = gr.Dataframe(pd.DataFrame(columns=JOB_COLUMNS), label="Your jobs (click one to show it)",
                                  interactive=False, elem_id="train-jobs")
    # The whole page's width: its seven columns (1,108 px) scrolled sideways in the job column.
    result = gr.Dataframe(EMPTY_RESULT, label="Held-out numbers: before and after training",
                          interactive=False, wrap=True, column_widths=RESULT_WIDTHS, elem_id="train-result")
    panel = Panel(job_id=gr.State(None), timer=gr.Timer(REFRESH_S, active=False), status=status, bar=bar,
                  curve=curve, learning=learning, result=result, log=log, listed=listed, registry_event=gr.State(None),
                  register=register, delete=delete, cancel=cancel)
    outputs = panel.outputs()

    def on_start(recipe_name, preset_name, data_source, upload, collection_name, request: gr.Request):
        try:
            view = jobs.start_training(
                account_id(request), recipe_name, preset_name,
                set_file=upload if data_source == SET_FILE else None,
                collection=collection_name if data_source == COLLECTION else None, profile=ctx.profile)
        except PROBLEMS as exc:
            return problem(panel, exc)
        return show(panel, view)

    def on_tick(current, request: gr.Request):
        if not current:
            return {component: gr.skip() for component in outputs} | {panel.timer: gr.Timer(active=False)}
        try:
            board = jobs.training_board(account_id(request), current)
        except PROBLEMS as exc:
            return problem(panel, exc) | {panel.timer: gr.Timer(active=False)}
        return show(panel, board.current, board.jobs)

    def on_cancel(current, request: gr.Request):
        try:
            return show(panel, jobs.cancel_training(account_id(request), current))
        except PROBLEMS as exc:
            return problem(panel, exc)

    def on_register(current, request: gr.Request):
        try:
            board = jobs.register_training(account_id(request), current)
        except PROBLEMS as exc:  # refused: the job now says so, and offers no second try
            try:
                board = jobs.training_board(account_id(request), current)
            except PROBLEMS:
                return problem(panel, exc)
            return show(panel, board.current, board.jobs) | {panel.status: jobs.public_message(exc)}
        return show(panel, board.current, board.jobs)

    def on_delete(current, request: gr.Request):
        try:
            board = jobs.delete_training(account_id(request), current)
        except PROBLEMS as exc:
            return problem(panel, exc)
        gone = board.deleted_version
        return show(panel, None, board.jobs) | {
            panel.status: f"Job {current} deleted" + (f", and its version {gone} with it." if gone else "."),
            panel.registry_event: f"-{gone}" if gone else gr.skip()}

    def on_login(state, request: gr.Request):
        """After a (re)login: the user's running job, else their last one."""
        if not state:
            return show(panel, None, [])
        try:
            board = jobs.training_board(account_id(request))
        except PROBLEMS as exc:
            return show(panel, None, []) | {panel.status: jobs.public_message(exc)}
        return show(panel, board.current, board.jobs)

    def on_versions(state, request: gr.Request):
        if not state:
            return gr.Dropdown(choices=[], value=None)
        try:
            names = jobs.deletable_versions(account_id(request))
        except PROBLEMS:
            names = []
        return gr.Dropdown(choices=names, value=None)

    def on_delete_version(name, request: gr.Request):
        if not name:
            return gr.skip(), "Choose a version first.", gr.skip()
        try:
            left = jobs.delete_version(account_id(request), name)
        except PROBLEMS as exc:
            return gr.skip(), jobs.public_message(exc), gr.skip()
        return gr.Dropdown(choices=left, value=None), f"{name} deleted from every metric list.", f"-{name}"

    def on_pick(table: pd.DataFrame, event: gr.SelectData):
        """Show the clicked job: the next timer tick reads it."""
        row = event.index[0] if isinstance(event.index, (list, tuple)) else event.index
        return table.iloc[row]["job"], gr.Timer(active=True)

    def on_recipe(name):
        entry = options.get(name) or {"summary": "", "presets": []}
        chosen = entry["presets"]
        return gr.Dropdown(choices=chosen, value=chosen[0] if chosen else None), entry["summary"]

    def on_source(choice):
        return gr.File(visible=choice == SET_FILE), gr.Dropdown(visible=choice == COLLECTION)

    recipe.change(on_recipe, recipe, [preset, summary], api_visibility="private")
    source.change(on_source, source, [set_file, collection], api_visibility="private")
    start.click(on_start, [recipe, preset, source, set_file, collection], outputs, api_visibility="private")
    panel.timer.tick(on_tick, panel.job_id, outputs, api_visibility="private", show_progress="hidden")
    cancel.click(on_cancel, panel.job_id, outputs, api_visibility="private")
    register.click(on_register, panel.job_id, outputs, api_visibility="private")
    delete.click(on_delete, panel.job_id, outputs, api_visibility="private")
    delete_version.click(on_delete_version, versions, [versions, versions_note, panel.registry_event],
                         api_visibility="private")
    def metric_choices():
        return gr.CheckboxGroup(choices=engine.metric_names(ctx.profile))

    # A login refreshes what `registry_event` would (the versions, the Score tab's metric list)
    # itself, and leaves that State out: the page fires a State's change when an event first
    # writes it while its tab was never opened, even with nothing in it, so each first login
    # of a page sent two more queued events.
    follow_login(user_state, on_login, [user_state], [c for c in outputs if c is not panel.registry_event])
    follow_login(user_state, on_versions, [user_state], [versions])
    follow_login(user_state, metric_choices, [], [score_metrics])
    listed.select(on_pick, listed, [panel.job_id, panel.timer], api_visibility="private", trigger_mode="always_last")
    panel.registry_event.change(metric_choices, None, score_metrics, api_visibility="private")
    panel.registry_event.change(on_versions, user_state, versions, api_visibility="private")
    follow_login(user_state, collection_dropdown, [], [collection])
