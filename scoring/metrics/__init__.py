"""Metric families: one module per family, one factory keyed by the registry's `family`."""
from __future__ import annotations

from typing import TYPE_CHECKING

from scoring.registry import MetricSpec

if TYPE_CHECKING:  # pragma: no cover
    from scoring.metrics.base import Metric


def build_metric(spec: MetricSpec) -> Metric:
    """The metric object for a registry entry (no model is loaded here). Every family
    subclasses `Metric`, so the Scorer calls its hooks without asking whether they exist."""
    from scoring.metrics import caplens_r, clip_score, coco, mcs, specs, umic

    families = {
        "clip-s": clip_score.ClipScore,
        "refclip-s": clip_score.RefClipScore,
        "mcs": mcs.MultilingualClipScore,
        "specs": specs.Specs,
        "itm": umic.ImageTextMatch,
        "caplens-r": caplens_r.CaplensR,
        "bleu": coco.Bleu,
        "meteor": coco.Meteor,
        "rouge-l": coco.RougeL,
        "cider": coco.CiderD,
        "spice": coco.Spice,
    }
    return families[spec.family](spec)
