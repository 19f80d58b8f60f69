"""Caption-length analysis (SPECS, Chen et al. 2025, section 5.3 and Figure 3).

Captions are put in buckets by token count and the metric-human correlation is measured
inside each bucket. SPECS finds CLIP better under 60 tokens and SPECS better above, and
recommends using each in its regime; `length_switched_metric` builds that combination.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd

from .correlation import COEFFICIENTS, bootstrap_estimate

SPECS_THRESHOLD = 60
DEFAULT_EDGES = (0, 20, 40, 60, 80, 100, 150, 250, float("inf"))


def whitespace_tokens(text: str) -> int:
    """Word count; pass a real tokenizer's counter (e.g. CLIP BPE) for SPECS' token ranges."""
    return len(str(text).split())


def token_counts(captions: Sequence[str], counter: Callable[[str], int] = whitespace_tokens) -> np.ndarray:
    return np.array([counter(caption) for caption in captions], dtype=int)


def bucket_labels(lengths, edges: Sequence[float] = DEFAULT_EDGES) -> pd.Categorical:
    """'[a, b)' interval labels for each length."""
    edges = list(edges)
    if sorted(edges) != edges or len(edges) < 2:
        raise ValueError("edges must be increasing and at least two")
    labels = [
        f"{int(lo)}+" if np.isinf(hi) else f"{int(lo)}-{int(hi) - 1}" for lo, hi in zip(edges[:-1], edges[1:])
    ]
    return pd.cut(np.asarray(lengths, dtype=float), bins=edges, right=False, labels=labels)


def length_bucket_table(
    table: pd.DataFrame,
    metrics: Sequence[str],
    *,
    human_col: str = "human",
    length_col: str = "n_tokens",
    edges: Sequence[float] = DEFAULT_EDGES,
    coefficients: Sequence[str] = ("pearson", "kendall_b"),
    n_boot: int = 0,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per (bucket, metric) with n and each coefficient (Figure 3 plots Pearson)."""
    for name in coefficients:
        if name not in COEFFICIENTS:
            raise ValueError(f"unknown coefficient {name!r}")
    missing = [c for c in [human_col, length_col, *metrics] if c not in table.columns]
    if missing:
        raise ValueError(f"missing column(s) {', '.join(missing)}")
    buckets = bucket_labels(table[length_col], edges)
    rows = []
    for bucket in buckets.categories:
        part = table[np.asarray(buckets == bucket)]
        for metric in metrics:
            pair = part[[metric, human_col]].dropna()
            row = {"bucket": bucket, "metric": metric, "n": len(pair)}
            for name in coefficients:
                estimate = bootstrap_estimate(pair[metric].to_numpy(), pair[human_col].to_numpy(), name, n_boot=n_boot, seed=seed)
                row[name] = estimate.value
                if n_boot:
                    row[f"{name}_low"], row[f"{name}_high"] = estimate.low, estimate.high
            rows.append(row)
    return pd.DataFrame(rows)


def length_switched_metric(
    table: pd.DataFrame,
    short_metric: str = "CLIP-S",
    long_metric: str = "SPECS",
    *,
    length_col: str = "n_tokens",
    threshold: int = SPECS_THRESHOLD,
    normalise: str = "zscore",
) -> pd.Series:
    """SPECS' advice as one score: `short_metric` below `threshold` tokens, else `long_metric`.

    The two metrics live on different scales (CLIP-S = 2.5 cos, SPECS = cos), so by default
    each is z-scored over the whole table before switching; otherwise ranks across the
    threshold would be decided by the scale. `normalise="none"` keeps raw scores.
    """
    missing = [c for c in [short_metric, long_metric, length_col] if c not in table.columns]
    if missing:
        raise ValueError(f"missing column(s) {', '.join(missing)}")
    if normalise not in ("zscore", "none"):
        raise ValueError("normalise must be 'zscore' or 'none'")

    def scaled(column: str) -> pd.Series:
        values = pd.to_numeric(table[column], errors="coerce")
        if normalise == "none":
            return values
        spread = values.std(ddof=0)
        return (values - values.mean()) / (spread if spread and np.isfinite(spread) else 1.0)

    is_short = pd.to_numeric(table[length_col], errors="coerce") < threshold
    combined = scaled(short_metric).where(is_short, scaled(long_metric))
    return combined.rename(f"{short_metric}<{threshold}|{long_metric}")
