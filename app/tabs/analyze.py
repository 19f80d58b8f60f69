"""Analyze tab: how each metric agrees with the human ratings of a collection, per language,
and how much perturbations move it. Measures and figures come from `scoring.analysis`."""
from __future__ import annotations

import gradio as gr
import pandas as pd

from app import engine, render
from app.collection_scores import collection_table
from app.tabs.annotate import collection_choices

COEFFICIENT_LABELS = {"kendall_c": "Kendall τc", "kendall_b": "Kendall τb", "pearson": "Pearson r",
                      "spearman": "Spearman ρ"}


def correlation_view(table: pd.DataFrame, metrics: list[str], n_boot: int = 200) -> pd.DataFrame:
    """Per language and metric: n and each coefficient with its bootstrap 95 % interval."""
    from scoring.analysis.tables import collection_correlations

    result = collection_correlations(table, metrics, n_boot=n_boot)
    shown = result[["lang", "metric", "n"]].copy()
    for name, label in COEFFICIENT_LABELS.items():
        shown[label] = [_interval(v, lo, hi) for v, lo, hi in zip(result[name], result[f"{name}_low"], result[f"{name}_high"])]
    return shown, result


def _interval(value, low, high) -> str:
    if pd.isna(value):
        return "—"
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def robustness_view(table: pd.DataFrame, metrics: list[str]):
    """PR-MCS Table 7 for the collection's stored perturbations (None when there are none)."""
    from scoring.analysis.robustness import format_table7, robustness_table
    from scoring.analysis.tables import robustness_input

    long = robustness_input(table, metrics)
    if long is None:
        return None, None
    numeric = robustness_table(long)
    return format_table7(numeric), numeric


def inert_text(table: pd.DataFrame) -> pd.DataFrame:
    """Copy of `table` whose caption text is escaped for Plotly hover labels."""
    safe = table.copy()
    safe["candidate"] = safe["candidate"].map(render.plotly_text)
    return safe


def build(ctx: engine.AppContext, user_state: gr.State) -> None:
    names = engine.metric_names(ctx.profile)
    gr.Markdown("Log in as a researcher in the Annotate tab, choose a collection, and analyse it: "
                "correlation of every metric with the human ratings per language (bootstrap 95 % intervals), "
                "a scatter per metric, and the score change under the collection's stored perturbations.")
    with gr.Row():
        collection = gr.Dropdown([], label="Collection", allow_custom_value=True, elem_id="analyze-collection")
        refresh = gr.Button("↻ collections", scale=0)
        metrics = gr.CheckboxGroup(names, value=names, label="Metrics")
        run = gr.Button("Analyse", variant="primary", elem_id="analyze-button")
    status = gr.Textbox(label="Status", interactive=False, elem_id="analyze-status")
    correlations = gr.Dataframe(label="Correlation with human ratings", interactive=False, wrap=True,
                                elem_id="analyze-correlations")
    heatmap = gr.Plot(label="Kendall τc by metric and language")
    with gr.Row():
        scatter_metric = gr.Dropdown(names, value=names[0], label="Scatter: metric")
    scatter = gr.Plot(label="Metric vs human (hover shows image and caption)")
    table7 = gr.Dataframe(label="Perturbations: PR-MCS Table 7 layout", interactive=False, wrap=True)
    drops = gr.Plot(label="Score change under perturbation")
    table_state = gr.State(None)

    def on_analyse(state, name, chosen, metric, progress=gr.Progress()):
        from scoring.analysis import plots

        try:
            table = collection_table(ctx.profile, state, name, list(chosen), progress)
            shown, numeric = correlation_view(table, list(chosen))
        except (PermissionError, ValueError, LookupError) as exc:
            return str(exc), *[gr.skip()] * 6
        messages = [f"{len(table)} captions, {int(table['human'].notna().sum())} with human ratings."]
        heat = plots.correlation_heatmap(numeric, "kendall_c")
        scatter_figure = _scatter(table, metric if metric in chosen else chosen[0])
        formatted, robust = robustness_view(table, list(chosen))
        if formatted is None:
            messages.append("No perturbed captions stored in this collection: save some from the Perturbation lab.")
            return " ".join(messages), shown, heat, scatter_figure, None, None, table
        return " ".join(messages), shown, heat, scatter_figure, formatted, plots.robustness_drop_bars(robust), table

    def _scatter(table, metric):
        from scoring.analysis import plots

        return plots.metric_vs_human_scatter(inert_text(table.dropna(subset=["human"])), metric,
                                             hover_cols=("image_id", "candidate"), color_col="lang")

    def on_metric(table, metric):
        if table is None or metric not in table:
            return gr.skip()
        return _scatter(table, metric)

    refresh.click(collection_choices, user_state, [collection, status], api_visibility="private")
    user_state.change(collection_choices, user_state, [collection, status], api_visibility="private")
    run.click(on_analyse, [user_state, collection, metrics, scatter_metric],
              [status, correlations, heatmap, scatter, table7, drops, table_state], api_visibility="private")
    scatter_metric.change(on_metric, [table_state, scatter_metric], scatter, api_visibility="private")
