"""Analysis tables as pure functions: public rating sets mapped to [0, 1] and to importer rows,
a collection's score columns named, and the rated / perturbed views the measures take.

Ratings are stored in [0, 1]; each public set's scale is mapped linearly (rank preserving,
so correlations do not change).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .correlation import correlation_table


RATING_MEAN_DECIMALS = 12


def rating_mean(value: float | None) -> float | None:
    """A mean of ratings as stored, exported and correlated: rounded to 12 decimals, so that the
    same ratings summed in another order (SQL's AVG, Python's sum, numpy's pairwise sum) give the
    same mean, and captions rated alike stay tied where a rank correlation or a rank gap reads
    them (the annotation database's means and the world's simulated annotators' alike)."""
    return None if value is None else round(float(value), RATING_MEAN_DECIMALS)


RATING_SCALES = {
    "Flickr8k-Expert": (1.0, 4.0),
    "Flickr8k-CF": (0.0, 1.0),
    "Composite": (1.0, 5.0),
    "CapEval1k": (1.0, 5.0),
    "M-CapEval1k": (1.0, 5.0),
}


# Rating dimensions besides the overall score, as exported tables name them.
RATING_DIMENSIONS = ("fluency", "relevance", "descriptiveness")


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
    """Importer rows (see annotation.transfer.importers) for a tidy rating table.

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
    dimensions = {d: _unit_scale(table[d], chosen, d) for d in RATING_DIMENSIONS if d in table.columns}
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


def _metric_name(column: str, fingerprints: dict[str, int]) -> str:
    name, _, fingerprint = column[len("score:"):].partition("@")
    return name if fingerprints[name] == 1 else f"{name}@{fingerprint}"


def score_columns(frame: pd.DataFrame) -> dict[str, str]:
    """Exported `score:<metric>@<fingerprint>` columns -> the metric's name, suffixed with
    `@<fingerprint>` only where one metric was stored for several checkpoints."""
    columns = [c for c in frame.columns if c.startswith("score:")]
    counts: dict[str, int] = {}
    for column in columns:
        name = column[len("score:"):].partition("@")[0]
        counts[name] = counts.get(name, 0) + 1
    return {column: _metric_name(column, counts) for column in columns}


def rated_captions(table: pd.DataFrame) -> pd.DataFrame:
    """Rows of a `collection_scores` table that carry a human rating and are not perturbations
    (the captions correlations are measured on)."""
    return table[table["kind"] != "perturbed"].dropna(subset=["human"])


def correlation_rows(table: pd.DataFrame, ratings: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows a collection's correlation is measured on: its rated candidate captions
    (`rated_captions`), with `human` their mean overall rating; with `ratings` (caption_id,
    rater, human: one row per overall rating), one row per rating of those captions instead,
    each carrying its caption's metric scores."""
    rated = rated_captions(table)
    if ratings is None:
        return rated
    per_rating = ratings.dropna(subset=["human"])[["caption_id", "rater", "human"]]
    return rated.drop(columns=["human"]).merge(per_rating, on="caption_id", how="inner")


def collection_correlations(table: pd.DataFrame, metrics: Sequence[str], n_boot: int = 200, *,
                            ratings: pd.DataFrame | None = None, coefficients: Sequence[str] | None = None,
                            seed: int = 0) -> pd.DataFrame:
    """`correlation_table` per language of a `collection_scores` table's `correlation_rows`,
    for the metrics that scored at least two of them; ValueError when fewer than two rows."""
    rows = correlation_rows(table, ratings)
    if len(rows) < 2:
        raise ValueError("Fewer than two rated captions: rate some in the Annotate tab first.")
    usable = [m for m in metrics if m in rows and rows[m].notna().sum() >= 2]
    if not usable:
        raise ValueError("No chosen metric scored two rated captions.")
    extra = {} if coefficients is None else {"coefficients": list(coefficients)}
    return correlation_table(rows, usable, group_by=["lang"], n_boot=n_boot, seed=seed,
                             cluster_col="image_id" if "image_id" in rows else None, **extra)


def robustness_input(table: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame | None:
    """Long table for `robustness.robustness_table` from a `collection_scores` table: the
    perturbed captions and their originals (`item_id`: the original's caption id), one row
    per (caption, metric); None when the collection stores no perturbations."""
    perturbed = table[table["kind"] == "perturbed"]
    if perturbed.empty:
        return None
    parents = set(perturbed["parent_caption_id"].dropna().astype(int))
    originals = table[table["caption_id"].isin(parents)].assign(item_id=lambda f: f["caption_id"])
    # item_id links each perturbed caption to its original, so every op is compared with the
    # originals of the captions it perturbed (`robustness_table`).
    perturbed = perturbed.assign(item_id=perturbed["parent_caption_id"])
    return pd.concat([originals, perturbed]).melt(
        id_vars=["caption_id", "item_id", "lang", "op"], value_vars=list(metrics), var_name="metric",
        value_name="score")

