"""Analysis tables to and from the CapLens database.

`into_collection` turns a loader's tidy rating table into a collection (through the
all-or-nothing importer of `annotation.importers`); `collection_table` and
`collection_robustness_scores` read a collection back as the wide / long tables the measures
take, with the metric scores cached in `MetricScore`. `collection_scores` is the app's view:
one row per caption, scored now where the cache for the scorer's checkpoints has no value.

Ratings are stored in [0, 1]; each public set's scale is mapped linearly (rank preserving,
so correlations do not change).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from .robustness import ORIGINAL

# Published rating scales of the public sets, (lowest, highest).
RATING_SCALES = {
    "Flickr8k-Expert": (1.0, 4.0),
    "Flickr8k-CF": (0.0, 1.0),
    "Composite": (1.0, 5.0),
    "CapEval1k": (1.0, 5.0),
    "M-CapEval1k": (1.0, 5.0),
}
_DIMENSIONS = ("fluency", "relevance", "descriptiveness")
SCORE_BATCH = 128  # captions per scorer call, so progress can be reported while scoring
Progress = Callable[..., object]


def _unit_scale(values: pd.Series, scale: tuple[float, float], what: str) -> pd.Series:
    low, high = scale
    if not high > low:
        raise ValueError(f"rating scale {scale} is empty")
    values = pd.to_numeric(values, errors="coerce")
    outside = values[(values < low) | (values > high)]
    if len(outside):
        raise ValueError(f"{what}: {len(outside)} values outside the scale {low}-{high} (e.g. {outside.iloc[0]})")
    return (values - low) / (high - low)


def rating_scale(table: pd.DataFrame, scale: tuple[float, float] | None = None) -> tuple[float, float]:
    """The scale to map to [0, 1]: given, else the set's published one, else [0, 1] if it fits."""
    if scale is not None:
        return scale
    collections = set(table["collection"].dropna()) if "collection" in table else set()
    known = {RATING_SCALES[c] for c in collections if c in RATING_SCALES}
    if len(known) == 1:
        return known.pop()
    human = pd.to_numeric(table["human"], errors="coerce")
    if human.between(0, 1).all():
        return (0.0, 1.0)
    raise ValueError("ratings are not in [0, 1] and the set's scale is unknown; pass scale=(low, high)")


def import_rows_for(table: pd.DataFrame, image_root, *, scale: tuple[float, float] | None = None) -> list[dict]:
    """Importer rows (see annotation.importers) for a tidy rating table.

    Each rating row keeps its caption (`caption_id` = the loader's `item_id`, so repeated
    ratings of one caption stay one caption) and its rater (`<collection>-rater<N>`).
    Images are files under `image_root` named by `image_path`.
    """
    required = {"image_path", "candidate", "human", "item_id"}
    missing = required - set(table.columns)
    if missing:
        raise ValueError(f"rating table lacks column(s) {', '.join(sorted(missing))}")
    image_root = Path(image_root)
    chosen = rating_scale(table, scale)
    overall = _unit_scale(table["human"], chosen, "human")
    dimensions = {d: _unit_scale(table[d], chosen, d) for d in _DIMENSIONS if d in table.columns}
    rows = []
    for index, record in enumerate(table.itertuples(index=False)):
        record = record._asdict()
        image = str(record["image_path"])
        if not (image_root / image).exists():
            raise FileNotFoundError(f"image {image} not found under {image_root}")
        row = {
            "image": image,
            "caption": record["candidate"],
            "language": record.get("lang") or "en",
            "kind": "candidate",
            "image_id": str(record.get("image_id") or image),
            "caption_id": str(record["item_id"]),
            "references": list(record.get("references") or []),
            "annotator": f"{record.get('collection') or 'rater'}-rater{int(record.get('rater') or 0)}",
            "score": float(overall.iloc[index]),
        }
        for dimension, values in dimensions.items():
            if not np.isnan(values.iloc[index]):
                row[dimension] = float(values.iloc[index])
        if record.get("system"):
            row["model"] = str(record["system"])
        rows.append(row)
    return rows


def into_collection(session, user, table: pd.DataFrame, collection: str, image_root, *,
                    scale: tuple[float, float] | None = None, source_name: str | None = None):
    """Import a tidy rating table as `collection` (all or nothing); returns the ImportReport."""
    from annotation.importers import import_rows

    rows = import_rows_for(table, image_root, scale=scale)
    return import_rows(session, user, rows, collection=collection, base_dir=Path(image_root),
                       source_name=source_name or collection)


