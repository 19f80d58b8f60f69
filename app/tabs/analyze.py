"""Analyze tab: how each metric agrees with the human ratings of a collection, per language,
and how much perturbations move it: one call to `annotation.scores.collection_analysis`, figures
from `scoring.analysis.plots`."""
from __future__ import annotations

import gradio as gr

from annotation.people.accounts import RESEARCH_ROLES
from annotation.scores.collection_analysis import analyse_collection
from annotation.errors import user_message
from annotation.scores.server_benchmarks import TABLE_COLUMNS, reproduce_on_server, server_benchmarks
from app import engine, render
from app.login_notice import login_notice
from app.session import account_id, collection_row, follow_collections, follow_login, forget_on_login_change, logged_in
from scoring.analysis import plots
from scoring.analysis.report import CorrelationFilters, correlation_cells, robustness_cells
from scoring.analysis.robustness import TABLE7_READING


PURPOSE = ("**Analyze a stored collection**: how every metric correlates with the collection's human ratings, per "
           "language (bootstrap 95 % intervals), a scatter per metric, and how much the collection's stored "
           "perturbations move each metric. *Reproduce a published benchmark* sets our values beside the papers' "
           "for benchmark files kept on the server. [Analyze from files](#analyze-files), at the bottom of this tab, "
           "needs no login.")


