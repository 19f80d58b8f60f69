"""Stored metric scores of a collection and the collection views the analysis takes.

The MetricScore table keeps one value per caption, metric and score fingerprint
(`scoring.fingerprint.score_fingerprint`: checkpoints, every metric setting and CIDEr-D's
document frequencies), so a value is never served for another checkpoint, setting or IDF;
CIDEr-D values that have no fingerprint (no document frequencies) are not stored.
`collection_scores` is what Analyze and Failure cases show: one row per caption, read from the
MetricScore cache under the scorer's score fingerprints and scored now only where no value
is stored. `into_collection` turns a public rating set into a collection through the
all-or-nothing importer.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from annotation.people.accounts import RESEARCH_ROLES, require_role
from annotation.captions import get_collection, in_collection
from annotation.transfer.exporters import captions_table, ratings_table
from annotation.transfer.importers import import_rows
from db.models import Caption, MetricScore, utcnow
from scoring.analysis.report import metric_languages
from scoring.analysis.robustness import ORIGINAL
from scoring.analysis.tables import RATING_DIMENSIONS, import_rows_for, score_columns
from scoring.api import ScoreItem
from scoring.fingerprint import score_fingerprint


SCORE_BATCH = 128  # captions per scorer call, so progress can be reported while scoring


Progress = Callable[..., object]


def cache_metric_scores(session: Session, metric: str, checkpoint_fingerprint: str,
                        values: dict[int, float | None]) -> None:
    """Store metric values per caption id for one checkpoint (replacing older values for it)."""
    if not metric or not checkpoint_fingerprint:
        raise ValueError("metric name and checkpoint fingerprint are required")
    existing = {s.caption_id: s for s in session.scalars(select(MetricScore).where(
        MetricScore.metric == metric, MetricScore.checkpoint_fingerprint == checkpoint_fingerprint,
        MetricScore.caption_id.in_(list(values))))}
    for caption_id, value in values.items():
        value = None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
        if caption_id in existing:
            existing[caption_id].value = value
            existing[caption_id].computed_at = utcnow()
        else:
            session.add(MetricScore(caption_id=caption_id, metric=metric,
                                    checkpoint_fingerprint=checkpoint_fingerprint, value=value))
    session.flush()


def cached_metric_scores(session: Session, metric: str, checkpoint_fingerprint: str,
                         caption_ids: Iterable[int]) -> dict[int, float | None]:
    """Cached values for this metric and checkpoint; caption ids without one are absent."""
    rows = session.execute(select(MetricScore.caption_id, MetricScore.value).where(
        MetricScore.metric == metric, MetricScore.checkpoint_fingerprint == checkpoint_fingerprint,
        MetricScore.caption_id.in_(list(caption_ids)))).all()
    return {caption_id: value for caption_id, value in rows}


def stored_scores(session: Session, caption_ids: Iterable[int]) -> dict[str, dict[int, float | None]]:
    """Every stored metric's values for these captions, {metric: {caption_id: value}}. Where a
    metric was stored for several checkpoints, the fingerprint that covers most of the captions
    (the newest among equals) is used, so one metric's values come from one checkpoint."""
    ids = list(caption_ids)
    columns = select(MetricScore.metric, MetricScore.checkpoint_fingerprint, MetricScore.caption_id,
                     MetricScore.value, MetricScore.computed_at)
    rows = [row for start in range(0, len(ids), 10_000)  # SQLite allows 32,766 bound parameters
            for row in session.execute(columns.where(MetricScore.caption_id.in_(ids[start:start + 10_000])))]
    by_print: dict[tuple[str, str], dict[int, float | None]] = {}
    newest: dict[tuple[str, str], object] = {}
    for metric, fingerprint, caption_id, value, computed_at in rows:
        by_print.setdefault((metric, fingerprint), {})[caption_id] = value
        newest[(metric, fingerprint)] = max(newest.get((metric, fingerprint), computed_at), computed_at)
    chosen: dict[str, tuple[str, str]] = {}
    for key in by_print:
        best = chosen.get(key[0])
        if best is None or (len(by_print[key]), newest[key]) > (len(by_print[best]), newest[best]):
            chosen[key[0]] = key
    return {metric: by_print[key] for metric, key in sorted(chosen.items())}



