"""Analyze from files: the `caplens analyze` measures on uploaded public benchmark files.

Each measure is one call to `scoring.analysis.run`, the orchestration `caplens analyze` uses:
the files as published are read, scored now with the process-wide scorer, and measured. The
tab only hands the uploads to `annotation.transfer.archives.gathered_uploads` (copied or unzipped, under
the zip limits, into a folder of this request that is removed when the measure ends), and
shows progress and the CSV download.
"""
from __future__ import annotations

import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Sequence

import gradio as gr
import pandas as pd

from annotation.transfer.archives import gathered_uploads
from annotation.errors import public_text, user_message
from app import engine, render
from app.uploads import download_folder
from scoring.analysis import plots, run
from scoring.csv_safe import frame_to_csv

RATING_SETS = ("flickr8k-expert", "flickr8k-cf", "composite", "capeval1k", "m-capeval1k")
HANDLED_ERRORS = (ValueError, LookupError, OSError, zipfile.BadZipFile)


@dataclass
class Outcome:
    """What one measure run shows: the result table, an optional figure and a status line."""

    table: pd.DataFrame
    figure: Any
    message: str


# --- uploads ---------------------------------------------------------------------------------


def _paths(files) -> list[Path]:
    if not files:
        return []
    listed = files if isinstance(files, (list, tuple)) else [files]
    return [Path(getattr(f, "name", f)) for f in listed if f]


@contextmanager
def uploaded(files, what: str):
    """The benchmark upload of one request: one file as it is, several files or zips in a
    folder of this request (removed afterwards); ValueError asking for it when missing."""
    with gathered_uploads(_paths(files)) as upload:
        if upload is None:
            raise ValueError(f"Upload the {what}.")
        yield upload


def image_folder(images):
    """The folder that relative image paths resolve against (the uploaded images, unzipped,
    removed afterwards), or None when no images were uploaded (image metrics then say so)."""
    return gathered_uploads(_paths(images), folder=True, prefix="caplens-images-")


def _progress(progress, fraction: float, desc: str) -> None:
    if progress is not None:
        progress(fraction, desc=desc)


# --- measures (`scoring.analysis.run`, as `caplens analyze ...` runs them) --------------------


def _measure(profile: str, measure, files, what: str, images, metrics, progress, figure=None,
             **options) -> Outcome:
    """`measure(scorer, upload, metrics, ...)` of `scoring.analysis.run` with the uploaded images
    (without them, image metrics score nothing and say so)."""
    with uploaded(files, what) as upload, image_folder(images) as root:
        _progress(progress, 0.2, "scoring")
        measured = measure(engine.AppScorer(profile), upload, metrics, image_root=root,
                           with_images=root is not None, **options)
    return Outcome(measured.table, figure(measured.table) if figure else None, measured.summary())


def correlation_from_files(profile: str, dataset: str, files, images, metrics, *, n_boot: int = 200,
                           seed: int = 0, progress=None) -> Outcome:
    """Caption-level correlation of each metric with a public rating set's human scores."""
    return _measure(profile, partial(run.rating_correlation, dataset=dataset),
                    files, f"{dataset} rating file(s)", images, metrics, progress,
                    lambda table: plots.correlation_heatmap(table, "kendall_c"), n_boot=n_boot, seed=seed)


def length_from_files(profile: str, dataset: str, files, images, metrics, combine_short: str | None = None,
                      combine_long: str | None = None, threshold: int = 60, progress=None) -> Outcome:
    """Correlation per caption-length bucket (SPECS Figure 3), with SPECS' combined metric
    (short metric under `threshold` tokens, long metric above) when both are chosen."""
    combine = (combine_short, combine_long) if combine_short and combine_long else None
    return _measure(profile, partial(run.rating_length_buckets, dataset=dataset),
                    files, f"{dataset} rating file(s)", images, metrics, progress,
                    lambda table: plots.length_bucket_lines(table, "pearson"), combine=combine, threshold=threshold)


def pascal50s_from_files(profile: str, files, images, metrics, *, n_references: int = 5, seed: int = 0,
                         progress=None) -> Outcome:
    """Pascal-50S pairwise accuracy (HC, HI, HM, MM, mean) from pair_pascal.mat and
    consensus_pascal.mat (uploaded together or as a zip)."""
    return _measure(profile, run.pascal50s, files, "pair_pascal.mat and consensus_pascal.mat", images,
                    metrics, progress, n_references=n_references, seed=seed)


