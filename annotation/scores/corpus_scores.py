"""Scores of a `caplens score-corpus` run stored in a collection, for the app's analysis views.

Each scored row becomes (or is matched to) a candidate caption of the collection, and its
scores are stored in the MetricScore cache under the run's checkpoint hash, which is the
fingerprint the app looks scores up by (`scoring.fingerprint.score_fingerprint`): the
analysis views of a scorer with the same profile and checkpoints read them instead of
scoring again.

A row matches a caption of the collection whose external id is `corpus_caption_id(model, id)`,
or is the row's id with the same source model (a manifest imported with `caplens db import`).
Rows without a matching caption are imported from the run's manifest first (all or nothing,
through `annotation.transfer.importers.import_rows`); rows whose image is a URL cannot be and are
counted as skipped.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from annotation.people.accounts import RESEARCH_ROLES, require_role
from annotation.captions import get_or_create_collection
from annotation.transfer.importers import import_rows
from annotation.scores.score_store import cache_metric_scores
from db.models import Caption, Collection, User


@dataclass
class CorpusImportReport:
    collection: str
    captions_matched: int  # already in the collection
    captions_imported: int
    rows_skipped: int  # scored rows not imported: image given as a URL, or no longer in the manifest
    scores_stored: int

    def to_dict(self) -> dict:
        return asdict(self)


def corpus_caption_id(model: str, row_id: str) -> str:
    """External id of the caption a corpus row becomes: ids repeat across models."""
    return f"{model}/{row_id}" if model else row_id


def _collection_captions(session: Session, collection: Collection) -> dict[tuple[str, str], int]:
    """(model, row id) -> caption id for the collection's candidate captions."""
    found: dict[tuple[str, str], int] = {}
    query = select(Caption.id, Caption.external_id, Caption.source_model).where(
        Caption.collections.any(Collection.id == collection.id), Caption.kind != "reference",
        Caption.external_id.is_not(None))
    for caption_id, external_id, model in session.execute(query):
        found.setdefault((model or "", external_id), caption_id)
        if model and external_id.startswith(f"{model}/"):
            found[(model, external_id[len(model) + 1:])] = caption_id
    return found


def _manifest_rows(out: Path, wanted: set[tuple[str, str]]) -> tuple[list[dict], Path]:
    """Importer rows for the wanted (model, id) of the run's manifest that have a local image."""
    from scoring.corpus import read_manifest, run_manifest

    manifest = run_manifest(out)
    rows = []
    for row in read_manifest(manifest):
        if (row.model, row.id) not in wanted or row.problem:
            continue
        wanted.discard((row.model, row.id))
        if "://" in row.image:
            continue
        rows.append({"image": Path(os.path.relpath(row.image, manifest.image_root)).as_posix(),
                     "caption": row.candidate, "language": row.lang, "kind": "candidate",
                     "caption_id": corpus_caption_id(row.model, row.id), "references": row.references,
                     **({"model": row.model} if row.model else {})})
    return rows, manifest.image_root


def import_corpus_scores(session: Session, user: User, out, collection: str) -> CorpusImportReport:
    """Store the scores of the score-corpus run in `out` for `collection` (created if needed),
    importing the scored rows the collection lacks. Researcher or admin only."""
    from scoring.corpus import current_scores

    require_role(user, *RESEARCH_ROLES)
    out = Path(out)
    scores = current_scores(out)
    if scores.empty:
        raise ValueError(f"{out} holds no scores yet")
    target = get_or_create_collection(session, user, collection)
    known = _collection_captions(session, target)
    wanted = {key for key in zip(scores["model"], scores["id"]) if key not in known}
    matched = len(set(zip(scores["model"], scores["id"]))) - len(wanted)
    rows, image_root = _manifest_rows(out, set(wanted)) if wanted else ([], out)
    if rows:
        import_rows(session, user, rows, collection=target.name, base_dir=image_root,
                    source_name=f"score-corpus {out.name}")
        known = _collection_captions(session, target)
    stored = 0
    for (metric, checkpoint), group in scores.groupby(["metric", "checkpoint_hash"], sort=False):
        values = {known[(m, i)]: v for m, i, v in zip(group["model"], group["id"], group["score"]) if (m, i) in known}
        cache_metric_scores(session, metric, checkpoint, values)
        stored += len(values)
    return CorpusImportReport(target.name, matched, len(rows), len(wanted) - len(rows), stored)
