"""SPECS (SPECificity-enhanced CLIPScore): max(cos(image, caption), 0) on a LongCLIP model.

The SPEC model reads 248 text tokens (LongCLIP positions), so long, detailed captions are
scored whole; no weight w and no prompt prefix.  SPECS recommends CLIP-S for captions under
60 tokens and SPECS for longer ones.
"""
from __future__ import annotations

from scoring.metrics.base import MetricInfo
from scoring.metrics.clip_score import ClipScore

CITATION = (
    "SPECS: Specificity-Enhanced CLIP-Score for Long Image Caption Evaluation (2025); "
    "Zhang et al., Long-CLIP, ECCV 2024"
)


class Specs(ClipScore):
    def info(self, backbone_label: str) -> MetricInfo:
        return MetricInfo(
            name=self.spec.name, family=self.spec.family, needs_image=True, needs_references=False,
            languages=("en",), backbone=backbone_label,
            description=(
                "Cosine between image and caption embeddings of a specificity-enhanced LongCLIP (248 text tokens), "
                "clipped at 0; rewards correct extra detail and penalises wrong detail. Suited to long captions."
            ),
            range=(0.0, 1.0), citation=CITATION, w=self.spec.w, prefix=self.spec.prefix,
        )
