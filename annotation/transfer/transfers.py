"""Import an uploaded file, and export tables or build fine-tuning sets as one downloadable
file, each one transaction as the acting account (`annotation.people.acting`).

Downloads are written into the caller's folder for that download, as one file: a directory
output (a Hugging Face dataset, a fine-tuning set) is packed into a zip; the working files
are removed.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Callable

from annotation.people.acting import acting
from annotation.transfer.exporters import export_table
from annotation.transfer.finetune_sets import build_finetune_set
from annotation.transfer.importers import import_file
from annotation.captions import get_collection

EXPORT_SUFFIXES = {"csv": ".csv", "jsonl": ".jsonl", "parquet": ".parquet", "hf": ""}


def import_upload(account_id: int | None, path: str | None, collection: str | None, fmt: str | None = None,
                  progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Import `path` (CSV, JSONL, or a zip of images with a manifest) all or nothing into
    `collection` (default: named after the file); the import report as a dict, naming the
    upload by its file name (never the server's folder it was uploaded to), and in words as
    `summary`."""
    if not path:
        raise ValueError("Upload a file to import (CSV, JSONL, or a zip of images with a manifest).")
    with acting(account_id, read_only=True) as (session, user):  # the import commits its own short batches
        report = import_file(session, user, path, collection=(collection or "").strip() or None,
                             fmt=None if fmt in (None, "auto") else fmt, progress=progress, commit_batches=True)
        report = report.to_dict() | {"source": Path(path).name}
    return report | {"summary": import_summary(report)}


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


def import_summary(report: dict) -> str:
    """An import report (`import_upload`'s dict) in words, every count of it named."""
    c = report["counts"]
    written = [_count(c.get("captions", 0), "caption"), _count(c.get("references", 0), "reference"),
               _count(c.get("ratings", 0), "rating"), _count(c.get("critical_annotations", 0), "critical-object annotation")]
    lines = [f"Imported {report['source']} ({report['format']}, {_count(c.get('rows', 0), 'row')}) into "
             f"'{report['collection']}' as import #{report['import_id']}.",
             "Written: " + ", ".join(written) + ".",
             f"Images: {c.get('images_new', 0)} new, {c.get('images_existing', 0)} already stored."]
    if c.get("annotators_created"):
        lines.append(f"{_count(c['annotators_created'], 'annotator account')} created for the file's annotator "
                     "names, without a login.")
    return "\n".join(lines)


def _downloadable(path: Path, folder: Path) -> str:
    """`path` as one file in `folder`: a directory zipped, a file moved."""
    if path.is_dir():
        return shutil.make_archive(str(folder / path.name), "zip", root_dir=path)
    return str(shutil.move(path, folder / path.name))


def export_download(account_id: int | None, what: str, fmt: str, collection: str | None,
                    folder: Path) -> tuple[str, dict]:
    """(file in `folder` to download, summary) of the `what` table ("ratings" or "captions") of
    one collection, or of all when `collection` is None; the working files are removed."""
    with tempfile.TemporaryDirectory(prefix=".export-", dir=folder) as staging:
        out = Path(staging) / f"{what}{EXPORT_SUFFIXES[fmt]}"
        with acting(account_id, read_only=True) as (session, user):
            chosen = get_collection(session, collection) if collection else None
            summary = export_table(session, user, what, out, fmt, collection=chosen)
        download = _downloadable(out, folder)
    return download, {**summary, "path": Path(download).name}


def finetune_download(account_id: int | None, kind: str, fmt: str, collection: str | None,
                      seed: int, folder: Path) -> tuple[str, dict]:
    """(zip in `folder` to download, manifest) of a fine-tuning set of one collection, or of
    all; the working files are removed."""
    with tempfile.TemporaryDirectory(prefix=".finetune-", dir=folder) as staging:
        out = Path(staging) / f"{kind}-set"
        with acting(account_id, read_only=True) as (session, user):
            chosen = get_collection(session, collection) if collection else None
            manifest = build_finetune_set(session, user, kind, out, collection=chosen, fmt=fmt, seed=int(seed))
        return _downloadable(out, folder), manifest
