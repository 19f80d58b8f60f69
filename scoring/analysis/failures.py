"""Failure cases of a metric on a collection (`store.collection_scores` table).

Two rankings: captions where the metric and the human ratings disagree most (difference of
percentile ranks within a language), and perturbed captions whose score barely moved from
their original's, smallest absolute change first (the metric missed the damage the
perturbation did).
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from .robustness import paired_changes

CASE_COLUMNS = ["caption_id", "image_id", "candidate", "lang", "op", "metric", "metric score", "human",
                "rank gap", "change %", "image_file", "references"]


def disagreements(table: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """One row per (rated, unperturbed caption, metric) with `rank gap` = percentile rank of the
    metric minus that of the humans within the caption's language; largest |gap| first
    (positive: the metric overrates the caption). Metrics with fewer than two scored rated
    captions are left out."""
    rated = table[(table["kind"] != "perturbed") & table["human"].notna()]
    parts = []
    for metric in metrics:
        scored = rated[rated[metric].notna()].copy()
        if len(scored) < 2:
            continue
        grouped = scored.groupby("lang")
        scored["rank gap"] = grouped[metric].rank(pct=True) - grouped["human"].rank(pct=True)
        scored["metric"] = metric
        scored["metric score"] = scored[metric]
        parts.append(scored)
    if not parts:
        return pd.DataFrame(columns=CASE_COLUMNS)
    out = pd.concat(parts, ignore_index=True)
    out["change %"] = None
    order = out["rank gap"].abs().sort_values(ascending=False, kind="stable").index
    return out.loc[order]


def unmoved(table: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """One row per (perturbed caption, metric) with `change %` from its original's score;
    the smallest absolute changes first (the metric barely noticed the damage), those whose
    change is undefined (an original scored ~0) last."""
    perturbed = table[table["kind"] == "perturbed"]
    if perturbed.empty:
        return pd.DataFrame(columns=CASE_COLUMNS)
    linked = table.copy()
    linked["item_id"] = linked["caption_id"].where(linked["kind"] != "perturbed", linked["parent_caption_id"])
    involved = linked["caption_id"].isin(perturbed["caption_id"]) | linked["caption_id"].isin(perturbed["parent_caption_id"])
    long = linked[involved].melt(id_vars=["item_id", "caption_id", "lang", "op"], value_vars=list(metrics),
                                 var_name="metric", value_name="score")
    changes = paired_changes(long.dropna(subset=["score"]))
    details = table.set_index("caption_id")
    out = changes.join(details[["image_id", "image_file", "candidate", "human", "references"]], on="caption_id")
    out["metric score"] = out["score"]
    out["change %"] = out["change"]
    out["rank gap"] = None
    order = out["change"].abs().sort_values(ascending=True, kind="stable", na_position="last").index
    return out.loc[order]