def foil_from_files(profile: str, files, images, metrics, *, n_references: int = 4, seed: int = 0,
                    progress=None) -> Outcome:
    """FOIL accuracy: share of (correct, foil) caption pairs where the correct one scores higher."""
    return _measure(profile, run.foil, files, "FOIL annotation file (foilv1.0_test_2017.json)",
                    images, metrics, progress, n_references=n_references, seed=seed)


def specificity_from_files(profile: str, files, images, metrics, *, seed: int = 0, progress=None) -> Outcome:
    """Specificity rates SR_pos / SR_neg (SPECS eq. 1-2) of a caption CSV split into triplets."""
    return _measure(profile, run.specificity, files, "caption CSV", images, metrics, progress, seed=seed)


def retrieval_from_files(profile: str, files, images, metric: str, *, langs: Sequence[str] | None = None,
                         reference_lang: str = "en", progress=None) -> Outcome:
    """COCO-SM text-to-image Recall@1/5/10 per language and NDCG@20 against `reference_lang`."""
    if not metric:
        raise ValueError("Choose the metric whose encoders embed (e.g. MCS or CLIP-S).")
    with uploaded(files, "COCO-SM meta file (meta/google.json, bing.json or nllb.json)") as meta, \
            image_folder(images) as root:
        if meta.is_dir():
            raise ValueError("Upload one COCO-SM meta file.")
        if root is None:
            raise ValueError("Upload a zip of the COCO images the meta file names.")
        _progress(progress, 0.2, "embedding captions and images")
        measured = run.coco_sm_retrieval(engine.AppScorer(profile), meta, metric, langs=langs, image_root=root,
                                         reference_lang=reference_lang)
    return Outcome(measured.table, None, measured.summary())


def csv_download(table: pd.DataFrame, name: str) -> str:
    with download_folder() as folder:
        return str(frame_to_csv(table, folder / f"{name}.csv"))


def run_safely(measure, name: str, *args, **kwargs):
    """(status, table, figure, csv path) of one measure; a bad upload becomes a status line.
    Neither line names a server path (the upload folder, the data directory)."""
    try:
        outcome = measure(*args, **kwargs)
    except HANDLED_ERRORS as exc:
        return f"Could not analyze: {user_message(exc)}", None, None, None
    return public_text(outcome.message), outcome.table, outcome.figure, csv_download(outcome.table, name)


# --- layout ----------------------------------------------------------------------------------


def _outputs(name: str, with_plot: bool):
    status = gr.Textbox(label="Status", interactive=False, elem_id=f"files-{name}-status")
    # Hidden until a result fills it: an empty Dataframe would show Gradio's "1 | 2 | 3" headers.
    table = gr.Dataframe(label="Result", interactive=False, wrap=True, visible=False, elem_id=f"files-{name}-table")
    plot = gr.Plot(label="Figure") if with_plot else None
    download = gr.File(label="Download CSV", interactive=False)
    return status, table, plot, download


