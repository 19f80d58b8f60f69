"""Failure cases: where a metric and the humans disagree most, or where a perturbation barely
moved a metric. Clicking a row (or a thumbnail) opens that item in the Score tab."""
from __future__ import annotations

import gradio as gr

from annotation.people.accounts import RESEARCH_ROLES
from annotation.lab import collection_document_frequency
from annotation.scores.collection_analysis import collection_failure_cases
from annotation.errors import user_message
from app import engine, render
from app.login_notice import login_notice
from app.session import account_id, collection_row, follow_collections, forget_on_login_change, private_copies
from app.tabs.score import COLLECTION, ScoreTab, with_pictures
from scoring.session_scoring import ScoreRow, split_references, table_records
from scoring.analysis.report import (ANY, CASE_CELLS, DISAGREE, UNMOVED, case_cells, case_filters, case_status,
                                     filter_cases)

PURPOSE = ("**Failure cases of a stored collection**: the captions where a metric and the human ratings disagree "
           "most (difference of percentile ranks within a language), or perturbed captions whose score barely "
           "moved. Click a row or a thumbnail to open the item in the Score tab.")
SHOWN = 200
THUMBNAILS = 12


# Each header word and value on one line at the 12 px of app.ui.PAGE_CSS, the number columns no
# wider: on a phone (390 px) the deciding columns stay in view, the rest scrolls beside the pinned
# two. Widths go by name, since each view shows its own columns in its own order.
CASE_WIDTHS = {"metric": "84px", "lang": "52px", "metric score": "64px", "human": "60px", "rank gap": "64px",
               "change %": "68px", "op": "84px", "candidate": "300px", "caption_id": "96px", "image_id": "110px"}


def case_widths(columns) -> list[str]:
    return [CASE_WIDTHS[c] for c in columns]


def build(ctx: engine.AppContext, user_state: gr.State, score_tab: ScoreTab, tabs: gr.Tabs, tab: gr.Tab) -> None:
    names = engine.metric_names(ctx.profile)
    login_notice("failures", PURPOSE, RESEARCH_ROLES, user_state)
    collection, refresh, mode, run = collection_row(
        "failures", "Find failure cases", lambda: gr.Radio([DISAGREE, UNMOVED], value=DISAGREE, label="Show"))
    with gr.Row():
        metric = gr.Dropdown([ANY, *names], value=ANY, label="Metric", elem_id="failures-metric")
        lang = gr.Dropdown([ANY], value=ANY, label="Language", elem_id="failures-lang")
        op = gr.Dropdown([ANY], value=ANY, label="Operation", elem_id="failures-op")
    status = gr.Textbox(label="Status", interactive=False, elem_id="failures-status")
    thumbnails = gr.Gallery(label="Top cases (click to open in Score)", columns=6, height=220,
                            allow_preview=False, elem_id="failures-gallery")
    table = gr.Dataframe(render.empty_table(CASE_CELLS), label="Cases (click a row to open it in Score)",
                         interactive=False, wrap=True, pinned_columns=2, elem_id="failures-table",
                         column_widths=case_widths(CASE_CELLS))
    all_rows = gr.State(None)
    shown_rows = gr.State(None)

    def present(rows, metric_name, lang_name, op_name, request: gr.Request):
        """Status, table, thumbnails (copies for this session) and the shown rows; NotLoggedIn
        when the session ended since the rows were found."""
        matching = filter_cases(rows, metric_name, lang_name, op_name, len(rows))
        picked = matching.head(SHOWN)
        copies = private_copies(request, list(picked["image_file"].head(THUMBNAILS)))
        gallery = [(path, f"#{i + 1}") for i, path in enumerate(copies)]
        status = case_status(rows, matching, len(picked), metric_name, lang_name, op_name)
        shown = case_cells(picked)
        return status, gr.Dataframe(shown, column_widths=case_widths(shown.columns)), gallery, picked

    def on_find(name, how, metric_name, lang_name, op_name, request: gr.Request, progress=gr.Progress()):
        try:
            rows = collection_failure_cases(account_id(request), name, engine.AppScorer(ctx.profile), names, how,
                                            progress)
        except (PermissionError, ValueError, LookupError) as exc:
            return user_message(exc), *[gr.skip()] * 7
        if rows.empty:
            hint = ("no rated captions with metric scores" if how == DISAGREE
                    else "no perturbed captions stored (save some from the Perturbation lab)")
            return f"Nothing to show: {hint}.", None, [], None, None, gr.skip(), gr.skip(), gr.skip()
        langs, ops = case_filters(rows)
        lang_name = lang_name if lang_name in langs else ANY
        op_name = op_name if op_name in ops else ANY
        try:
            status, shown, gallery, picked = present(rows, metric_name, lang_name, op_name, request)
        except PermissionError as exc:
            return user_message(exc), *[gr.skip()] * 7
        return (status, shown, gallery, rows, picked,
                gr.Dropdown(choices=langs, value=lang_name), gr.Dropdown(choices=ops, value=op_name), gr.skip())

    def on_filter(rows, metric_name, lang_name, op_name, request: gr.Request):
        try:
            return (gr.skip(),) * 4 if rows is None else present(rows, metric_name, lang_name, op_name, request)
        except PermissionError as exc:
            return user_message(exc), None, [], None

    def on_open(picked, name, evt: gr.SelectData, request: gr.Request):
        """The case in the Score tab, with CIDEr-D's document frequencies from its collection (as
        the case's own value was computed), not from the one caption opened."""
        index = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
        if picked is None or index is None or index >= len(picked):
            return (gr.skip(),) * 7
        row = picked.iloc[int(index)]
        try:
            image = private_copies(request, [row["image_file"]])
        except PermissionError:
            return (gr.skip(),) * 7
        try:
            frequencies = collection_document_frequency(account_id(request), name)
            counted = (COLLECTION, gr.Dropdown(value=name, visible=True), frequencies)
        except (PermissionError, ValueError, LookupError):
            counted = (gr.skip(),) * 3
        table = table_records([ScoreRow("", row["candidate"], split_references(row.get("references") or ""))])
        return image, with_pictures(table, image), row["lang"], gr.Tabs(selected="score"), *counted

    follow_collections(user_state, refresh, collection, status, tab)
    forget_on_login_change(user_state, {thumbnails: None, table: render.empty_table(CASE_CELLS), all_rows: None,
                                        shown_rows: None})
    run.click(on_find, [collection, mode, metric, lang, op],
              [status, table, thumbnails, all_rows, shown_rows, lang, op, metric], api_visibility="private")
    for control in (metric, lang, op):  # a second filter chosen while the first applies still counts
        control.input(on_filter, [all_rows, metric, lang, op], [status, table, thumbnails, shown_rows],
                      api_visibility="private", trigger_mode="always_last")
    open_outputs = [score_tab.files, score_tab.rows, score_tab.lang, tabs, score_tab.df_source, score_tab.df_collection,
                    score_tab.df_state]
    for source in (table, thumbnails):
        source.select(on_open, [shown_rows, collection], open_outputs, api_visibility="private").then(
            score_tab.score_fn, score_tab.inputs, score_tab.outputs, api_visibility="private")
