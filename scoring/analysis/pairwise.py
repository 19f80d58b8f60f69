"""Pairwise accuracy: Pascal-50S (Vedantam et al. 2015) and FOIL (Shekhar et al. 2017).

Pascal-50S gives 4,000 caption pairs (A, B) for 1,000 PASCAL images in four categories:
HC (two correct human captions), HI (a human caption vs. a human caption of another image),
HM (human vs. machine) and MM (two machine captions). About 48 annotators each chose which
caption is closer to a reference. The human label of a pair is the majority of those votes;
an exact tie is broken by a seeded coin flip, as in the CLIPScore / PAC-S evaluation code.
A metric is right on a pair when it scores the human-preferred caption higher; a metric tie
counts as half right (it prefers neither). Accuracy is reported per category and as the
mean of the four category accuracies (the "Mean" column of the CLIPScore and PAC-S tables).

FOIL pairs a correct COCO caption with a "foil" differing in one noun. Accuracy is the share
of pairs where the metric scores the correct caption higher (ties count half).
Range of both: [0, 1] (tables print them x 100).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

PASCAL_CATEGORIES = ("HC", "HI", "HM", "MM")
_CATEGORY_CODES = {1: "HC", 2: "HI", 3: "HM", 4: "MM"}


def normalise_category(value) -> str:
    """'HC'/'hc' or the numeric codes 1..4 of pair_pascal.mat -> 'HC'..'MM'."""
    if isinstance(value, str) and value.strip().upper() in PASCAL_CATEGORIES:
        return value.strip().upper()
    try:
        return _CATEGORY_CODES[int(value)]
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"unknown Pascal-50S category {value!r}; expected HC, HI, HM, MM or 1-4") from None


def human_preference(votes_a, votes_b, *, seed: int = 0) -> np.ndarray:
    """1.0 where humans prefer A, 0.0 where they prefer B; exact ties broken by a seeded coin."""
    votes_a = np.asarray(votes_a, dtype=float)
    votes_b = np.asarray(votes_b, dtype=float)
    if votes_a.shape != votes_b.shape:
        raise ValueError("votes_a and votes_b differ in length")
    if (votes_a < 0).any() or (votes_b < 0).any():
        raise ValueError("vote counts must be non-negative")
    coin = np.random.default_rng(seed).random(votes_a.size) < 0.5
    return np.where(votes_a > votes_b, 1.0, np.where(votes_a < votes_b, 0.0, coin.astype(float)))


def pairwise_correct(score_preferred, score_other) -> np.ndarray:
    """1 where the preferred caption scores higher, 0.5 on a metric tie, 0 otherwise."""
    preferred = np.asarray(score_preferred, dtype=float)
    other = np.asarray(score_other, dtype=float)
    return np.where(preferred > other, 1.0, np.where(preferred == other, 0.5, 0.0))


def pascal_correct(categories, votes_a, votes_b, score_a, score_b, *, seed: int = 0):
    """(categories, correct, valid) per pair: whether the metric prefers the caption the
    annotators preferred (1, a metric tie 0.5, else 0). `score_a` / `score_b` hold one score per
    pair, or one row per draw of references (draws, pairs): the published Pascal-50S protocol
    averages the accuracy over 5 draws, so `correct` is each pair's mean over the draws, and a
    pair counts only where every draw scored it."""
    categories = np.array([normalise_category(c) for c in categories])
    score_a, score_b = np.atleast_2d(np.asarray(score_a, dtype=float)), np.atleast_2d(np.asarray(score_b, dtype=float))
    if not (categories.size == score_a.shape[1] == score_b.shape[1] == np.asarray(votes_a).size):
        raise ValueError("categories, votes and scores must have one entry per pair")
    prefers_a = human_preference(votes_a, votes_b, seed=seed) == 1.0
    correct = pairwise_correct(np.where(prefers_a, score_a, score_b), np.where(prefers_a, score_b, score_a))
    valid = ~(np.isnan(score_a) | np.isnan(score_b)).any(axis=0)
    return categories, correct.mean(axis=0), valid


def pascal50s_accuracy(categories, votes_a, votes_b, score_a, score_b, *, seed: int = 0) -> dict[str, float]:
    """Accuracy per Pascal-50S category plus their mean, for one metric.

    `score_a` / `score_b` are the metric's scores for captions A and B of each pair (or one row
    per draw of references: `pascal_correct`); pairs where a score is missing are left out (and
    reported nowhere else, so check `n`).
    """
    categories, correct, valid = pascal_correct(categories, votes_a, votes_b, score_a, score_b, seed=seed)
    result: dict[str, float] = {}
    for category in PASCAL_CATEGORIES:
        mask = valid & (categories == category)
        result[category] = float(correct[mask].mean()) if mask.any() else float("nan")
    present = [result[c] for c in PASCAL_CATEGORIES if not np.isnan(result[c])]
    result["mean"] = float(np.mean(present)) if present else float("nan")
    result["n"] = int(valid.sum())
    return result


def pascal50s_table(
    pairs: pd.DataFrame, metrics: Sequence[str], *, seed: int = 0, suffixes: tuple[str, str] = ("_a", "_b")
) -> pd.DataFrame:
    """One row per metric with HC, HI, HM, MM, mean (in [0, 1]) and n.

    `pairs` has `category`, `votes_a`, `votes_b` and, per metric M, columns M + "_a" and
    M + "_b" with the scores of the two captions. The same seed gives every metric the same
    tie-broken human labels.
    """
    rows = []
    for metric in metrics:
        columns = [metric + suffixes[0], metric + suffixes[1]]
        missing = [c for c in ["category", "votes_a", "votes_b", *columns] if c not in pairs.columns]
        if missing:
            raise ValueError(f"pairs table lacks column(s) {', '.join(missing)}")
        result = pascal50s_accuracy(
            pairs["category"], pairs["votes_a"], pairs["votes_b"], pairs[columns[0]], pairs[columns[1]], seed=seed
        )
        rows.append({"metric": metric, **result})
    return pd.DataFrame(rows, columns=["metric", *PASCAL_CATEGORIES, "mean", "n"])


def paired_scores(first, second, names: str) -> tuple[np.ndarray, np.ndarray]:
    """The two score arrays with every pair where either is NaN dropped (ValueError naming
    `names` when their lengths differ)."""
    first, second = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if first.shape != second.shape:
        raise ValueError(f"{names} differ in length")
    valid = ~(np.isnan(first) | np.isnan(second))
    return first[valid], second[valid]


def foil_accuracy(score_correct, score_foil) -> float:
    """Share of (correct, foil) pairs where the correct caption scores higher; ties count half."""
    correct, foil = paired_scores(score_correct, score_foil, "score_correct and score_foil")
    if not correct.size:
        return float("nan")
    return float(pairwise_correct(correct, foil).mean())


def foil_table(pairs: pd.DataFrame, metrics: Sequence[str], *, suffixes: tuple[str, str] = ("_correct", "_foil")) -> pd.DataFrame:
    """One row per metric: FOIL accuracy and the number of scored pairs."""
    rows = []
    for metric in metrics:
        columns = [metric + suffixes[0], metric + suffixes[1]]
        missing = [c for c in columns if c not in pairs.columns]
        if missing:
            raise ValueError(f"pairs table lacks column(s) {', '.join(missing)}")
        valid = pairs[columns].notna().all(axis=1)
        rows.append(
            {"metric": metric, "accuracy": foil_accuracy(pairs[columns[0]], pairs[columns[1]]), "n": int(valid.sum())}
        )
    return pd.DataFrame(rows, columns=["metric", "accuracy", "n"])
