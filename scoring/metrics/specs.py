"""SPECS (SPECificity-enhanced CLIPScore): max(cos(image, caption), 0) on a LongCLIP model.

The SPEC model reads 248 text tokens (LongCLIP positions), so long, detailed captions are
scored whole; no weight w and no prompt prefix.  SPECS recommends CLIP-S for captions under
60 tokens and SPECS for longer ones.
"""
from __future__ import annotations

import numpy as np

from scoring.metrics.base import MetricInfo, MetricOutput, ScoreContext, rows_with, scatter
from scoring.metrics.clip_score import ClipScore

# "paper": max(cos, 0) as SPECS defines the score; "released": clamp((cos + 1) / 2, 0), what the
# released SPECS code prints.  Same ranking, different numbers: pick the one you compare with.
SCALES = ("paper", "released")


def specs_values(image_embeddings: np.ndarray, text_embeddings: np.ndarray, scale: str = "paper") -> np.ndarray:
    if scale not in SCALES:
        raise ValueError(f"SPECS scale must be one of {', '.join(SCALES)}, not {scale!r}")
    cos = np.sum(np.asarray(image_embeddings, np.float64) * np.asarray(text_embeddings, np.float64), axis=1)
    return np.clip(cos, 0, None) if scale == "paper" else np.clip((cos + 1) / 2, 0, None)

CITATION = (
    "SPECS: Specificity-Enhanced CLIP-Score for Long Image Caption Evaluation (2025); "
    "Zhang et al., Long-CLIP, ECCV 2024"
)


class Specs(ClipScore):
    @property
    def scale(self) -> str:
        return self.spec.extra.get("scale", "paper")

    def info(self, backbone_label: str) -> MetricInfo:
        return MetricInfo(
            name=self.spec.name, family=self.spec.family, needs_image=True, needs_references=False,
            languages=("en",), backbone=backbone_label,
            description=(
                "Cosine between image and caption embeddings of a specificity-enhanced LongCLIP (248 text tokens), "
                + ("clipped at 0 (the paper's score)" if self.scale == "paper"
                   else "mapped to (cos + 1) / 2 (the released SPECS code's scale; registry option scale = \"released\")")
                + "; rewards correct extra detail and penalises wrong detail. Suited to long captions."
            ),
            range=(0.0, 1.0), citation=CITATION, w=self.spec.w, prefix=self.spec.prefix,
        )

    def compute(self, context: ScoreContext) -> MetricOutput:
        rows = rows_with(context, image=True)
        if not rows:
            return MetricOutput([None] * len(context.items), [False] * len(context.items))
        _, images, texts, flags = self._embed(context, rows)
        values, truncated = scatter(len(context.items), rows, specs_values(images, texts, self.scale), flags)
        return MetricOutput(values, truncated)
