"""Pairwise judgments (issue 24), both sides: the Annotate tab's Compare view, where an
annotator says which of two captions of an image is better (keys 1, 2, 3), and the Pairwise
tab, where a researcher makes a collection's pairs, imports a pair file, sees each metric's
pairwise accuracy and the caption sources' Bradley–Terry ranking, and exports the judgments
in the Pascal-50S layout. Every action is one call into `annotation.studies.pairwise`."""
from __future__ import annotations

import math
import tempfile
from pathlib import Path

import gradio as gr

from annotation.studies import pairwise
from annotation.people.accounts import RESEARCH_ROLES
from annotation.errors import user_message
from app.errors import refused_in_status
from app import engine
from app import render
from app.login_notice import login_notice
from app.session import account_id, collection_row, follow_collections, forget_on_login_change, private_copies

KEYS_HELP = ("Which caption describes the image better? The captions are shown in an order of their own for you. "
             "Keys: **1** left, **2** right, **3** about the same (tie), **Alt+S** skip, **Alt+B** back.")
# 1 / 2 / 3 choose left, right, tie while the Compare view is shown and no text field has the focus.
KEYBOARD_JS = """
() => {
  if (window.caplensPairKeys) return;
  window.caplensPairKeys = true;
  const click = (id) => { const b = document.getElementById(id); if (b && !b.disabled) b.click(); };
  document.addEventListener('keydown', (e) => {
    const panel = document.getElementById('pair-panel');
    if (!panel || panel.offsetParent === null) return;
    if (e.altKey && e.key.toLowerCase() === 's') { e.preventDefault(); click('pair-skip'); return; }
    if (e.altKey && e.key.toLowerCase() === 'b') { e.preventDefault(); click('pair-back'); return; }
    const typing = ['TEXTAREA', 'INPUT'].includes(document.activeElement?.tagName)
      && document.activeElement.type !== 'range';
    if (typing || e.altKey || e.ctrlKey || e.metaKey) return;
    const target = {'1': 'pair-left', '2': 'pair-right', '3': 'pair-tie'}[e.key];
    if (target) { e.preventDefault(); click(target); }
  });
}
"""
CHOSEN = {"left": "You chose: left.", "right": "You chose: right.", "tie": "You chose: tie."}


def annotator_view(collection: gr.Dropdown) -> gr.Tab:
    """The Compare view (inside the Annotate tab's work tabs) for the chosen `collection`."""
    with gr.Tab("Compare", id="compare", elem_id="pair-panel") as tab:
        gr.Markdown(KEYS_HELP, elem_id="pair-keys")
        image = gr.Image(label="Image", interactive=False, height=260, elem_id="pair-image")
        with gr.Row():
            left = gr.Textbox(label="1 · Left caption", interactive=False, lines=3, elem_id="pair-left-text")
            right = gr.Textbox(label="2 · Right caption", interactive=False, lines=3, elem_id="pair-right-text")
        with gr.Row():
            left_button = gr.Button("1 · Left is better", variant="primary", elem_id="pair-left")
            tie_button = gr.Button("3 · Tie", elem_id="pair-tie")
            right_button = gr.Button("2 · Right is better", variant="primary", elem_id="pair-right")
        with gr.Row():
            back = gr.Button("Back", elem_id="pair-back")
            skip = gr.Button("Skip", elem_id="pair-skip")
            load = gr.Button("Load next", elem_id="pair-next")
        item_id = gr.Number(label="Pair id", interactive=False, precision=0, elem_id="pair-item-id")
        status = gr.Textbox(label="Status", interactive=False, elem_id="pair-status")

    outputs = [image, left, right, item_id, left_button, tie_button, right_button, status]

    def show(screen: pairwise.PairScreen, request: gr.Request):
        message = " ".join(part for part in (screen.message, CHOSEN.get(screen.chosen, ""), screen.progress) if part)
        buttons = [gr.Button(interactive=screen.can_judge)] * 3
        return (private_copies(request, [screen.image_file])[0], screen.left, screen.right, screen.item_id,
                *buttons, message)

    def on_pair_next(name, request: gr.Request):
        return show(pairwise.pair_screen(account_id(request), name), request)

    def on_pair_skip(name, shown, request: gr.Request):
        return show(pairwise.skip_and_next(account_id(request), name, shown), request)

    def on_pair_back(name, shown, request: gr.Request):
        return show(pairwise.earlier_pair_screen(account_id(request), name, shown), request)

    def judged(side: str):
        def on_pair_judge(name, shown, request: gr.Request):
            return show(pairwise.judge_and_next(account_id(request), name, shown, side), request)
        return on_pair_judge

    for trigger, handler, inputs in ((tab.select, on_pair_next, [collection]), (load.click, on_pair_next, [collection]),
                                     (skip.click, on_pair_skip, [collection, item_id]),
                                     (back.click, on_pair_back, [collection, item_id]),
                                     (left_button.click, judged("left"), [collection, item_id]),
                                     (right_button.click, judged("right"), [collection, item_id]),
                                     (tie_button.click, judged("tie"), [collection, item_id])):
        trigger(refused_in_status(handler, 7), inputs, outputs, api_visibility="private")
    return tab


