"""Data tab: import collections, export ratings and captions, build fine-tuning sets.

Everything here is a researcher or admin action of `annotation.transfer.transfers`, which checks the
role and packs directory outputs into a zip; the tab adds progress bars and offers each
download as a copy only this session may fetch.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import gradio as gr

from annotation.people.accounts import RESEARCH_ROLES
from annotation.errors import user_message
from annotation.transfer.transfers import export_download, finetune_download, import_upload
from app.login_notice import login_notice
from app.session import account_id, collection_choices, follow_collections, forget_on_login_change, private_copies

IMPORT_FORMATS = ["auto", "csv", "jsonl", "zip"]
EXPORT_WHAT = ["ratings", "captions", "critical"]
EXPORT_FORMATS = ["csv", "jsonl", "parquet", "hf"]
FINETUNE_KINDS = {
    "PR-MCS triplets (image, original, perturbed, language, operation)": "prmcs",
    "SPECS triplets (detail units)": "specs",
    "UMIC groups (1 positive + 4 negatives)": "umic",
    "PAC-S pairs": "pacs",
    "Human-rated set (for correlation)": "human",
}
ALL_COLLECTIONS = "(all collections)"


def _progress_callback(progress):
    """Adapt gr.Progress to the importers' progress(stage, done, total) callback."""
    def report(stage: str, done: int, total: int) -> None:
        progress((done, max(total, 1)), desc=stage)
    return report


def _collection(choice: str | None) -> str | None:
    return None if not choice or choice == ALL_COLLECTIONS else choice


def build(user_state: gr.State, tab: gr.Tab) -> None:
    login_notice("data", "**Data in and out of the annotation database**: import collections (CSV, JSONL or a "
                 "zip with images; all-or-nothing: if any row is bad nothing is written and every bad row is "
                 "listed), export ratings and captions, and build fine-tuning sets.", RESEARCH_ROLES, user_state)
    with gr.Row():
        collection = gr.Dropdown([ALL_COLLECTIONS], value=ALL_COLLECTIONS, label="Collection", allow_custom_value=True,
                                 elem_id="data-collection")
        refresh = gr.Button("↻ collections", scale=0)
    with gr.Tab("Import"):
        upload = gr.File(label="CSV, JSONL, or zip (images + manifest.jsonl/csv)", elem_id="data-import-file")
        with gr.Row():
            target = gr.Textbox(label="Into collection (default: the file name)")
            fmt = gr.Dropdown(IMPORT_FORMATS, value="auto", label="Format")
        import_button = gr.Button("Import", variant="primary", elem_id="data-import-button")
        import_report = gr.Textbox(label="Import report", interactive=False, lines=8, elem_id="data-import-report")
    with gr.Tab("Export"):
        with gr.Row():
            what = gr.Dropdown(EXPORT_WHAT, value="ratings", label="What", elem_id="data-export-what")
            export_format = gr.Dropdown(EXPORT_FORMATS, value="csv", label="Format (hf = Hugging Face dataset, zipped)",
                                        elem_id="data-export-format")
        export_button = gr.Button("Export", variant="primary", elem_id="data-export-button")
        export_file = gr.File(label="Download", interactive=False, elem_id="data-export-file")
        export_summary = gr.JSON(label="Summary")
    with gr.Tab("Fine-tuning sets"):
        with gr.Row():
            kind = gr.Dropdown(list(FINETUNE_KINDS), value=next(iter(FINETUNE_KINDS)), label="Set")
            set_format = gr.Dropdown(EXPORT_FORMATS, value="jsonl", label="Format")
            seed = gr.Number(value=0, precision=0, label="Seed")
        set_button = gr.Button("Build set", variant="primary")
        set_file = gr.File(label="Download (zip with manifest.json)", interactive=False)
        set_manifest = gr.JSON(label="Manifest")
    status = gr.Textbox(label="Status", interactive=False, elem_id="data-status")

    def on_import(path, into, import_format, request: gr.Request, progress=gr.Progress()):
        try:
            report = import_upload(account_id(request), path, into, import_format, _progress_callback(progress))
        except (PermissionError, ValueError, LookupError, OSError) as exc:
            return user_message(exc), "Import failed: nothing was written."
        return report["summary"], f"Imported into {report['collection']}."

    def on_export(export_what, chosen_format, chosen_collection, request: gr.Request, progress=gr.Progress()):
        progress(0.1, desc=f"exporting {export_what}")
        try:
            with tempfile.TemporaryDirectory(prefix="caplens-export-") as folder:
                path, summary = export_download(account_id(request), export_what, chosen_format,
                                                _collection(chosen_collection), Path(folder))
                download = private_copies(request, [path])[0]
        except (PermissionError, ValueError, LookupError, OSError) as exc:
            return None, None, user_message(exc)
        return download, summary, f"Exported {summary['rows']} rows."

    def on_set(label, chosen_format, chosen_collection, chosen_seed, request: gr.Request, progress=gr.Progress()):
        progress(0.1, desc="building the set")
        try:
            with tempfile.TemporaryDirectory(prefix="caplens-set-") as folder:
                path, manifest = finetune_download(account_id(request), FINETUNE_KINDS[label], chosen_format,
                                                   _collection(chosen_collection), chosen_seed or 0, Path(folder))
                download = private_copies(request, [path])[0]
        except (PermissionError, ValueError, LookupError, OSError) as exc:
            return None, None, user_message(exc)
        return download, manifest, f"Built {manifest['rows']} rows."

    follow_collections(user_state, refresh, collection, status, tab, leading=(ALL_COLLECTIONS,))
    forget_on_login_change(user_state, {import_report: "", export_file: None, export_summary: None, set_file: None,
                                        set_manifest: None})
    def listed_again(request: gr.Request):
        """The collection list after an import, so the new collection is there to export."""
        return collection_choices(request, (ALL_COLLECTIONS,))[0]

    import_button.click(on_import, [upload, target, fmt], [import_report, status], api_visibility="private").then(
        listed_again, None, collection, api_visibility="private")
    export_button.click(on_export, [what, export_format, collection], [export_file, export_summary, status],
                        api_visibility="private")
    set_button.click(on_set, [kind, set_format, collection, seed], [set_file, set_manifest, status],
                     api_visibility="private")
