"""Perturbation robustness in the layout of PR-MCS Table 7 (Kim et al. 2023, appendix H).

For each language and metric: the mean score of the original captions, the mean score of
the captions perturbed by each operation with its change relative to the original mean,
and "Average" = the mean of the per-operation means with its change. The change is
100 * (perturbed - original) / original, so a metric that notices the damage shows a
negative number (e.g. PR-MCS, English, Masking: 0.0112 (-99.21%)).

A change counts toward robustness only when it is negative: a perturbed caption scored
*higher* than the original (e.g. *MCS, English, Repetition: +0.21%) means the metric missed
that perturbation, and must not offset drops elsewhere. `robustness` is therefore the mean
over operations of max(0, -change), and `missed_ops` counts operations with change >= 0.

Input is a long table, one row per scored caption: `lang`, `metric`, `op` ("original" for
the unperturbed caption, else the operation name), `score`, and optionally `item_id` (the
original a perturbed caption comes from) and `noop` (True where the operation could not
change the caption; such rows are left out, and with `item_id` so are their originals from
that op's comparison: both sides of every change cover the same captions).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from scoring.perturb.ops import OP_ALIASES, PRMCS_OPS

ORIGINAL = "original"


def op_name(op) -> str:
    """An op as the table names it: lower case, an alias as its operation ("permutation" is
    "jumble"); names outside the library's operations (e.g. a data set's) stay as they are."""
    name = str(op).strip().lower()
    return OP_ALIASES.get(name, name)


# Below this an original is zero for a relative change: the COCO toolkit's BLEU smoothing puts an
# order without a single matching n-gram at precision 1e-15 / count, so BLEU-4 stays under
# (1e-15) ** (1 / 4) = 5.6e-4 (BLEU-3 1e-5, BLEU-2 3e-8) on captions that share no 4-gram with
# their references. A caption's BLEU-4 of 3.9e-5 falling to 3.2e-5 was shown as -19 % of a
# "0.0000"; such changes are the smoothing's, so they are reported as undefined.
NEGLIGIBLE_ORIGINAL = 1e-3


def undefined_change(original: float | None) -> bool:
    """No relative change is defined off this original: missing, not finite, or ~0."""
    return original is None or not np.isfinite(original) or abs(original) < NEGLIGIBLE_ORIGINAL


def percent_change(original: float, perturbed: float) -> float:
    """100 (perturbed - original) / original; nan when the original mean is ~0 or missing."""
    if undefined_change(original):
        return float("nan")
    return 100.0 * (perturbed - original) / original


def robustness_table(
    scores: pd.DataFrame, ops: Sequence[str] | None = None, *, group_by: Sequence[str] = ("lang", "metric")
) -> pd.DataFrame:
    """Numeric Table-7 frame, one row per (lang, metric).

    Columns: original, then per op `<op>` (mean), `<op>_original` (mean of the same captions'
    originals), `<op>_change` (%) and `<op>_n` (perturbed captions), then `average`,
    `average_original`, `average_change`, `robustness` (mean of max(0, -change) over ops, in
    %), `missed_ops` and `n_original`. Ops default to the PR-MCS five in paper order, followed
    by any other op present in the data; an alias (`permutation`) counts as its operation.

    Both sides of a change cover the same captions: with an `item_id` column linking each
    perturbed caption to its original, an op's change is measured against the originals of
    the captions it perturbed, so a no-op perturbation (dropped) or a caption without that
    op leaves its original out of that op's comparison too, as `caplens world measure` does.
    Without `item_id` every original is compared with every perturbed caption (PR-MCS Table
    7, where each caption has every op); no-op rows then cannot be paired and are refused.
    """
    required = {"op", "score", *group_by}
    missing = required - set(scores.columns)
    if missing:
        raise ValueError(f"robustness table needs column(s) {', '.join(sorted(missing))}")
    data = scores.copy()
    data["score"] = pd.to_numeric(data["score"], errors="coerce")
    data = data.dropna(subset=["score"])
    if data.empty:
        raise ValueError("no numeric scores in the table (were the metrics unavailable?)")
    paired = "item_id" in data.columns
    if "noop" in data.columns:
        noop = data["noop"].fillna(False).astype(bool)
        if noop.any() and not paired:
            raise ValueError("no-op rows need an item_id column linking each perturbed caption to its original, "
                             "so that both means cover the same captions")
        data = data[~noop]
    data["op"] = data["op"].map(op_name)
    present = [op for op in data["op"].unique() if op != ORIGINAL]
    if ops is None:
        ops = [op for op in PRMCS_OPS if op in present] + sorted(op for op in present if op not in PRMCS_OPS)
    else:
        ops = [op_name(op) for op in ops]
    if not ops:
        raise ValueError("no perturbed captions in the table (every op is 'original')")
    group_by = list(group_by)
    originals = data[data["op"] == ORIGINAL]
    if originals.empty:
        raise ValueError("no original captions in the table (op == 'original')")
    rows = []
    for key, group in data.groupby(group_by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        base = group[group["op"] == ORIGINAL]
        if base.empty:
            continue
        record = dict(zip(group_by, key))
        record["original"] = float(base["score"].mean())
        op_means, op_originals, changes = [], [], []
        for op in ops:
            perturbed = group[group["op"] == op]
            if paired:
                base_op = base[base["item_id"].isin(perturbed["item_id"])]
                perturbed = perturbed[perturbed["item_id"].isin(base_op["item_id"])]
            else:
                base_op = base
            mean = float(perturbed["score"].mean()) if len(perturbed) else np.nan
            before = float(base_op["score"].mean()) if len(perturbed) and len(base_op) else np.nan
            change = percent_change(before, mean)
            record[op] = mean
            record[f"{op}_original"] = before
            record[f"{op}_change"] = change
            record[f"{op}_n"] = int(len(perturbed))
            if np.isfinite(mean):
                op_means.append(mean)
                op_originals.append(before)
                changes.append(change)
        average = float(np.mean(op_means)) if op_means else np.nan
        average_original = float(np.mean(op_originals)) if op_originals else np.nan
        record["average"] = average
        record["average_original"] = average_original
        record["average_change"] = percent_change(average_original, average)
        finite = [c for c in changes if np.isfinite(c)]
        record["robustness"] = float(np.mean([max(0.0, -c) for c in finite])) if finite else np.nan
        record["missed_ops"] = int(sum(c >= 0 for c in finite))
        record["n_original"] = int(len(base))
        rows.append(record)
    return pd.DataFrame(rows)


TABLE7_READING = ("Each operation's cell: the perturbed captions' mean score (its change in %). An operation that left "
                  "a caption unchanged leaves that caption out on both sides, so the change is measured against the "
                  "originals of the captions it changed; where their mean differs from the Original column, the cell "
                  "names it: \"0.1670 (-7.66% vs 0.1809)\".")


def format_table7(table: pd.DataFrame, ops: Sequence[str] | None = None, digits: int = 4) -> pd.DataFrame:
    """Printable Table-7 cells: 'mean (change%)' per op and for Average, as in the paper. Where
    an op's change is measured against the originals of only the captions it changed (paired
    rows), and their mean is not the Original column's, the cell names it: 'mean (change% vs
    base)', so the change is never read against the wrong number."""
    if ops is None:
        ops = [c[: -len("_change")] for c in table.columns if c.endswith("_change") and c != "average_change"]
    keys = [c for c in ("lang", "metric") if c in table.columns]
    out = table[keys].copy()
    out["Original"] = table["original"].map(lambda v: f"{v:.{digits}f}")

    def cell(mean: float, change: float, base: float, original: float) -> str:
        if not (np.isfinite(mean) and np.isfinite(change)):
            return "-"
        against = f" vs {base:.{digits}f}" if f"{base:.{digits}f}" != f"{original:.{digits}f}" else ""
        return f"{mean:.{digits}f} ({change:+.2f}%{against})"

    for op in [*ops, "average"]:
        bases = table[f"{op}_original"] if f"{op}_original" in table.columns else table["original"]
        out[op.capitalize()] = [cell(*values) for values in zip(table[op], table[f"{op}_change"], bases,
                                                                 table["original"])]
    out["Robustness"] = table["robustness"].map(lambda v: f"{v:.2f}" if np.isfinite(v) else "-")
    return out


