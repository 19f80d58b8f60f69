"""Agreement between metric scores and human judgments.

Measures (all caption level unless named otherwise):

- Kendall tau-b and tau-c (Kendall 1938/1945; Stuart 1953), the rank correlations used by
  CLIPScore, PAC-S and PR-MCS (Flickr8k-Expert is conventionally reported as tau-c,
  Flickr8k-CF as tau-b). Range [-1, 1].
- Pearson r (linear) and Spearman rho (Pearson on average ranks). Range [-1, 1].

Every coefficient comes with a seeded percentile-bootstrap 95 % interval over items, and two
metrics scored on the same items can be compared with a paired bootstrap test (any
coefficient) or Williams' test (Pearson only; Williams 1959, as used for dependent
correlations by Graham & Baldwin 2014).

Input tables are "wide": one row per judged item (one row per rating when an item has several
raters, as in the Flickr8k-Expert protocol), a human column and one numeric column per
metric. Nothing here reads files or the database.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import stats as _scipy_stats  # distributions only (t, normal); no correlation code

COEFFICIENTS = ("kendall_b", "kendall_c", "pearson", "spearman")
# How tables and figures name them.
COEFFICIENT_LABELS = {"kendall_c": "Kendall τc", "kendall_b": "Kendall τb", "pearson": "Pearson r",
                      "spearman": "Spearman ρ"}
# Columns that describe items rather than score them; never taken for metric columns.
RESERVED_COLUMNS = frozenset(
    {
        "human", "lang", "collection", "system", "item_id", "image_id", "image", "image_path",
        "candidate", "caption", "references", "rater", "n_tokens", "caption_id", "subset",
        "aspect", "split", "fluency", "relevance", "descriptiveness", "n_yes", "n_no", "rating_version",
    }
)


def _as_float_array(values, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    return array


def _paired(x, y) -> tuple[np.ndarray, np.ndarray]:
    x = _as_float_array(x, "x")
    y = _as_float_array(y, "y")
    if x.shape != y.shape:
        raise ValueError(f"x and y differ in length ({x.size} vs {y.size})")
    return x, y


def _dense_ranks(values: np.ndarray) -> np.ndarray:
    """0-based ranks where equal values share a rank and ranks have no gaps."""
    _, inverse = np.unique(values, return_inverse=True)
    return inverse.astype(np.int64)


def _count_inversions(values: np.ndarray) -> int:
    """Number of pairs i < j with values[i] > values[j] (non-negative integer values).

    A bottom-up merge sort done level by level with numpy: at each level the left half of
    every block is already sorted, so for each element of a right half one binary search
    counts the larger elements to its left. O(n log^2 n) and no Python loop over items.
    """
    n = values.size
    if n < 2:
        return 0
    current = values.astype(np.int64)
    stride = int(current.max()) + 1
    positions = np.arange(n)
    total = 0
    width = 1
    while width < n:
        block = positions // (2 * width)
        in_right = (positions // width) % 2 == 1
        left_keys = block[~in_right] * stride + current[~in_right]  # globally sorted
        right_block = block[in_right]
        right_values = current[in_right]
        block_end = np.searchsorted(left_keys, right_block * stride + (stride - 1), side="right")
        not_greater = np.searchsorted(left_keys, right_block * stride + right_values, side="right")
        total += int((block_end - not_greater).sum())
        current = np.sort(block * stride + current, kind="stable") - block * stride  # merges sorted runs
        width *= 2
    return total


SMALL_ALPHABET = 64


def _count_inversions_few_values(values: np.ndarray, classes: int) -> int:
    """Inversions of a sequence over few distinct values (a human rating scale) in O(n k):
    for each position, the items before it minus those before it that are not larger."""
    n = values.size
    onehot = np.zeros((n, classes), dtype=np.int64)
    onehot[np.arange(n), values] = 1
    before = np.cumsum(onehot, axis=0) - onehot
    not_larger = np.cumsum(before, axis=1)[np.arange(n), values]
    return int((np.arange(n) - not_larger).sum())


def _kendall_parts(x: np.ndarray, y: np.ndarray) -> tuple[int, int, int, int, int, int]:
    """(n, S = concordant - discordant, pairs tied in x, tied in y, classes x, classes y)."""
    return _kendall_parts_of_codes(_dense_ranks(x), _dense_ranks(y))


def _kendall_parts_of_codes(rx: np.ndarray, ry: np.ndarray) -> tuple[int, int, int, int, int, int]:
    """`_kendall_parts` from order-preserving integer codes of x and y (0-based; gaps allowed,
    as in a bootstrap resample of the full sample's dense ranks, so no resample sorts them again)."""
    n = rx.size
    width_x, width_y = int(rx.max()) + 1, int(ry.max()) + 1
    count_x, count_y = np.bincount(rx), np.bincount(ry)
    classes_x, classes_y = int(np.count_nonzero(count_x)), int(np.count_nonzero(count_y))
    # Discordant pairs are the strict inversions of one list once the items are sorted by
    # the other (ties broken by the first, so tied pairs never count); scan the list with
    # fewer distinct values, which a rating scale makes cheap.
    lead, scanned, width, classes = ((rx, ry, width_y, classes_y) if classes_y <= classes_x
                                     else (ry, rx, width_x, classes_x))
    order = np.lexsort((scanned, lead))
    sequence, led = scanned[order], lead[order]
    if classes <= SMALL_ALPHABET:
        if width > SMALL_ALPHABET:  # few values, but spread-out codes: close the gaps first
            sequence, width = _dense_ranks(sequence), classes
        discordant = _count_inversions_few_values(sequence, width)
    else:
        discordant = _count_inversions(sequence)
    tied_x = int((count_x * (count_x - 1) // 2).sum())
    tied_y = int((count_y * (count_y - 1) // 2).sum())
    # Pairs tied in both are runs of equal (lead, scanned) in the lexsorted order.
    runs = np.diff(np.flatnonzero(np.r_[True, (led[1:] != led[:-1]) | (sequence[1:] != sequence[:-1]), True]))
    tied_both = int((runs * (runs - 1) // 2).sum())
    all_pairs = n * (n - 1) // 2
    concordant = all_pairs - tied_x - tied_y + tied_both - discordant
    return n, concordant - discordant, tied_x, tied_y, classes_x, classes_y


def kendall_tau(x, y, variant: str = "b") -> float:
    """Kendall's tau between two score lists, ties handled.

    variant "b": S / sqrt((n0 - n1)(n0 - n2)), adjusting for ties in either list.
    variant "c" (Stuart's tau-c): 2S / (n^2 (m - 1) / m), m = the smaller number of distinct
    values; suited to a few-level human scale against a continuous metric.
    Returns nan when undefined (fewer than two items, or a constant list).
    """
    if variant not in ("b", "c"):
        raise ValueError(f"variant must be 'b' or 'c', got {variant!r}")
    x, y = _paired(x, y)
    if x.size < 2 or np.isnan(x).any() or np.isnan(y).any():
        return math.nan
    n, s, tied_x, tied_y, classes_x, classes_y = _kendall_parts(x, y)
    if variant == "b":
        all_pairs = n * (n - 1) // 2
        denominator = math.sqrt((all_pairs - tied_x) * (all_pairs - tied_y))
        return math.nan if denominator == 0 else s / denominator
    classes = min(classes_x, classes_y)
    if classes < 2:
        return math.nan
    return 2.0 * s / (n * n * (classes - 1) / classes)


def pearson(x, y) -> float:
    """Pearson's r; nan when either list is constant or shorter than two."""
    x, y = _paired(x, y)
    if x.size < 2:
        return math.nan
    return float(_pearson_rows(x[None], y[None])[0])


def average_ranks(values) -> np.ndarray:
    """1-based ranks, tied values sharing the mean of their positions."""
    values = _as_float_array(values, "values")
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    starts = np.r_[True, sorted_values[1:] != sorted_values[:-1]]
    group = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    last = np.r_[first[1:], values.size] - 1
    mean_position = (first + last) / 2.0 + 1.0
    ranks = np.empty(values.size)
    ranks[order] = mean_position[group]
    return ranks


def spearman(x, y) -> float:
    """Spearman's rho: Pearson's r of average ranks; nan where a score is missing (nan), as
    the other coefficients (ranking would put a nan above every number)."""
    x, y = _paired(x, y)
    if np.isnan(x).any() or np.isnan(y).any():
        return math.nan
    return pearson(average_ranks(x), average_ranks(y))


_COEFFICIENT_FUNCTIONS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "kendall_b": lambda x, y: kendall_tau(x, y, "b"),
    "kendall_c": lambda x, y: kendall_tau(x, y, "c"),
    "pearson": pearson,
    "spearman": spearman,
}


def coefficient(name: str) -> Callable[[np.ndarray, np.ndarray], float]:
    try:
        return _COEFFICIENT_FUNCTIONS[name]
    except KeyError:
        raise ValueError(f"unknown coefficient {name!r}; choose from {', '.join(COEFFICIENTS)}") from None


@dataclass(frozen=True)
class Estimate:
    """A coefficient with its percentile-bootstrap interval."""

    value: float
    low: float
    high: float
    n: int


def _bootstrap_indices(n: int, n_boot: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(n_boot, n))


def _coefficients(x: np.ndarray, y: np.ndarray, names: Sequence[str], rx: np.ndarray | None = None,
                  ry: np.ndarray | None = None) -> dict[str, float]:
    """Several coefficients at once; tau-b and tau-c share one concordance count, taken from
    `rx`, `ry` (order-preserving integer codes of x and y) when the caller has them."""
    values = {}
    if x.size < 2 or np.isnan(x).any() or np.isnan(y).any():
        return {name: coefficient(name)(x, y) for name in names}
    if rx is None:
        rx, ry = _dense_ranks(x), _dense_ranks(y)
    if {"kendall_b", "kendall_c"} & set(names):
        n, s, tied_x, tied_y, classes_x, classes_y = _kendall_parts_of_codes(rx, ry)
        all_pairs = n * (n - 1) // 2
        denominator = math.sqrt((all_pairs - tied_x) * (all_pairs - tied_y))
        values["kendall_b"] = math.nan if denominator == 0 else s / denominator
        classes = min(classes_x, classes_y)
        values["kendall_c"] = math.nan if classes < 2 else 2.0 * s / (n * n * (classes - 1) / classes)
    return {name: values[name] if name in values else coefficient(name)(x, y) for name in names}


def _pearson_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`pearson` of each row pair of two (B, n) arrays at once (nan where a row is constant)."""
    def centred(rows: np.ndarray) -> np.ndarray:  # r is scale free: rescaling keeps subnormal spreads off 0
        d = rows - rows.mean(axis=1, keepdims=True)
        spread = np.abs(d).max(axis=1, keepdims=True)
        return d / np.where(spread > 0, spread, 1.0)

    da, db = centred(a), centred(b)
    denominator = np.sqrt((da * da).sum(axis=1) * (db * db).sum(axis=1))
    constant = (np.ptp(a, axis=1) == 0) | (np.ptp(b, axis=1) == 0) | (denominator == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(constant, np.nan, (da * db).sum(axis=1) / np.where(constant, 1.0, denominator))


def _average_ranks_rows(codes: np.ndarray) -> np.ndarray:
    """`average_ranks` of each row of a (B, n) array of order-preserving integer codes, by
    counting (one bincount, no sort)."""
    rows, width = codes.shape[0], int(codes.max()) + 1
    counts = np.bincount((codes + width * np.arange(rows)[:, None]).ravel(), minlength=rows * width)
    counts = counts.reshape(rows, width)
    ends = np.cumsum(counts, axis=1)
    return np.take_along_axis((2 * ends - counts + 1) / 2.0, codes, axis=1)


def _bootstrap_samples(x: np.ndarray, y: np.ndarray, names: Sequence[str], index: np.ndarray) -> dict[str, np.ndarray]:
    """Each coefficient on every resample (rows of `index`): Pearson and Spearman for all rows at
    once, Kendall's concordance count per row from the full sample's dense ranks (no re-sorting)."""
    if np.isnan(x).any() or np.isnan(y).any():  # each resample as it comes (those without a nan count)
        replicates = [_coefficients(x[i], y[i], names) for i in index]
        return {name: np.array([r[name] for r in replicates]) for name in names}
    rx, ry = _dense_ranks(x), _dense_ranks(y)
    out = {}
    if "pearson" in names:
        out["pearson"] = _pearson_rows(x[index], y[index])
    if "spearman" in names:
        out["spearman"] = _pearson_rows(_average_ranks_rows(rx[index]), _average_ranks_rows(ry[index]))
    kendall = [name for name in names if name in ("kendall_b", "kendall_c")]
    if kendall:
        replicates = [_coefficients(x[i], y[i], kendall, rx[i], ry[i]) for i in index]
        out |= {name: np.array([r[name] for r in replicates]) for name in kendall}
    return out


def bootstrap_estimates(
    x, y, names: Sequence[str] = COEFFICIENTS, *, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95
) -> dict[str, Estimate]:
    """Each coefficient in `names` on (x, y) with a seeded percentile-bootstrap interval.

    All coefficients see the same item resamples, so their intervals are comparable.
    """
    x, y = _paired(x, y)
    for name in names:
        coefficient(name)
    point = _coefficients(x, y, names)
    if n_boot <= 0 or x.size < 2:
        return {name: Estimate(point[name], math.nan, math.nan, x.size) for name in names}
    samples_of = _bootstrap_samples(x, y, names, _bootstrap_indices(x.size, n_boot, seed))
    tail = (1.0 - confidence) / 2.0 * 100.0
    estimates = {}
    for name in names:
        samples = samples_of[name]
        samples = samples[~np.isnan(samples)]
        if samples.size == 0:
            estimates[name] = Estimate(point[name], math.nan, math.nan, x.size)
        else:
            low, high = np.percentile(samples, [tail, 100.0 - tail])
            estimates[name] = Estimate(point[name], float(low), float(high), x.size)
    return estimates


def bootstrap_estimate(
    x, y, name: str = "kendall_c", *, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95
) -> Estimate:
    """Coefficient `name` on (x, y) with a seeded percentile-bootstrap interval over items."""
    return bootstrap_estimates(x, y, [name], n_boot=n_boot, seed=seed, confidence=confidence)[name]


def cluster_bootstrap(statistic: Callable[[np.ndarray], float], clusters, *, n_boot: int = 1000, seed: int = 0,
                      confidence: float = 0.95) -> Estimate:
    """`statistic(index)` of the items at `index` with a percentile-bootstrap interval that
    resamples whole clusters (scenes, images) with replacement, keeping every item of a drawn
    cluster: captions of one image are not independent, so an item bootstrap would be too
    narrow.  `n` of the estimate is the number of clusters."""
    clusters = np.asarray(clusters)
    point = float(statistic(np.arange(clusters.size)))
    labels, members = np.unique(clusters, return_inverse=True)
    if n_boot <= 0 or labels.size < 2:
        return Estimate(point, math.nan, math.nan, int(labels.size))
    by_cluster = [np.flatnonzero(members == c) for c in range(labels.size)]
    samples = [float(statistic(np.concatenate([by_cluster[c] for c in draw])))
               for draw in _bootstrap_indices(labels.size, n_boot, seed)]
    samples = [v for v in samples if not math.isnan(v)]
    if not samples:
        return Estimate(point, math.nan, math.nan, int(labels.size))
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(samples, [tail, 100.0 - tail])
    return Estimate(point, float(low), float(high), int(labels.size))


def _weighted_pearson_rows(a: np.ndarray, b: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """`pearson` of (a, b) under each row of `weights` (B, n): item i counted weights[b, i]
    times, as in a resample that repeats it (nan where a side is constant)."""
    total = weights.sum(axis=1, keepdims=True)

    def centred(values):
        d = values - (weights * values).sum(axis=1, keepdims=True) / total
        spread = np.abs(np.where(weights > 0, d, 0.0)).max(axis=1, keepdims=True)
        return d / np.where(spread > 0, spread, 1.0)  # scale free, as `_pearson_rows`

    da, db = centred(a), centred(b)
    va, vb = (weights * da * da).sum(axis=1), (weights * db * db).sum(axis=1)
    constant = (va == 0) | (vb == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(constant, np.nan, (weights * da * db).sum(axis=1) / np.sqrt(np.where(constant, 1.0, va * vb)))


def _weighted_average_ranks(codes: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """`average_ranks` of the items (order-preserving integer `codes`) in each weighted resample:
    a code counted c times after `before` smaller ones ranks before + (c + 1) / 2."""
    width = int(codes.max()) + 1
    counts = np.zeros((weights.shape[0], width))
    for k in range(weights.shape[0]):
        counts[k] = np.bincount(codes, weights=weights[k], minlength=width)
    before = np.cumsum(counts, axis=1) - counts
    return (before + (counts + 1) / 2.0)[:, codes]


RESAMPLES_AT_ONCE = 100  # weighted resamples held at once: (100, n) arrays, not (n_boot, n)


def cluster_bootstrap_estimates(
    x, y, clusters, names: Sequence[str] = COEFFICIENTS, *, n_boot: int = 1000, seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Estimate]:
    """Each coefficient in `names` on (x, y) with an interval that resamples whole `clusters`
    (:func:`cluster_bootstrap`'s resamples, shared by every coefficient): Kendall's from the full
    sample's dense ranks on each resample, Pearson and Spearman on all resamples at once as
    weighted sums (a cluster drawn twice counts its items twice). `n` is the number of items."""
    x, y = _paired(x, y)
    clusters = np.asarray(clusters)
    if clusters.shape != x.shape:
        raise ValueError(f"clusters has {clusters.size} entries for {x.size} items")
    for name in names:
        coefficient(name)
    point = _coefficients(x, y, names)
    labels, members = np.unique(clusters, return_inverse=True)
    if n_boot <= 0 or labels.size < 2:
        return {name: Estimate(point[name], math.nan, math.nan, x.size) for name in names}
    draws = _bootstrap_indices(labels.size, n_boot, seed)
    samples: dict[str, list] = {name: [] for name in names}
    if np.isnan(x).any() or np.isnan(y).any():  # each resample as it comes, as `_bootstrap_samples`
        by_cluster = [np.flatnonzero(members == c) for c in range(labels.size)]
        for draw in draws:
            i = np.concatenate([by_cluster[c] for c in draw])
            for name, value in _coefficients(x[i], y[i], names).items():
                samples[name].append(value)
    else:
        rx, ry = _dense_ranks(x), _dense_ranks(y)
        kendall = [name for name in names if name in ("kendall_b", "kendall_c")]
        for start in range(0, n_boot, RESAMPLES_AT_ONCE):
            chunk = draws[start:start + RESAMPLES_AT_ONCE]
            rows = np.arange(chunk.shape[0])[:, None]
            drawn = np.bincount((chunk + labels.size * rows).ravel(), minlength=chunk.shape[0] * labels.size)
            weights = drawn.reshape(chunk.shape[0], labels.size)[:, members].astype(float)  # (B, n) item counts
            if "pearson" in names:
                samples["pearson"] += list(_weighted_pearson_rows(x, y, weights))
            if "spearman" in names:
                samples["spearman"] += list(_weighted_pearson_rows(_weighted_average_ranks(rx, weights),
                                                                   _weighted_average_ranks(ry, weights), weights))
            for row in weights.astype(np.int64):
                i = np.repeat(np.arange(x.size), row)
                for name, value in _coefficients(x[i], y[i], kendall, rx[i], ry[i]).items():
                    samples[name].append(value)
    tail = (1.0 - confidence) / 2.0 * 100.0
    estimates = {}
    for name in names:
        values = np.array(samples[name], dtype=float)
        values = values[~np.isnan(values)]
        low, high = np.percentile(values, [tail, 100.0 - tail]) if values.size else (math.nan, math.nan)
        estimates[name] = Estimate(point[name], float(low), float(high), x.size)
    return estimates


def cluster_bootstrap_estimate(
    x, y, clusters, name: str = "kendall_c", *, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95,
    statistic: Callable[[np.ndarray, np.ndarray], float] | None = None,
) -> Estimate:
    """Coefficient `name` (or `statistic(x, y)`) of (x, y) with a cluster-bootstrap interval
    (:func:`cluster_bootstrap`)."""
    x, y = _paired(x, y)
    clusters = np.asarray(clusters)
    if clusters.shape != x.shape:
        raise ValueError(f"clusters has {clusters.size} entries for {x.size} items")
    measure = statistic or coefficient(name)
    return cluster_bootstrap(lambda index: measure(x[index], y[index]), clusters, n_boot=n_boot, seed=seed,
                             confidence=confidence)


BOOTSTRAP_CELLS = 4_000_000  # resampled values drawn at once by mean_estimate


def mean_estimate(values, *, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95) -> Estimate:
    """Mean of `values` (NaN dropped) with a seeded percentile-bootstrap interval.

    Resamples are drawn a few at a time, so a corpus of any size fits in memory.
    """
    x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    point = float(x.mean())
    if n_boot <= 0 or x.size < 2:
        return Estimate(point, math.nan, math.nan, x.size)
    rng = np.random.default_rng(seed)
    step = max(1, BOOTSTRAP_CELLS // x.size)
    means = np.concatenate([
        x[rng.integers(0, x.size, size=(min(step, n_boot - start), x.size))].mean(axis=1)
        for start in range(0, n_boot, step)
    ])
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return Estimate(point, float(low), float(high), x.size)


@dataclass(frozen=True)
class Comparison:
    """Difference coef(metric_a, human) - coef(metric_b, human) on the same items."""

    coefficient: str
    value_a: float
    value_b: float
    difference: float
    low: float
    high: float
    p_value: float
    test: str
    n: int


def paired_bootstrap_test(
    human, metric_a, metric_b, name: str = "kendall_c", *, n_boot: int = 1000, seed: int = 0,
    confidence: float = 0.95,
) -> Comparison:
    """Paired bootstrap over items for the difference of two metrics' correlations.

    Items are resampled once per replicate and both coefficients are computed on the same
    resample, so the dependence between the two metrics (same items, same humans) is kept.
    Two-sided p = 2 * min(share of replicates with difference <= 0, share >= 0), capped at 1
    (Koehn 2004 style paired resampling).
    """
    human, metric_a = _paired(human, metric_a)
    _, metric_b = _paired(human, metric_b)
    function = coefficient(name)
    value_a = function(metric_a, human)
    value_b = function(metric_b, human)
    differences = []
    for index in _bootstrap_indices(human.size, n_boot, seed):
        differences.append(function(metric_a[index], human[index]) - function(metric_b[index], human[index]))
    differences = np.asarray(differences)
    differences = differences[~np.isnan(differences)]
    if differences.size == 0:
        low = high = p_value = math.nan
    else:
        tail = (1.0 - confidence) / 2.0 * 100.0
        low, high = (float(v) for v in np.percentile(differences, [tail, 100.0 - tail]))
        p_value = min(1.0, 2.0 * min((differences <= 0).mean(), (differences >= 0).mean()))
    return Comparison(name, value_a, value_b, value_a - value_b, low, high, float(p_value), "paired bootstrap", human.size)


def williams_test(human, metric_a, metric_b) -> Comparison:
    """Williams' t-test for two dependent Pearson correlations sharing the human variable.

    t = (r12 - r13) sqrt((n-1)(1+r23)) / sqrt(2K (n-1)/(n-3) + (r12+r13)^2/4 (1-r23)^3),
    K = 1 - r12^2 - r13^2 - r23^2 + 2 r12 r13 r23, df = n - 3; two-sided p.
    """
    human, metric_a = _paired(human, metric_a)
    _, metric_b = _paired(human, metric_b)
    n = human.size
    if n < 4:
        raise ValueError("Williams' test needs at least 4 items")
    r12 = pearson(human, metric_a)
    r13 = pearson(human, metric_b)
    r23 = pearson(metric_a, metric_b)
    k = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23
    denominator = math.sqrt(max(2 * k * (n - 1) / (n - 3) + ((r12 + r13) ** 2 / 4) * (1 - r23) ** 3, 0.0))
    if denominator == 0 or any(math.isnan(r) for r in (r12, r13, r23)):
        t_value, p_value = math.nan, math.nan
    else:
        t_value = (r12 - r13) * math.sqrt((n - 1) * (1 + r23)) / denominator
        p_value = float(2 * _scipy_stats.t.sf(abs(t_value), df=n - 3))
    return Comparison("pearson", r12, r13, r12 - r13, math.nan, math.nan, p_value, "Williams t-test", n)


def metric_columns(table: pd.DataFrame, human_col: str = "human") -> list[str]:
    """Numeric columns of `table` that hold metric scores (everything not reserved)."""
    return [
        column
        for column in table.columns
        if column != human_col and column not in RESERVED_COLUMNS and pd.api.types.is_numeric_dtype(table[column])
    ]


def _check_columns(table: pd.DataFrame, columns: Iterable[str]) -> None:
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise ValueError(f"missing column(s) {', '.join(map(repr, missing))}; table has {', '.join(map(str, table.columns))}")


def correlation_table(
    table: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    *,
    human_col: str = "human",
    group_by: Sequence[str] = (),
    coefficients: Sequence[str] = COEFFICIENTS,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    cluster_col: str | None = None,
) -> pd.DataFrame:
    """One row per (group..., metric): n and, per coefficient, value, low and high.

    Rows where the metric or the human score is missing are dropped per metric (a metric that
    needs references simply has fewer items). `group_by` names columns such as `collection`
    and `lang`; a group with fewer than two items gives nan. With `cluster_col` (e.g.
    `image_id`, when the table has it) the intervals resample whole clusters: rows of one image
    (its captions, or one caption rated several times) are not independent, and a row bootstrap
    is too narrow (:func:`cluster_bootstrap`).
    """
    metrics = list(metrics) if metrics is not None else metric_columns(table, human_col)
    if not metrics:
        raise ValueError("no metric columns to correlate")
    for name in coefficients:
        coefficient(name)
    _check_columns(table, [human_col, *metrics, *group_by, *([cluster_col] if cluster_col else [])])
    groups = table.groupby(list(group_by), sort=True, dropna=False) if group_by else [((), table)]
    rows = []
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        for metric in metrics:
            pair = part[[metric, human_col]].apply(pd.to_numeric, errors="coerce").dropna()
            row = dict(zip(group_by, key))
            row.update(metric=metric, n=len(pair))
            if cluster_col is None:
                estimates = bootstrap_estimates(
                    pair[metric].to_numpy(), pair[human_col].to_numpy(), coefficients,
                    n_boot=n_boot, seed=seed, confidence=confidence,
                )
            else:
                estimates = cluster_bootstrap_estimates(
                    pair[metric].to_numpy(), pair[human_col].to_numpy(),
                    part.loc[pair.index, cluster_col].astype(str).to_numpy(), coefficients,
                    n_boot=n_boot, seed=seed, confidence=confidence,
                )
            for name, estimate in estimates.items():
                row[name] = estimate.value
                row[f"{name}_low"] = estimate.low
                row[f"{name}_high"] = estimate.high
            rows.append(row)
    return pd.DataFrame(rows)


def compare_metrics(
    table: pd.DataFrame,
    metric_a: str,
    metric_b: str,
    *,
    human_col: str = "human",
    coefficient_name: str = "kendall_c",
    test: str = "bootstrap",
    n_boot: int = 1000,
    seed: int = 0,
) -> Comparison:
    """Is metric_a's correlation with humans different from metric_b's on the same items?

    test "bootstrap" (any coefficient) or "williams" (Pearson only). Only items that both
    metrics scored are used.
    """
    _check_columns(table, [human_col, metric_a, metric_b])
    data = table[[human_col, metric_a, metric_b]].apply(pd.to_numeric, errors="coerce").dropna()
    if test == "williams":
        if coefficient_name != "pearson":
            raise ValueError("Williams' test compares Pearson correlations; use coefficient 'pearson'")
        return williams_test(data[human_col], data[metric_a], data[metric_b])
    if test != "bootstrap":
        raise ValueError(f"test must be 'bootstrap' or 'williams', got {test!r}")
    return paired_bootstrap_test(
        data[human_col], data[metric_a], data[metric_b], coefficient_name, n_boot=n_boot, seed=seed
    )


def system_level_correlation(
    table: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    *,
    human_col: str = "human",
    system_col: str = "system",
    group_by: Sequence[str] = (),
    coefficients: Sequence[str] = ("pearson", "kendall_b", "spearman"),
) -> pd.DataFrame:
    """Correlation between per-system means of metric and human scores, one row per
    (group..., metric).

    Each system (the captioning model that wrote the captions) is reduced to the mean of its
    items' scores; with few systems no bootstrap interval is given.
    """
    metrics = list(metrics) if metrics is not None else metric_columns(table, human_col)
    _check_columns(table, [human_col, system_col, *metrics, *group_by])
    groups = table.groupby(list(group_by), sort=True) if group_by else [((), table)]
    rows = []
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        for metric in metrics:
            data = part[[system_col, metric, human_col]].dropna()
            means = data.groupby(system_col)[[metric, human_col]].mean()
            row = {**dict(zip(group_by, key)), "metric": metric, "systems": len(means)}
            for name in coefficients:
                row[name] = coefficient(name)(means[metric].to_numpy(), means[human_col].to_numpy())
            rows.append(row)
    return pd.DataFrame(rows)
