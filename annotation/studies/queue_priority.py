"""Which caption to rate first: rating priority from per-metric scores ("disagreement first").

Each metric's scores are rank-normalised over the items it scored (average ranks for ties,
mapped to [0, 1]: the lowest score 0, the highest 1), so metrics on different scales can be
compared. An item's disagreement is the (population) standard deviation of its normalised
ranks over the metrics that scored it: 0 when every metric puts it at the same place, up to
0.5 when half the metrics rank it first and half last. Items scored by fewer than two
metrics have no disagreement (NaN) and come after every item that has one.

Pure functions of the scores: no database, no model. The rating queue
(`annotation.studies.tasks.next_rating_item`, order `disagreement-first`) calls them with the
collection's stored scores; `benchmarks/bench_active_queue.py` with freshly scored ones.
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np


def rank_normalise(values: Sequence[float | None]) -> np.ndarray:
    """Average ranks of the finite values mapped to [0, 1] (lowest 0, highest 1; a single
    finite value 0.5); NaN where a value is missing or not finite."""
    x = np.array([np.nan if v is None else float(v) for v in values], dtype=float)
    out = np.full(x.shape, np.nan)
    finite = np.isfinite(x)
    n = int(finite.sum())
    if n == 1:
        out[finite] = 0.5
    elif n > 1:
        from scipy.stats import rankdata  # here: scipy.stats took 1.3 of a CLI command's 4 s to import

        out[finite] = (rankdata(x[finite], method="average") - 1.0) / (n - 1)
    return out


def disagreement(scores: Mapping[str, Sequence[float | None]]) -> np.ndarray:
    """Per item, the spread (population sd) of its rank-normalised scores over the metrics in
    `scores` ({metric: one value per item, None/NaN where the metric did not score it});
    NaN for items fewer than two metrics scored."""
    columns = [rank_normalise(values) for values in scores.values()]
    if not columns:
        return np.array([], dtype=float)
    lengths = {len(c) for c in columns}
    if len(lengths) != 1:
        raise ValueError(f"every metric needs one value per item; got lengths {sorted(lengths)}")
    ranks = np.vstack(columns)
    counts = np.isfinite(ranks).sum(axis=0)
    out = np.full(ranks.shape[1], np.nan)
    enough = counts >= 2
    if enough.any():
        out[enough] = np.nanstd(ranks[:, enough], axis=0)
    return out


def disagreement_first(item_ids: Sequence[Hashable], scores: Mapping[str, Sequence[float | None]]) -> list:
    """`item_ids` reordered most-disagreed first; items without a disagreement last; ties keep
    their order in `item_ids` (so a caller's own order breaks them)."""
    spread = disagreement(scores) if scores else np.full(len(item_ids), np.nan)
    if len(spread) != len(item_ids):
        raise ValueError(f"{len(item_ids)} items but {len(spread)} scores per metric")
    key = np.where(np.isfinite(spread), -spread, np.inf)
    return [item_ids[i] for i in np.argsort(key, kind="stable")]