def paired_changes(scores: pd.DataFrame, *, item_col: str = "item_id") -> pd.DataFrame:
    """Per perturbed caption: its score, its original's score and the % change.

    Useful for the scatter/box plots of single failures; needs `item_id` linking each
    perturbed caption to its original (same lang and metric).
    """
    keys = [item_col, "lang", "metric"]
    missing = set(keys + ["op", "score"]) - set(scores.columns)
    if missing:
        raise ValueError(f"paired changes need column(s) {', '.join(sorted(missing))}")
    originals = scores[scores["op"] == ORIGINAL][keys + ["score"]].rename(columns={"score": "original_score"})
    perturbed = scores[scores["op"] != ORIGINAL]
    merged = perturbed.merge(originals, on=keys, how="inner")
    merged["change"] = [percent_change(o, p) for o, p in zip(merged["original_score"], merged["score"])]
    return merged


def detection_rates(scores: pd.DataFrame, *, item_col: str = "item_id") -> pd.DataFrame:
    """Per (lang, metric, op): share of perturbed captions scored strictly below their own
    original (`detected`), with n. The per-caption view of the same rule: a change counts
    only when it is a drop."""
    changes = paired_changes(scores[~scores["noop"].fillna(False).astype(bool)] if "noop" in scores else scores,
                             item_col=item_col)
    changes = changes.dropna(subset=["score", "original_score"])
    if changes.empty:
        raise ValueError("no perturbed caption could be paired with its original")
    changes["detected"] = changes["score"] < changes["original_score"]
    changes["op"] = changes["op"].map(op_name)
    grouped = changes.groupby(["lang", "metric", "op"])["detected"]
    return grouped.agg(detected="mean", n="size").reset_index()