def build(ctx: engine.AppContext) -> None:
    names = engine.metric_names(ctx.profile)
    default = [m for m in ("CLIP-S", "BLEU-4") if m in names] or names[:1]
    with gr.Accordion("Analyze from files: public benchmarks as published", open=False, elem_id="analyze-files"):
        gr.Markdown("Upload a benchmark in its published format; the chosen metrics score it now with this "
                    "app's profile. Image metrics need the images as a zip whose paths match the file's "
                    "(otherwise they report unavailable). The same measures as `caplens analyze`.")
        with gr.Tab("Human-judgment correlation"):
            corr_set = gr.Dropdown(list(RATING_SETS), value=RATING_SETS[0], label="Rating set")
            corr_files = gr.File(label="Rating file(s) or a zip of them", file_count="multiple",
                                 elem_id="files-correlation-upload")
            corr_images = gr.File(label="Images (zip, optional)", file_count="multiple")
            corr_metrics = gr.CheckboxGroup(names, value=default, label="Metrics")
            corr_run = gr.Button("Correlate", variant="primary", elem_id="files-correlation-button")
            corr_out = _outputs("correlation", True)
        with gr.Tab("Length buckets"):
            len_set = gr.Dropdown(list(RATING_SETS), value=RATING_SETS[0], label="Rating set")
            len_files = gr.File(label="Rating file(s) or a zip of them", file_count="multiple")
            len_images = gr.File(label="Images (zip, optional)", file_count="multiple")
            len_metrics = gr.CheckboxGroup(names, value=default, label="Metrics")
            with gr.Row():
                len_short = gr.Dropdown([None, *names], value=None, label="Combined metric: below the threshold")
                len_long = gr.Dropdown([None, *names], value=None, label="Combined metric: above the threshold")
                len_threshold = gr.Number(value=60, precision=0, label="Threshold (tokens)")
            len_run = gr.Button("Bucket by length", variant="primary")
            len_out = _outputs("length", True)
        with gr.Tab("Pascal-50S"):
            pascal_files = gr.File(label="pair_pascal.mat and consensus_pascal.mat (or a zip)", file_count="multiple",
                                   elem_id="files-pascal50s-upload")
            pascal_images = gr.File(label="Images (zip, optional)", file_count="multiple")
            pascal_metrics = gr.CheckboxGroup(names, value=[m for m in ("BLEU-1", "CIDEr") if m in names] or default,
                                              label="Metrics")
            pascal_run = gr.Button("Pairwise accuracy", variant="primary", elem_id="files-pascal50s-button")
            pascal_out = _outputs("pascal50s", False)
        with gr.Tab("FOIL"):
            foil_files = gr.File(label="foilv1.0_test_2017.json", file_count="multiple")
            foil_images = gr.File(label="Images (zip, optional)", file_count="multiple")
            foil_metrics = gr.CheckboxGroup(names, value=default, label="Metrics")
            foil_refs = gr.Radio([1, 4], value=4, label="References per pair")
            foil_run = gr.Button("FOIL accuracy", variant="primary")
            foil_out = _outputs("foil", False)
        with gr.Tab("Specificity (SPECS)"):
            spec_files = gr.File(label="Caption CSV (candidate [, lang, image, image_id])", file_count="multiple")
            spec_images = gr.File(label="Images (zip, optional)", file_count="multiple")
            spec_metrics = gr.CheckboxGroup(names, value=default, label="Metrics")
            spec_run = gr.Button("Specificity rates", variant="primary")
            spec_out = _outputs("specificity", False)
        with gr.Tab("COCO-SM retrieval"):
            ret_files = gr.File(label="COCO-SM meta file (meta/google.json ...)", file_count="multiple")
            ret_images = gr.File(label="COCO images (zip)", file_count="multiple")
            ret_metric = gr.Dropdown(names, value="MCS" if "MCS" in names else names[0], label="Embedding metric")
            ret_reference = gr.Textbox(value="en", label="Reference language for NDCG@20")
            ret_run = gr.Button("Retrieve", variant="primary")
            ret_out = _outputs("retrieval", False)

    profile = ctx.profile

    def outputs(group):
        return [component for component in group if component is not None]

    def shown(result, with_plot: bool):
        status, table, figure, path = result
        table = gr.Dataframe(value=render.rounded_table(table), visible=table is not None,
                             column_widths=None if table is None else render.column_widths(list(table.columns)))
        return (status, table, figure, path) if with_plot else (status, table, path)

    def on_correlation(dataset, files, images, metrics, progress=gr.Progress()):
        return shown(run_safely(correlation_from_files, "correlation", profile, dataset, files, images, metrics,
                                progress=progress), True)

    def on_length(dataset, files, images, metrics, short, long, threshold, progress=gr.Progress()):
        return shown(run_safely(length_from_files, "length-buckets", profile, dataset, files, images, metrics,
                                short, long, int(threshold or 60), progress=progress), True)

    def on_pascal(files, images, metrics, progress=gr.Progress()):
        return shown(run_safely(pascal50s_from_files, "pascal50s", profile, files, images, metrics,
                                progress=progress), False)

    def on_foil(files, images, metrics, references, progress=gr.Progress()):
        return shown(run_safely(foil_from_files, "foil", profile, files, images, metrics,
                                n_references=int(references), progress=progress), False)

    def on_specificity(files, images, metrics, progress=gr.Progress()):
        return shown(run_safely(specificity_from_files, "specificity", profile, files, images, metrics,
                                progress=progress), False)

    def on_retrieval(files, images, metric, reference, progress=gr.Progress()):
        return shown(run_safely(retrieval_from_files, "retrieval", profile, files, images, metric,
                                reference_lang=(reference or "en").strip(), progress=progress), False)

    private = dict(api_visibility="private")
    corr_run.click(on_correlation, [corr_set, corr_files, corr_images, corr_metrics], outputs(corr_out), **private)
    len_run.click(on_length, [len_set, len_files, len_images, len_metrics, len_short, len_long, len_threshold],
                  outputs(len_out), **private)
    pascal_run.click(on_pascal, [pascal_files, pascal_images, pascal_metrics], outputs(pascal_out), **private)
    foil_run.click(on_foil, [foil_files, foil_images, foil_metrics, foil_refs], outputs(foil_out), **private)
    spec_run.click(on_specificity, [spec_files, spec_images, spec_metrics], outputs(spec_out), **private)
    ret_run.click(on_retrieval, [ret_files, ret_images, ret_metric, ret_reference], outputs(ret_out), **private)
