"""SPECS (SPECificity-enhanced CLIPScore) on a LongCLIP model, on one of two scales.

The SPEC model reads 248 text tokens (LongCLIP positions), so long, detailed captions are
scored whole; no weight w and no prompt prefix.  SPECS recommends CLIP-S for captions under
60 tokens and SPECS for longer ones.

Scales (registry field ``scale`` of a SPECS metric):

* ``"paper"`` (default): max(cos(image, caption), 0), the paper's definition;
* ``"released"``: clamp((cos + 1) / 2, 0), what the released SPECS code prints.  Use it to
  compare with numbers produced by that code.  It keeps apart the captions with a negative
  cosine, which the paper's scale ties at 0; otherwise the ranking is the same.
"""
from __future__ import annotations

import numpy as np

from scoring.metrics.base import MetricInfo
from scoring.metrics.clip_score import ClipScore
from scoring.registry import MetricSpec, RegistryError

CITATION = (
    "SPECS: Specificity-Enhanced CLIP-Score for Long Image Caption Evaluation (2025); "
    "Zhang et al., Long-CLIP, ECCV 2024"
)
SCALES = {
    "paper": ("max(cos, 0), the paper's definition", lambda cos: np.clip(cos, 0, None)),
    "released": ("clamp((cos + 1)/2, 0), the scale of the released SPECS code", lambda cos: np.clip((cos + 1) / 2, 0, None)),
}


def specs_values(image_embeddings: np.ndarray, text_embeddings: np.ndarray, scale: str = "paper") -> np.ndarray:
    """SPECS of row-paired, L2-normalised embeddings on ``scale`` ("paper" or "released")."""
    if scale not in SCALES:
        raise ValueError(f"SPECS scale must be one of {', '.join(SCALES)}, not {scale!r}")
    cos = np.sum(np.asarray(image_embeddings, np.float64) * np.asarray(text_embeddings, np.float64), axis=1)
    return SCALES[scale][1](cos)


class Specs(ClipScore):
    def __init__(self, spec: MetricSpec):
        super().__init__(spec)
        self.scale = spec.extra.get("scale", "paper")
        if self.scale not in SCALES:
            raise RegistryError(f"metric {spec.name!r}: scale {self.scale!r}; expected one of {', '.join(SCALES)}")

    def info(self, backbone_label: str) -> MetricInfo:
        return MetricInfo(
            name=self.spec.name, family=self.spec.family, needs_image=True, needs_references=False,
            languages=("en",), backbone=backbone_label,
            description=(
                "Cosine between image and caption embeddings of a specificity-enhanced LongCLIP (248 text tokens), "
                f"on the {self.scale} scale: {SCALES[self.scale][0]}; rewards correct extra detail and penalises "
                "wrong detail. Suited to long captions."
            ),
            range=(0.0, 1.0), citation=CITATION, w=self.spec.w, prefix=self.spec.prefix,
        )

    def pair_scores(self, image_embeddings: np.ndarray, text_embeddings: np.ndarray) -> np.ndarray:
        return specs_values(image_embeddings, text_embeddings, self.scale)