def build(ctx: engine.AppContext, user_state: gr.State, tab: gr.Tab) -> None:
    names = engine.metric_names(ctx.profile)
    login_notice("analyze", PURPOSE, RESEARCH_ROLES, user_state)
    collection, refresh, metrics, run = collection_row(
        "analyze", "Analyze", lambda: gr.CheckboxGroup(names, value=names, label="Metrics"))
    per_rating = gr.Checkbox(False, label="Each overall rating its own row (as Flickr8k papers count judgments); "
                                          "off: one row per caption, its mean rating", elem_id="analyze-per-rating")
    status = gr.Textbox(label="Status", interactive=False, elem_id="analyze-status")
    filters_note = gr.Markdown(CorrelationFilters().describe(), elem_id="analyze-filters")
    correlations = gr.Dataframe(render.empty_table(render.CORRELATION_COLUMNS),
                                label="Correlation with human ratings", interactive=False, wrap=True,
                                elem_id="analyze-correlations",  # header words and "0.512 [0.47, 0.55]" on one line
                                column_widths=["72px", "110px", "72px", *["170px"] * (len(render.CORRELATION_COLUMNS) - 3)])
    heatmap = gr.Plot(label="Kendall τc by metric and language")
    with gr.Row():
        scatter_metric = gr.Dropdown(names, value=names[0], label="Scatter: metric")
    scatter = gr.Plot(label="Metric vs human (hover shows image and caption)")
    table7 = gr.Dataframe(render.empty_table(["lang", *render.TABLE7_COLUMNS]),
                          label="Perturbations: PR-MCS Table 7 layout", interactive=False, wrap=True,
                          elem_id="analyze-table7", column_widths=render.column_widths(["lang", *render.TABLE7_COLUMNS]))
    gr.Markdown(TABLE7_READING, elem_id="analyze-table7-reading")
    drops = gr.Plot(label="Score change under perturbation")
    report_state = gr.State(None)

    def on_analyse(name, chosen, metric, each_rating, request: gr.Request, progress=gr.Progress()):
        filters = CorrelationFilters(per_rating=bool(each_rating))
        try:
            report = analyse_collection(account_id(request), name, engine.AppScorer(ctx.profile), list(chosen),
                                        filters, progress=progress)
        except (PermissionError, ValueError, LookupError) as exc:
            return user_message(exc), filters.describe(), *[gr.skip()] * 6
        heat = plots.correlation_heatmap(report.correlations, "kendall_c")
        scatter_figure = report.scatter(metric if metric in chosen else chosen[0], render.inert_captions)
        cells = correlation_cells(report.correlations)
        if report.robustness is None:
            return (f"{report.summary} No perturbed captions stored in this collection: save some from the "
                    "Perturbation lab.", filters.describe(), cells, heat, scatter_figure, None, None, report)
        table7_cells = robustness_cells(report.robustness)  # one column per operation: widths fit its headers
        return (report.summary, filters.describe(), cells, heat, scatter_figure,
                gr.Dataframe(value=table7_cells, column_widths=render.column_widths(list(table7_cells.columns))),
                plots.robustness_drop_bars(report.robustness), report)

    def on_metric(report, metric, request: gr.Request):
        if report is None or metric not in report.rows or not logged_in(request):
            return gr.skip()
        return report.scatter(metric, render.inert_captions)

    with gr.Accordion("Reproduce a published benchmark (files kept on the server)", open=False,
                      elem_id="reproduce-section"):
        gr.Markdown("Scores a benchmark's items with this server's metrics and sets each value beside the "
                    "paper's, with a 95 % interval, as `caplens analyze reproduce` does. The list holds the "
                    "benchmarks an admin put in the server's benchmark folder (`caplens analyze fetch NAME`) and "
                    "the synthetic world's. ✓ / ✗ (within ±0.1 point) only where a metric runs the published "
                    "checkpoints. A second run resumes from the stored scores.")
        with gr.Row():
            bench = gr.Dropdown([], label="Benchmark", elem_id="reproduce-benchmark")
            bench_refresh = gr.Button("Refresh list", size="sm", elem_id="reproduce-refresh")
            bench_run = gr.Button("Reproduce", variant="primary", elem_id="reproduce-button")
        bench_status = gr.Textbox(label="Status", interactive=False, elem_id="reproduce-status")
        # Widths that fit each header's longest word: squeezed, "difference" read down one letter a line.
        bench_table = gr.Dataframe(render.empty_table(TABLE_COLUMNS), label="Ours beside the paper",
                                   interactive=False, wrap=True, elem_id="reproduce-table",
                                   column_widths=render.column_widths(TABLE_COLUMNS, wide=("note",)))

    def on_benchmarks(request: gr.Request):
        if not logged_in(request):
            return gr.Dropdown(choices=[], value=None), ""
        try:
            names_found = server_benchmarks(account_id(request))
        except PermissionError:  # an annotator: the section's list stays empty (the notice above says why)
            return gr.Dropdown(choices=[], value=None), ""
        return gr.Dropdown(choices=names_found, value=names_found[0]), ""

    def on_reproduce(name, request: gr.Request, progress=gr.Progress(track_tqdm=True)):
        try:
            done = reproduce_on_server(account_id(request), name, ctx.profile)
        except Exception as exc:  # in words; an unexpected one is logged under the error id it shows
            return user_message(exc), gr.skip()
        return done.summary, done.table

    bench_refresh.click(on_benchmarks, None, [bench, bench_status], api_visibility="private")
    follow_login(user_state, on_benchmarks, [], [bench, bench_status])
    bench_run.click(on_reproduce, [bench], [bench_status, bench_table], show_progress_on=[bench_status],
                    api_visibility="private")

    follow_collections(user_state, refresh, collection, status, tab)
    forget_on_login_change(user_state, {
        correlations: render.empty_table(render.CORRELATION_COLUMNS), heatmap: None, scatter: None,
        table7: render.empty_table(["lang", *render.TABLE7_COLUMNS]), drops: None, report_state: None,
        bench_table: render.empty_table(TABLE_COLUMNS)})
    run.click(on_analyse, [collection, metrics, scatter_metric, per_rating],
              [status, filters_note, correlations, heatmap, scatter, table7, drops, report_state],
              show_progress_on=[status], api_visibility="private")  # one bar with the counts, on the status
    scatter_metric.change(on_metric, [report_state, scatter_metric], scatter, api_visibility="private")