PURPOSE = ("**Pairwise**: turn a collection into a pairwise study (annotators see one image with two of its "
           "captions in the Annotate tab's Compare view and choose the better one, or a tie), then see each "
           "metric's pairwise accuracy against the annotators' majority (the Pascal-50S measure, as "
           "`caplens analyze pascal50s --collection` computes it) and a Bradley–Terry ranking of the caption "
           "sources with 95% bootstrap intervals; export the judgments as Pascal-50S files.")
ACCURACY_HEADERS = ["metric", "HC", "HI", "HM", "MM", "mean", "pairs"]
RANKING_HEADERS = ["rank", "source", "strength", "95% interval", "wins", "comparisons"]


def _number(value, digits: int = 3):
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else round(float(value), digits)


def accuracy_rows(table) -> list[list]:
    return [[row["metric"], *[_number(row[c]) for c in ("HC", "HI", "HM", "MM", "mean")], int(row["n"])]
            for _, row in table.iterrows()]


def ranking_rows(ranking) -> list[list]:
    if ranking is None:
        return []
    rows = []
    several = ranking.table["group"].nunique() > 1  # ranked within each group; the status says why
    for _, row in ranking.table.iterrows():
        interval = ("" if math.isnan(row["low"]) else f"[{row['low']:.3f}, {row['high']:.3f}]")
        source = f"{row['system']} (group {int(row['group'])})" if several else row["system"]
        rows.append([int(row["rank"]), source, _number(row["strength"]), interval, _number(row["wins"], 1),
                     int(row["comparisons"])])
    return rows


def build(ctx: engine.AppContext, user_state: gr.State, tab: gr.Tab) -> None:
    """The Pairwise tab (researcher or admin)."""
    names = engine.metric_names(ctx.profile)
    login_notice("pairwise", PURPOSE, RESEARCH_ROLES, user_state)
    collection, refresh, metrics, run = collection_row(
        "pairwise", "Show pairwise accuracy", lambda: gr.CheckboxGroup(names, value=names, label="Metrics"))
    status = gr.Textbox(label="Status", interactive=False, elem_id="pairwise-status")
    with gr.Accordion("Pairs of this study", open=True):
        with gr.Row():
            with_references = gr.Checkbox(False, label="Also pair the references (human captions)")
            make = gr.Button("Make pairs from captions of the same image", elem_id="pairwise-make")
        gr.Markdown(pairwise.PAIR_FILE_HELP)
        with gr.Row():
            pair_file = gr.File(label="Pair file (CSV or JSONL)", elem_id="pairwise-file")
            import_button = gr.Button("Import pairs", elem_id="pairwise-import")
    accuracy = gr.Dataframe(headers=ACCURACY_HEADERS, interactive=False, label="Pairwise accuracy per metric "
                            "(share of pairs where the metric prefers the annotators' choice; metric ties count half)",
                            elem_id="pairwise-accuracy")
    ranking = gr.Dataframe(headers=RANKING_HEADERS, interactive=False,
                           label="Bradley–Terry ranking of the caption sources (strength shares sum to 1; within each "
                           "group when some sources were never compared with the others, as the status says)",
                           elem_id="pairwise-ranking")
    with gr.Row():
        export_button = gr.Button("Export judgments (Pascal-50S .mat files)", elem_id="pairwise-export")
        export_file = gr.File(label="Download", interactive=False, elem_id="pairwise-download")

    def on_pairs_make(name, references, request: gr.Request):
        try:
            return pairwise.make_pairs_for(account_id(request), name, bool(references))
        except (PermissionError, ValueError, LookupError) as exc:
            return user_message(exc)

    def on_pairs_import(name, path, request: gr.Request):
        try:
            return pairwise.import_pair_file(account_id(request), name, path)
        except (PermissionError, ValueError, LookupError, OSError, UnicodeDecodeError) as exc:
            return user_message(exc) + " Nothing was imported."

    def on_pairs_run(name, chosen, request: gr.Request, progress=gr.Progress()):
        try:
            report = pairwise.analyse_pairs(account_id(request), name, engine.AppScorer(ctx.profile), list(chosen),
                                            progress=progress)
        except (PermissionError, ValueError, LookupError) as exc:
            return gr.skip(), gr.skip(), user_message(exc)
        return accuracy_rows(report.accuracy), ranking_rows(report.ranking), report.summary

    def on_pairs_export(name, request: gr.Request):
        try:
            with tempfile.TemporaryDirectory(prefix="caplens-pairs-") as folder:
                path, summary = pairwise.pascal50s_download(account_id(request), name, Path(folder))
                download = private_copies(request, [path])[0]
        except (PermissionError, ValueError, LookupError, OSError) as exc:
            return None, user_message(exc)
        return download, (f"Exported {summary['judgments']} judgments of {summary['pairs']} pairs: "
                          "pair_pascal.mat and consensus_pascal.mat, which `caplens analyze pascal50s --pascal-dir` reads.")

    follow_collections(user_state, refresh, collection, status, tab)
    forget_on_login_change(user_state, {accuracy: render.empty_table(ACCURACY_HEADERS),
                                        ranking: render.empty_table(RANKING_HEADERS), export_file: None})
    make.click(on_pairs_make, [collection, with_references], status, api_visibility="private")
    import_button.click(on_pairs_import, [collection, pair_file], status, api_visibility="private")
    run.click(on_pairs_run, [collection, metrics], [accuracy, ranking, status], show_progress_on=[status],
              api_visibility="private")
    export_button.click(on_pairs_export, collection, [export_file, status], api_visibility="private")
