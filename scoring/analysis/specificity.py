"""Specificity rates SR_pos and SR_neg (SPECS, Chen et al. 2025, section 3.2, eq. 1-2).

A caption is split into ordered detail units d1..dm; c_j = d1 + ... + dj is a partial caption.
A positive triplet (i, c_j, c_j + d+) adds the next true unit, a negative triplet
(i, c_j, c_j + d-) adds a unit taken from another image's caption.

SR_pos = share of positive triplets where theta(i, c_j + d+) > theta(i, c_j)   (eq. 1)
SR_neg = share of negative triplets where theta(i, c_j + d-) < theta(i, c_j)

SR_neg follows the paper's prose ("adding an irrelevant detail decreases the similarity");
eq. 2 as printed has the inequality the other way round, which would reward metrics that
like wrong details. Range [0, 1] each; SPECS Table 1 reports them x 100 and their mean as
the specificity score. Ties count as failures (strict inequalities, as in the equations).

Input: one row per triplet with `kind` ("pos"/"neg"), `metric`, `base` (score of c_j) and
`extended` (score of c_j + d), optionally `lang`.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from scoring.analysis.pairwise import paired_scores

KINDS = ("pos", "neg")


def specificity_rate(base, extended, kind: str) -> float:
    """SR for one kind: share of triplets where the extension moves the score the right way."""
    if kind not in KINDS:
        raise ValueError(f"kind must be 'pos' or 'neg', got {kind!r}")
    base, extended = paired_scores(base, extended, "base and extended")
    if not base.size:
        return float("nan")
    success = extended > base if kind == "pos" else extended < base
    return float(success.mean())


def specificity_table(triplets: pd.DataFrame, *, group_by: Sequence[str] = ("metric",)) -> pd.DataFrame:
    """One row per group: sr_pos, sr_neg, their mean `specificity`, n_pos, n_neg."""
    group_by = [c for c in group_by if c in triplets.columns] or []
    missing = {"kind", "base", "extended"} - set(triplets.columns)
    if missing:
        raise ValueError(f"triplet table needs column(s) {', '.join(sorted(missing))}")
    unknown = set(triplets["kind"].unique()) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown triplet kind(s) {sorted(map(str, unknown))}; use 'pos' or 'neg'")
    groups = triplets.groupby(group_by, sort=True) if group_by else [((), triplets)]
    rows = []
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(group_by, key))
        for kind in KINDS:
            subset = part[part["kind"] == kind]
            row[f"sr_{kind}"] = specificity_rate(subset["base"], subset["extended"], kind)
            row[f"n_{kind}"] = int(subset[["base", "extended"]].notna().all(axis=1).sum())
        rates = [row["sr_pos"], row["sr_neg"]]
        row["specificity"] = float(np.nanmean(rates)) if not all(np.isnan(rates)) else float("nan")
        rows.append(row)
    return pd.DataFrame(rows, columns=[*group_by, "sr_pos", "sr_neg", "specificity", "n_pos", "n_neg"])

