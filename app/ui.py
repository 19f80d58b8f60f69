"""The CapLens Blocks layout: a banner naming the metric profile, one tab per task, and the
named API endpoints. Each tab lives in `app/tabs/`; all logic is in the libraries."""
from __future__ import annotations

import gradio as gr

from annotation.warmup import warm_up_state
from app import api, engine
from app.errors import guard_events
from app.session import bind_login
from app.tabs import admin, agreement, analyze, analyze_files, annotate, data, failures, pairwise, perturb, score, train

TITLE = "CapLens"
# Gradio's cache of uploads and downloads is swept every 5 minutes of the files older than 15
# minutes (and emptied when the server stops), so what strangers upload is gone within minutes;
# `app.serve.sweep_own_files` does the same for the copies CapLens hands to one session.
CACHE_SWEEP = (300, 900)
# The page's own CSS (`app.serve.launch_kwargs` passes it to launch). On a phone (the columns
# stack) the Score tab's left column lets its two parts take their own places, so that the
# results come between the rows table with its Score button and the other inputs, and the rows
# table's headers and cells are set smaller, so that each word of a header or a file name fits
# its column (326 px for four).
PAGE_CSS = """
#failures-table span.header, #failures-table span.text { font-size: 12px; }
/* A file input holding a file shows its upload and clear buttons over the label's last words. */
#score-rows-file:has(.icon-button-wrapper) [data-testid="block-label"],
#score-images:has(.icon-button-wrapper) [data-testid="block-label"] { padding-right: 96px; }
/* Score rows: long references show 8 lines (all of them while edited), so a row's image name,
   candidate and picture stay in view beside them. */
#score-rows .body-cell:nth-child(3) span.text { display: -webkit-box; -webkit-line-clamp: 8;
  -webkit-box-orient: vertical; overflow: hidden; }
@media (max-width: 640px) {
  .modebar-container { display: none; }  /* Plotly's toolbar covered the charts' labels */
  #score-rows th span.header, #score-rows span.text { font-size: 12px; }
  #score-inputs { display: contents !important; }
  #score-inputs-top { order: 1; flex: 1 1 100% !important; min-width: 0 !important; }
  #score-results { order: 2; flex: 1 1 100% !important; min-width: 0 !important; }
  #score-options { order: 3; flex: 1 1 100% !important; min-width: 0 !important; }
}
"""

# Words Gradio's own interface asks its translations for but has none of: the file input's
# "upload more" button showed its key, `common.upload`, as its tooltip, and a screen reader
# heard `common.complete` from the status region after every event.
PAGE_WORDS = {
    "en": {"common.upload": "Upload", "common.complete": "Complete"},
    "de": {"common.upload": "Hochladen", "common.complete": "Fertig"},
    "fr": {"common.upload": "Téléverser", "common.complete": "Terminé"},
    "es": {"common.upload": "Subir", "common.complete": "Completado"},
    "ja": {"common.upload": "アップロード", "common.complete": "完了"},
}


def page_words() -> gr.I18n:
    return gr.I18n(**PAGE_WORDS)


def build_app(ctx: engine.AppContext) -> gr.Blocks:
    with gr.Blocks(title=TITLE, delete_cache=CACHE_SWEEP) as demo:
        gr.Markdown(f"# {TITLE}\nInspect, stress-test and annotate image-caption evaluation metrics.")
        gr.Markdown(engine.banner_markdown(ctx), elem_id="profile-banner")
        # While the server warms up (annotation.warmup) a line under the banner says how far.
        warm_up = gr.Markdown("", elem_id="warm-up-status")
        warm_up_timer = gr.Timer(2.0)
        # Whom the page shows as logged in ({name, role}); tabs refresh when it changes. Actions
        # never trust it: each one acts as the session token its own request carries (app.session).
        user_state = gr.State(None)
        with gr.Tabs(selected="score") as tabs:
            with gr.Tab("Score", id="score"):
                score_tab = score.build(ctx, user_state)
            with gr.Tab("Perturbation lab", id="perturb"):
                perturb.build(ctx)
            with gr.Tab("Annotate", id="annotate") as annotate_tab:
                restore_login = annotate.build(user_state)
            with gr.Tab("Analyze", id="analyze") as analyze_tab:
                analyze.build(ctx, user_state, analyze_tab)
                analyze_files.build(ctx)
            with gr.Tab("Failure cases", id="failures") as failures_tab:
                failures.build(ctx, user_state, score_tab, tabs, failures_tab)
            with gr.Tab("Data", id="data") as data_tab:
                data.build(user_state, data_tab)
            with gr.Tab("Train", id="train"):
                train.build(ctx, user_state, score_tab.metrics)
            with gr.Tab("Study", id="agreement") as study_tab:
                agreement.build(user_state, study_tab)
            with gr.Tab("Pairwise", id="pairwise") as pairwise_tab:
                pairwise.build(ctx, user_state, pairwise_tab)
            with gr.Tab("Admin", id="admin"):
                admin.build(user_state)
        bind_login(user_state)
        api.build(ctx)
        restore_login(demo, annotate_tab)
        demo.load(None, None, None, js=annotate.KEYBOARD_JS)
        demo.load(None, None, None, js=pairwise.KEYBOARD_JS, api_visibility="private")
        demo.load(None, None, None, js=score.ROWS_DROP_JS, api_visibility="private")
        def on_warm_up_tick():
            line = warm_up_state().line()
            return line, gr.Timer(active=bool(line))

        warm_up_timer.tick(on_warm_up_tick, None, [warm_up, warm_up_timer], api_visibility="private",
                           show_progress="hidden")
        # Metric versions registered by training since the app started appear after a reload.
        demo.load(lambda: gr.CheckboxGroup(choices=engine.metric_names(ctx.profile)), None, score_tab.metrics,
                  api_visibility="private")
    return guard_events(demo)