def _metric_name(column: str, fingerprints: dict[str, int]) -> str:
    name, _, fingerprint = column[len("score:"):].partition("@")
    return name if fingerprints[name] == 1 else f"{name}@{fingerprint}"


def _score_columns(frame: pd.DataFrame) -> dict[str, str]:
    columns = [c for c in frame.columns if c.startswith("score:")]
    counts: dict[str, int] = {}
    for column in columns:
        name = column[len("score:"):].partition("@")[0]
        counts[name] = counts.get(name, 0) + 1
    return {column: _metric_name(column, counts) for column in columns}


def collection_table(session, user, collection: str) -> pd.DataFrame:
    """One row per rating of `collection`: human (overall, in [0, 1]), lang, item_id,
    image_id, candidate, references, rater, system, collection, and one column per cached
    metric (named `M`, or `M@fingerprint` when a metric was cached for several checkpoints)."""
    from annotation.exporters import ratings_table
    from annotation.workflows import get_collection

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
    scores = _score_columns(renamed)
    keep = ["collection", "lang", "image_id", "item_id", "candidate", "references", "human", "rater", "system",
            *[d for d in _DIMENSIONS if d in renamed], *scores]
    return renamed[keep].rename(columns=scores)


def collection_robustness_scores(session, user, collection: str, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Long robustness table of `collection`: each perturbed caption (kind `perturbed`, with its
    operation) and its parent as `original`, with their cached metric scores."""
    from annotation.exporters import captions_table
    from annotation.workflows import get_collection

    frame = pd.DataFrame(captions_table(session, user, get_collection(session, collection)))
    if frame.empty:
        raise ValueError(f"collection {collection!r} has no captions")
    scores = _score_columns(frame)
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


def _checkpoint_identity(spec) -> str:
    """Label and source of a backbone; a local checkpoint adds its files' sizes and times, so
    one retrained in place at the same path gets a new fingerprint."""
    parts = [spec.label, spec.source]
    if spec.path is not None and Path(spec.path).exists():
        root = Path(spec.path)
        files = [root] if root.is_file() else sorted(f for f in root.rglob("*") if f.is_file())
        parts += [f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files]
    return "|".join(parts)


def score_fingerprint(scorer, metric: str) -> str:
    """Cache key of `metric`'s values under `scorer`: the profile plus a digest of the metric's
    backbones (label, checkpoint source and, for local checkpoints, their files), so values
    from another profile or checkpoint are never reused. Toolkit metrics have no backbone."""
    import hashlib

    spec = scorer.registry.metrics[scorer.canonical_name(metric)]
    backbones = [scorer.registry.backbones[b] for b in (spec.backbone, spec.vision_backbone) if b]
    identity = " + ".join(_checkpoint_identity(b) for b in backbones) or "toolkit"
    return f"{scorer.profile}:{hashlib.sha1(identity.encode('utf-8')).hexdigest()[:16]}"


def _score_item(row: dict):
    from scoring.api import ScoreItem

    return ScoreItem(image=row["image_file"], candidate=row["caption"], references=list(row["references"]),
                     lang=row["language"], image_id=row["image_sha256"])


def _cached_or_scored(session, scorer, captions: list[dict], metrics: Sequence[str],
                      progress: Progress | None = None) -> tuple[dict[str, dict[int, float | None]], dict[str, str]]:
    """Values of `metrics` for `captions` by caption id: read from MetricScore for the scorer's
    fingerprint, and only captions without a cached value are scored (in batches) and stored.
    Returns ({metric: {caption_id: value}}, {metric: reason} for metrics that cannot run)."""
    from annotation.workflows import cache_metric_scores, cached_metric_scores

    names = [scorer.canonical_name(m) for m in metrics]
    ids = [row["caption_id"] for row in captions]
    values = {name: cached_metric_scores(session, name, score_fingerprint(scorer, name), ids) for name in names}
    missing = [row for row in captions if any(row["caption_id"] not in values[name] for name in names)]
    unavailable: dict[str, str] = {}
    for start in range(0, len(missing), SCORE_BATCH):
        if progress is not None:
            progress(start / len(missing), desc=f"scoring captions {start + 1}-{min(start + SCORE_BATCH, len(missing))} "
                                                 f"of {len(missing)} without cached scores")
        chunk = missing[start:start + SCORE_BATCH]
        todo = [name for name in names if name not in unavailable
                and any(row["caption_id"] not in values[name] for row in chunk)]
        for name, result in scorer.score([_score_item(row) for row in chunk], todo).items():
            if result.unavailable:
                unavailable[name] = result.unavailable
                continue
            scored = {row["caption_id"]: value for row, value in zip(chunk, result.values)}
            cache_metric_scores(session, name, score_fingerprint(scorer, name), scored)
            values[name].update(scored)
    return values, unavailable


def fill_metric_cache(session, user, scorer, collection: str, metrics: Sequence[str],
                      progress: Progress | None = None) -> dict[str, str]:
    """Cache `metrics` for every caption of `collection` in MetricScore (scoring only captions
    not cached for the scorer's checkpoints). Images come from the database's image store;
    references are the image's reference captions in the caption's language. Returns
    {metric: reason} for metrics that cannot run."""
    from annotation.exporters import captions_table
    from annotation.workflows import get_collection
    from db.users import RESEARCH_ROLES, require_role

    require_role(user, *RESEARCH_ROLES)
    captions = captions_table(session, user, get_collection(session, collection))
    if not captions:
        raise ValueError(f"collection {collection!r} has no captions")
    return _cached_or_scored(session, scorer, captions, metrics, progress)[1]


def collection_scores(session, user, collection: str, scorer, metrics: Sequence[str],
                      progress: Progress | None = None) -> pd.DataFrame:
    """A collection's non-reference captions as one wide table: caption_id, image_id, image_file,
    candidate, lang, kind, parent_caption_id, op ("original" for unperturbed captions), human
    (mean overall rating, NaN when unrated), n_ratings, references (newline-joined),
    collection, then one numeric column per metric (NaN where it cannot score the caption).

    Scores come from the MetricScore cache for the scorer's checkpoint fingerprints; only
    captions without one are scored, and are cached for the next call (researcher/admin).
    """
    from annotation.exporters import captions_table
    from annotation.workflows import get_collection
    from db.users import RESEARCH_ROLES, require_role

    require_role(user, *RESEARCH_ROLES)
    if not collection:
        raise ValueError("Choose a collection.")
    rows = [r for r in captions_table(session, user, get_collection(session, collection)) if r["kind"] != "reference"]
    if not rows:
        raise ValueError(f"Collection {collection!r} has no captions to analyse.")
    values, _ = _cached_or_scored(session, scorer, rows, metrics, progress)
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
    return table


def rated_captions(table: pd.DataFrame) -> pd.DataFrame:
    """Rows of a `collection_scores` table that carry a human rating and are not perturbations
    (the captions correlations are measured on)."""
    return table[table["kind"] != "perturbed"].dropna(subset=["human"])


def collection_correlations(table: pd.DataFrame, metrics: Sequence[str], n_boot: int = 200) -> pd.DataFrame:
    """`correlation_table` per language of a `collection_scores` table's rated captions, for the
    metrics that scored at least two of them; ValueError when fewer than two are rated."""
    from .correlation import correlation_table

    rated = rated_captions(table)
    if len(rated) < 2:
        raise ValueError("Fewer than two rated captions: rate some in the Annotate tab first.")
    usable = [m for m in metrics if rated[m].notna().sum() >= 2]
    return correlation_table(rated, usable, group_by=["lang"], n_boot=n_boot)


def robustness_input(table: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame | None:
    """Long table for `robustness.robustness_table` from a `collection_scores` table: the
    perturbed captions and their originals, one row per (caption, metric); None when the
    collection stores no perturbations."""
    perturbed = table[table["kind"] == "perturbed"]
    if perturbed.empty:
        return None
    parents = set(perturbed["parent_caption_id"].dropna().astype(int))
    originals = table[table["caption_id"].isin(parents)]
    return pd.concat([originals, perturbed]).melt(
        id_vars=["caption_id", "lang", "op"], value_vars=list(metrics), var_name="metric", value_name="score")


def collection_captions(session, user, collection: str, kinds: Sequence[str] = ("candidate", "reference")) -> pd.DataFrame:
    """Captions of `collection` of the given kinds as a `--captions`-style table (candidate,
    lang, image = stored image file, image_id, references, item_id), for scoring now."""
    from annotation.exporters import captions_table
    from annotation.workflows import get_collection

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
