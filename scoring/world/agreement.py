"""How well metrics agree with the simulated annotators on world scenes, with the scale that
gives each number its meaning: the oracle's agreement with the annotators (the ceiling) and the
annotators' agreement with each other, within each caption style as well as over all captions,
each with a 95 % scene-bootstrap interval (captions of one scene are not independent).

`benchmarks/bench_ratings.py` prints it for a seed range; `scoring.world.splits` says which
ranges may be reported.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from scoring.analysis.correlation import Estimate, cluster_bootstrap, cluster_bootstrap_estimate, kendall_tau
from scoring.analysis.tables import rating_mean

from .annotators import panel
from .scene import Scene
from .sets import rating_candidates

STYLES = ("all", "short", "long")


def rating_table(scenes: Sequence[Scene], langs: Sequence[str], annotators: int = 3) -> pd.DataFrame:
    """One row per candidate caption: scene, language, style, text, its content errors and
    grammar damage ('+'-joined kinds, '' for none), the oracle score, each annotator's overall
    rating (`rater_0`…) and their mean (`human`)."""
    raters = panel(annotators)
    rows = []
    for key, scene, style, cand, _refs in rating_candidates(list(scenes), tuple(langs)):
        ratings = [rater.rate(cand, key)["overall"] for rater in raters]
        rows.append({"key": key, "scene": scene.scene_id, "lang": cand.caption.lang, "style": style,
                     "text": cand.text, "errors": "+".join(cand.errors), "damage": "+".join(cand.damage),
                     "oracle": cand.oracle.score, "human": rating_mean(np.mean(ratings)),
                     **{f"rater_{i}": r for i, r in enumerate(ratings)}})
    return pd.DataFrame(rows)


def _subset(table: pd.DataFrame, lang: str, style: str) -> pd.DataFrame:
    part = table[table["lang"] == lang]
    return part if style == "all" else part[part["style"] == style]


def agreement(table: pd.DataFrame, metrics: Sequence[str], *, n_boot: int = 1000, seed: int = 0) -> dict:
    """Per language and style: tau_c (with scene-bootstrap interval) of every metric column
    against the annotators' mean, of the oracle (the ceiling), and of each annotator against
    the mean of the others."""
    raters = sorted(c for c in table.columns if c.startswith("rater_"))
    out: dict = {}
    for lang in sorted(table["lang"].unique()):
        for style in STYLES:
            part = _subset(table, lang, style).reset_index(drop=True)
            if len(part) < 2:
                continue
            scenes = part["scene"].to_numpy()
            entry = {"captions": len(part), "scenes": int(part["scene"].nunique())}
            for column in ("oracle", *metrics):
                entry[column] = cluster_bootstrap_estimate(part[column], part["human"], scenes, "kendall_c",
                                                           n_boot=n_boot, seed=seed)
            others = {}
            for r in raters:
                rest = part[[c for c in raters if c != r]].mean(axis=1).map(rating_mean)
                others[r] = cluster_bootstrap_estimate(part[r], rest, scenes, "kendall_c", n_boot=n_boot, seed=seed)
            entry["annotators"] = others
            out.setdefault(lang, {})[style] = entry
    return out


def paired_difference(table: pd.DataFrame, metric: str, other: str, lang: str, style: str, *,
                      n_boot: int = 1000, seed: int = 0) -> Estimate:
    """tau_c of `metric` minus that of `other` against the annotators' mean, with a paired
    scene-bootstrap interval: both taus are recomputed on every resample."""
    part = _subset(table, lang, style).reset_index(drop=True)
    human = part["human"].to_numpy(float)
    a, b = part[metric].to_numpy(float), part[other].to_numpy(float)
    return cluster_bootstrap(
        lambda index: kendall_tau(a[index], human[index], variant="c") - kendall_tau(b[index], human[index], variant="c"),
        part["scene"].to_numpy(), n_boot=n_boot, seed=seed)


def margin_over_best(table: pd.DataFrame, metric: str, others: Sequence[str], lang: str, style: str, *,
                     n_boot: int = 1000, seed: int = 0) -> tuple[str, Estimate]:
    """`paired_difference` of `metric` and the best of `others` (chosen on the full range)."""
    part = _subset(table, lang, style)
    human = part["human"].to_numpy(float)
    best = max(others, key=lambda m: kendall_tau(part[m].to_numpy(float), human, variant="c"))
    return best, paired_difference(table, metric, best, lang, style, n_boot=n_boot, seed=seed)


def content_error_pairs(table: pd.DataFrame, lang: str, style: str) -> pd.DataFrame:
    """Every (correct, erroneous) pair of one scene's captions in `lang` and `style`: the first
    has no content error and no grammar damage, the second at least one content error and no
    grammar damage. Columns: scene, correct and wrong (row labels of `table`)."""
    part = _subset(table, lang, style)
    clean = part[part["damage"] == ""]
    right, wrong = clean[clean["errors"] == ""], clean[clean["errors"] != ""]
    pairs = right.reset_index()[["scene", "index"]].merge(wrong.reset_index()[["scene", "index"]], on="scene",
                                                           suffixes=("_correct", "_wrong"))
    return pairs.rename(columns={"index_correct": "correct", "index_wrong": "wrong"})


def rate_difference(a: np.ndarray, b: np.ndarray, clusters, *, n_boot: int = 1000,
                    seed: int = 0) -> dict[str, Estimate]:
    """Mean (%) of the per-item scores `a` (1 right, 0.5 tie, 0 wrong), of `b`, and of their
    difference, each with a cluster-bootstrap interval on the same resamples."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    statistics = {"a": lambda i: 100 * a[i].mean(), "b": lambda i: 100 * b[i].mean(),
                  "difference": lambda i: 100 * (a[i].mean() - b[i].mean())}
    return {k: cluster_bootstrap(f, clusters, n_boot=n_boot, seed=seed) for k, f in statistics.items()}


def pair_accuracy_difference(table: pd.DataFrame, pairs: pd.DataFrame, metric: str, other: str, *,
                             n_boot: int = 1000, seed: int = 0) -> dict[str, Estimate]:
    """Within-scene pairwise accuracy (%, the correct caption above the wrong one, ties half) of
    `metric`, of `other`, and their difference (`rate_difference`, resampling scenes)."""
    def correct(column):
        right, wrong = (table.loc[pairs[k], column].to_numpy(float) for k in ("correct", "wrong"))
        return np.where(right > wrong, 1.0, np.where(right == wrong, 0.5, 0.0))

    est = rate_difference(correct(metric), correct(other), pairs["scene"].to_numpy(), n_boot=n_boot, seed=seed)
    return {metric: est["a"], other: est["b"], "difference": est["difference"]}