def into_collection(session, user, table: pd.DataFrame, collection: str, image_root, *,
                    scale: tuple[float, float] | None = None, source_name: str | None = None):
    """Import a tidy rating table as `collection` (all or nothing); returns the ImportReport."""

    rows = import_rows_for(table, image_root, scale=scale)
    return import_rows(session, user, rows, collection=collection, base_dir=Path(image_root),
                       source_name=source_name or collection)


def collection_table(session, user, collection: str) -> pd.DataFrame:
    """One row per rating of `collection`: human (overall, in [0, 1]), lang, item_id,
    image_id, candidate, references, rater, system, collection, and one column per cached
    metric (named `M`, or `M@fingerprint` when a metric was cached for several checkpoints)."""

    rows = ratings_table(session, user, get_collection(session, collection))
    if not rows:
        raise ValueError(f"collection {collection!r} has no ratings")
    frame = pd.DataFrame(rows)
    renamed = frame.rename(columns={
        "overall": "human", "language": "lang", "caption_id": "item_id", "caption": "candidate",
        "annotator": "rater", "source_model": "system",
    })
    renamed["image_id"] = frame["image_external_id"].fillna(frame["image_sha256"])
    renamed["collection"] = collection
    scores = score_columns(renamed)
    keep = ["collection", "lang", "image_id", "item_id", "candidate", "references", "human", "rater", "system",
            *[d for d in RATING_DIMENSIONS if d in renamed], *scores]
    return renamed[keep].rename(columns=scores)


