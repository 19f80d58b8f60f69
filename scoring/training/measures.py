"""What each held-out number of a training run means: its name, which way is better, its scale,
and why it can be undefined.

The recipes' ``evaluate`` hooks return plain keys (``R@1``, ``drop_de``, ``tau_c`` …); the Train
tab, ``caplens finetune`` and a metric version's card use :func:`describe` and :func:`compare`
to say what a before/after pair means instead of showing a bare number or a NaN.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from scoring.language_id import LANGUAGES

HIGHER, LOWER, NEITHER = "higher", "lower", "neither"


@dataclass(frozen=True)
class Measure:
    key: str
    name: str
    better: str  # HIGHER, LOWER or NEITHER (context only)
    scale: str
    undefined: str  # why the number can be missing (NaN)


def _fixed(key: str, recipe: str | None) -> Measure | None:
    if key == "mse" and recipe == "mcs-teacher":
        return Measure(key, "squared distance of the student's caption embedding to the teacher's", LOWER,
                       "0 and up (0 = same embedding)", "no held-out captions")
    table = {
        "mse": ("mean squared error of the predicted score to the mean human rating", LOWER,
                "0 and up (ratings on 0–1)", "no held-out ratings"),
        "cos_to_teacher": ("cosine of the student's caption embedding to the teacher's", HIGHER, "−1 to 1",
                           "no held-out captions"),
        "SR_pos": ("specificity rate, true details: share of triplets where adding a true detail raises the score",
                   HIGHER, "0 to 1 (0.5 = chance)", "no held-out triplets with a true detail"),
        "SR_neg": ("specificity rate, false details: share of triplets where adding a false detail lowers the score",
                   HIGHER, "0 to 1 (0.5 = chance)", "no held-out triplets with a false detail"),
        "specificity": ("mean of the two specificity rates", HIGHER, "0 to 1 (0.5 = chance)",
                        "a specificity rate is undefined"),
        "drop_mean": ("mean over languages of the % fall from original to perturbed caption", HIGHER,
                      "% (0 = perturbations unnoticed; below 0 = perturbed captions scored higher)",
                      "a language's drop is undefined"),
        "mcs_original": ("mean MCS of the original (unperturbed) held-out captions", NEITHER,
                         "0 to 2.5 (context for the drops)", "no held-out captions"),
        "pairwise_accuracy": ("pairwise accuracy: share of (caption, negative) pairs where the true caption "
                              "scores higher", HIGHER, "0 to 1 (0.5 = chance)", "no held-out negatives"),
        "tau_c": ("Kendall tau_c between the scores and the mean human ratings", HIGHER, "−1 to 1 (0 = no relation)",
                  "the held-out ratings or scores do not vary"),
    }
    if key in table:
        return Measure(key, *table[key])
    return None


def describe(key: str, recipe: str | None = None) -> Measure:
    """The measure behind a held-out key of ``recipe``'s evaluation."""
    fixed = _fixed(key, recipe)
    if fixed is not None:
        return fixed
    if match := re.fullmatch(r"R@(\d+)", key):
        k = match.group(1)
        return Measure(key, f"retrieval recall@{k}: share of held-out images whose own caption (the first held-out "
                       f"one of each image) ranks it in the top {k} of all held-out images (with {k} or fewer "
                       "held-out images it is always 1)", HIGHER, "0 to 1", "no held-out images")
    if match := re.fullmatch(r"drop_(\w+)", key):
        return Measure(key, f"% fall of MCS from original to perturbed caption, {match.group(1)} "
                       "(mean over the perturbations)", HIGHER,
                       "% (0 = perturbations unnoticed; below 0 = perturbed captions scored higher)",
                       "the original captions' MCS averages about 0 in this language, so a % change is undefined")
    if match := re.fullmatch(r"pairwise_twin_(\w+)", key):  # the ITM recipe's counterfactual twins
        return Measure(key, f"share of held-out counterfactual twins ({match.group(1)} edits) where each caption "
                       "scores its own image above the other", HIGHER, "0 to 1 (0.5 = chance)",
                       f"no held-out {match.group(1)} twins")
    if match := re.fullmatch(r"pairwise_([\w-]+)", key):  # UMIC's kinds: keyword-substitution, repeat-remove, ...
        kind = match.group(1)
        return Measure(key, f"pairwise accuracy against {kind} negatives: share where the true caption "
                       "scores higher", HIGHER, "0 to 1 (0.5 = chance)", f"no held-out {kind} negatives")
    if match := re.fullmatch(r"tau_c_(\w+)", key):  # CapLens-R per language (tau_c_de) and caption style (tau_c_long)
        part = match.group(1)
        which = f"{LANGUAGES[part]} captions" if part in LANGUAGES else f"{part} captions"
        return Measure(key, f"Kendall tau_c between the scores and the mean human ratings, {which} only", HIGHER,
                       "−1 to 1 (0 = no relation)", f"fewer than two held-out {which}, or their ratings do not vary")
    return Measure(key, key, NEITHER, "as the recipe reports it", "the recipe reported no value")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def compare(before: dict[str, Any], after: dict[str, Any], recipe: str | None = None) -> list[dict[str, Any]]:
    """One row per held-out key: the measure's name, which way is better and its scale; before,
    after and their change as numbers or None; and ``verdict``, the change in words ("better",
    "worse", "unchanged", or why there is no change to show)."""
    rows = []
    for key in sorted(set(before) | set(after)):
        measure = describe(key, recipe)
        b, a = _number(before.get(key)), _number(after.get(key))
        change = None if a is None or b is None else a - b
        if change is None:
            missing = [side for side, value in (("before", b), ("after", a)) if value is None]
            verdict = f"no change to show: {' and '.join(missing)} undefined ({measure.undefined})"
        elif abs(change) < 1e-12:
            verdict = "unchanged"
        elif measure.better == NEITHER:
            verdict = "moved (neither direction is better by itself)"
        else:
            verdict = "better" if (change > 0) == (measure.better == HIGHER) else "worse"
        rows.append({"key": key, "measure": measure.name, "better": measure.better, "scale": measure.scale,
                     "before": b, "after": a, "change": change, "verdict": verdict})
    return rows