def collection_robustness_scores(session, user, collection: str, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Long robustness table of `collection`: each perturbed caption (kind `perturbed`, with its
    operation) and its parent as `original`, with their cached metric scores."""

    frame = pd.DataFrame(captions_table(session, user, get_collection(session, collection)))
    if frame.empty:
        raise ValueError(f"collection {collection!r} has no captions")
    scores = score_columns(frame)
    frame = frame.rename(columns=scores)
    names = [n for n in scores.values() if metrics is None or n in metrics]
    perturbed = frame[(frame["kind"] == "perturbed") & frame["parent_caption_id"].notna()]
    if perturbed.empty:
        raise ValueError(f"collection {collection!r} has no perturbed captions")
    parents = frame[frame["caption_id"].isin(perturbed["parent_caption_id"].astype(int))]
    rows = []
    for metric in names:
        for _, caption in parents.iterrows():
            rows.append(dict(item_id=caption["caption_id"], lang=caption["language"], op=ORIGINAL,
                             text=caption["caption"], metric=metric, score=caption[metric]))
        for _, caption in perturbed.iterrows():
            rows.append(dict(item_id=int(caption["parent_caption_id"]), lang=caption["language"],
                             op=caption["perturbation_op"], text=caption["caption"], metric=metric,
                             score=caption[metric]))
    return pd.DataFrame(rows, columns=["item_id", "lang", "op", "text", "metric", "score"])


def _score_item(row: dict):

    return ScoreItem(image=row["image_file"], candidate=row["caption"], references=list(row["references"]),
                     lang=row["language"], image_id=row["image_sha256"])


def _document_frequency(captions: list[dict]):
    """CIDEr-D document frequencies of the references of `captions`' images, each image once;
    None where they cannot be computed (no references, or no Java: CIDEr then says why)."""
    from scoring.metrics.base import MetricUnavailable
    from scoring.metrics.coco import reference_document_frequency

    sets = {(row["image_sha256"], tuple(row["references"])) for row in captions if row["references"]}
    if not sets:
        return None
    try:
        return reference_document_frequency([list(refs) for _, refs in sorted(sets)])
    except MetricUnavailable:
        return None


def _score_keys(scorer, names: Sequence[str], captions: list[dict]):
    """({metric: its score_fingerprint, or None where its values must not be stored}, the CIDEr-D
    document frequencies of `captions`' images or None). CIDEr-D takes its IDF from every image
    of the request, not from each batch of SCORE_BATCH captions (a caption's value would then
    depend on its batch), and is keyed by those frequencies: another set of images is another
    IDF, so another value. Without frequencies (no references, no Java) it is not stored."""
    cider = any(scorer.registry.metrics[name].family == "cider" for name in names)
    frequencies = _document_frequency(captions) if cider else None
    return {name: score_fingerprint(scorer, name, frequencies) for name in names}, frequencies


def _cached_or_scored(session, scorer, captions: list[dict], metrics: Sequence[str],
                      progress: Progress | None = None) -> tuple[dict[str, dict[int, float | None]], dict[str, str]]:
    """Values of `metrics` for `captions` by caption id: read from MetricScore under each
    metric's score fingerprint, and only captions without a stored value are scored (in
    batches) and stored. Returns ({metric: {caption_id: value}}, {metric: reason} for metrics
    that cannot run)."""

    names = [scorer.canonical_name(m) for m in metrics]
    ids = [row["caption_id"] for row in captions]
    keys, corpus = _score_keys(scorer, names, captions)
    values = {name: cached_metric_scores(session, name, keys[name], ids) if keys[name] else {} for name in names}
    missing = [row for row in captions if any(row["caption_id"] not in values[name] for name in names)]
    cached = len(captions) - len(missing)
    unavailable: dict[str, str] = {}
    extra = {} if corpus is None else {"cider_document_frequency": corpus}
    report = _progress_reporter(progress, len(captions), cached)
    for start in range(0, len(missing), SCORE_BATCH):
        chunk = missing[start:start + SCORE_BATCH]
        todo = [name for name in names if name not in unavailable
                and any(row["caption_id"] not in values[name] for row in chunk)]
        if report is not None:
            report(start, len(chunk))
        for name, result in scorer.score([_score_item(row) for row in chunk], todo, **extra).items():
            if result.unavailable:
                unavailable[name] = result.unavailable
                continue
            scored = {row["caption_id"]: value for row, value in zip(chunk, result.values)}
            if keys[name] is not None:
                cache_metric_scores(session, name, keys[name], scored)
            values[name].update(scored)
    if report is not None and missing:
        report(len(missing), 0)
    return values, unavailable


def _progress_reporter(progress: Progress | None, total: int, cached: int):
    """`report(done, batch)` for `progress`, with counts of the captions scored so far:
    "scored 128/488 captions (0 had cached scores); scoring the next 128"."""
    if progress is None:
        return None
    if cached == total:
        progress(1.0, desc=f"all {total} captions had cached scores: nothing to score")
        return None

    def report(done: int, batch: int) -> None:
        text = f"scored {cached + done}/{total} captions ({cached} had cached scores)"
        if batch:
            text += f"; scoring the next {batch}"
        progress((cached + done) / max(total, 1), desc=text)

    return report


def fill_metric_cache(session, user, scorer, collection: str, metrics: Sequence[str],
                      progress: Progress | None = None) -> dict[str, str]:
    """Cache `metrics` for every non-reference caption of `collection` in MetricScore (scoring
    only captions not cached under the scorer's score fingerprints), as `collection_scores`
    reads them. Images come from the database's image store; references are the image's
    reference captions in the caption's language, so a reference caption would be scored with
    itself among its references (BLEU 1): references are not scored here (`scores_leaving_out`
    scores one without itself). Returns {metric: reason} for metrics that cannot run."""

    require_role(user, *RESEARCH_ROLES)
    captions = [row for row in captions_table(session, user, get_collection(session, collection))
                if row["kind"] != "reference"]
    if not captions:
        raise ValueError(f"collection {collection!r} has no captions to score (references are not scored)")
    return _cached_or_scored(session, scorer, captions, metrics, progress)[1]


def collection_scores(session, user, collection: str, scorer, metrics: Sequence[str],
                      progress: Progress | None = None) -> pd.DataFrame:
    """A collection's non-reference captions as one wide table: caption_id, image_id, image_file,
    candidate, lang, kind, parent_caption_id, op ("original" for unperturbed captions), human
    (mean overall rating, NaN when unrated), n_ratings, references (newline-joined),
    collection, then one numeric column per metric (NaN where it cannot score the caption);
    `attrs["unavailable"]` = {metric: reason} for metrics that cannot run.

    Scores come from the MetricScore cache under the scorer's score fingerprints; only
    captions without one are scored, and are cached for the next call (researcher/admin).
    """

    require_role(user, *RESEARCH_ROLES)
    if not collection:
        raise ValueError("Choose a collection.")
    rows = [r for r in captions_table(session, user, get_collection(session, collection)) if r["kind"] != "reference"]
    if not rows:
        raise ValueError(f"Collection {collection!r} has no captions to analyze.")
    values, unavailable = _cached_or_scored(session, scorer, rows, metrics, progress)
    table = pd.DataFrame({
        "caption_id": [r["caption_id"] for r in rows],
        "image_id": [r["image_sha256"][:12] for r in rows],
        "image_file": [r["image_file"] for r in rows],
        "candidate": [r["caption"] for r in rows],
        "lang": [r["language"] for r in rows],
        "kind": [r["kind"] for r in rows],
        "parent_caption_id": [r["parent_caption_id"] for r in rows],
        "op": [r["perturbation_op"] or ORIGINAL for r in rows],
        "human": pd.to_numeric(pd.Series([r["human_score"] for r in rows], dtype="object"), errors="coerce"),
        "n_ratings": [r["n_ratings"] for r in rows],
        "references": ["\n".join(r["references"]) for r in rows],
        "collection": collection,
    })
    for name, metric in zip((scorer.canonical_name(m) for m in metrics), metrics):
        column = pd.Series([values[name].get(r["caption_id"]) for r in rows], dtype="object")
        table[metric] = pd.to_numeric(column, errors="coerce")
    table.attrs["metric_languages"] = metric_languages(scorer, metrics)
    table.attrs["unavailable"] = {metric: unavailable[name] for name, metric in
                                  zip((scorer.canonical_name(m) for m in metrics), metrics) if name in unavailable}
    return table


def scores_leaving_out(session, user, collection: str, scorer, metrics: Sequence[str],
                       requests: Sequence[tuple[int, Sequence[int]]],
                       progress: Progress | None = None) -> tuple[list[dict[str, float]], dict[str, str]]:
    """Scores of captions of `collection` against their image's references (in the caption's
    language) less some reference captions: request (caption_id, left_out) scores caption
    `caption_id` with the references but the captions `left_out`, and a reference caption is
    always left out of its own references (a caption is not scored against itself, as in
    Pascal-50S, whose references exclude the captions being compared). Returns one
    {metric: value (NaN where the metric cannot score it, e.g. no reference left)} per
    request, and {metric: reason} for metrics that cannot run.

    Not cached: a value depends on which references are left out, and MetricScore keys a
    value by caption only. CIDEr-D takes the IDF `collection_scores` uses (the references of
    the collection's non-reference captions' images), so values compare with its values."""

    require_role(user, *RESEARCH_ROLES)
    rows = captions_table(session, user, get_collection(session, collection))
    by_id = {row["caption_id"]: row for row in rows}
    texts = {row["caption_id"]: row["caption"] for row in rows if row["kind"] == "reference"}
    names = [scorer.canonical_name(m) for m in metrics]
    _, corpus = _score_keys(scorer, names, [row for row in rows if row["kind"] != "reference"])
    keys, items = [], {}
    for caption_id, left_out in requests:
        row = by_id.get(caption_id)
        if row is None:
            raise LookupError(f"caption {caption_id} is not a caption of collection {collection!r}")
        dropped = set(left_out) | ({caption_id} if row["kind"] == "reference" else set())
        references = list(row["references"])
        for other in sorted(dropped):
            if other in texts and texts[other] in references:
                references.remove(texts[other])  # one occurrence: another reference may have the same text
        key = (caption_id, tuple(references))
        keys.append(key)
        if key not in items:
            items[key] = ScoreItem(image=row["image_file"], candidate=row["caption"], references=references,
                                   lang=row["language"], image_id=row["image_sha256"])
    values: dict[tuple, dict[str, float]] = {key: {} for key in items}
    unavailable: dict[str, str] = {}
    extra = {} if corpus is None else {"cider_document_frequency": corpus}
    order = list(items)
    for start in range(0, len(order), SCORE_BATCH):
        chunk = order[start:start + SCORE_BATCH]
        if progress is not None:
            progress(start / max(len(order), 1), desc=f"scoring {start}/{len(order)} captions of pairs with a "
                                                      "reference, each without its own reference")
        todo = [name for name in names if name not in unavailable]
        for name, result in scorer.score([items[key] for key in chunk], todo, **extra).items():
            if result.unavailable:
                unavailable[name] = result.unavailable
                continue
            for key, value in zip(chunk, result.values):
                values[key][name] = math.nan if value is None else float(value)
    scored = [{metric: values[key].get(name, math.nan) for name, metric in zip(names, metrics)} for key in keys]
    return scored, {metric: unavailable[name] for name, metric in zip(names, metrics) if name in unavailable}


def cached_metric_names(session, user, collection: str, scorer) -> list[str]:
    """The metrics of `scorer` (registry order) with a value cached under its own checkpoint
    fingerprint for some caption of `collection`."""
    require_role(user, *RESEARCH_ROLES)
    ids = select(Caption.id).where(in_collection(get_collection(session, collection)))
    stored = set(session.execute(select(MetricScore.metric, MetricScore.checkpoint_fingerprint)
                                 .where(MetricScore.caption_id.in_(ids)).distinct()).all())
    names = [name for name in scorer.metric_names() if name in {metric for metric, _ in stored}]
    # Keyed as collection_scores keys them: CIDEr-D by the IDF of the collection's captions.
    cider = any(scorer.registry.metrics[name].family == "cider" for name in names)
    captions = [r for r in captions_table(session, user, get_collection(session, collection))
                if r["kind"] != "reference"] if cider else []
    keys, _ = _score_keys(scorer, names, captions)
    return [name for name in names if keys[name] is not None and (name, keys[name]) in stored]


def collection_ratings(session, user, collection: str) -> pd.DataFrame:
    """Each overall rating of `collection` as caption_id, rater, human (in [0, 1]); ratings
    without an overall score are left out (researcher/admin)."""
    require_role(user, *RESEARCH_ROLES)
    rows = ratings_table(session, user, get_collection(session, collection))
    frame = pd.DataFrame({"caption_id": [r["caption_id"] for r in rows], "rater": [r["annotator"] for r in rows],
                          "human": pd.to_numeric(pd.Series([r["overall"] for r in rows], dtype="object"),
                                                 errors="coerce")})
    return frame.dropna(subset=["human"]).reset_index(drop=True)


def collection_captions(session, user, collection: str, kinds: Sequence[str] = ("candidate", "reference")) -> pd.DataFrame:
    """Captions of `collection` of the given kinds as a `--captions`-style table (candidate,
    lang, image = stored image file, image_id, references, item_id), for scoring now."""

    frame = pd.DataFrame(captions_table(session, user, get_collection(session, collection)))
    if frame.empty:
        raise ValueError(f"collection {collection!r} has no captions")
    frame = frame[frame["kind"].isin(list(kinds))]
    if frame.empty:
        raise ValueError(f"collection {collection!r} has no captions of kind {', '.join(kinds)}")
    return pd.DataFrame({
        "candidate": frame["caption"], "lang": frame["language"], "image": frame["image_file"],
        "image_id": frame["image_sha256"], "references": frame["references"], "item_id": frame["caption_id"],
    }).reset_index(drop=True)

