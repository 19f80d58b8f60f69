"""MCS and PR-MCS (Kim et al., PR-MCS, 2023): CLIPScore with a multilingual text encoder.

MCS = w · max(cos(V(I), T(c)), 0), w = 2.5, with V the CLIP vision tower and T a
multilingual text encoder distilled into CLIP's text space; PR-MCS is the same with T
fine-tuned for perturbation robustness.  No prompt prefix (it is English-only).
"""
from __future__ import annotations

from scoring.metrics.base import (EmbeddingRequest, Metric, MetricInfo, MetricOutput, ScoreContext, nothing_scored,
                                  rows_with, scatter)
from scoring.metrics.clip_score import clip_score

CITATION = (
    "Kim et al., PR-MCS: Perturbation Robust Metric for MultiLingual Image Captioning, Findings of EMNLP 2023"
)


class MultilingualClipScore(Metric):
    needs_image = True
    needs_references = False

    def __init__(self, spec):
        self.spec = spec

    def info(self, backbone_label: str) -> MetricInfo:
        robust = self.spec.variant == "pr-mcs"
        what = (
            "the PR-MCS fine-tuned multilingual text encoder (perturbation robust)"
            if robust else "a multilingual text encoder distilled into CLIP's text space"
        )
        return MetricInfo(
            name=self.spec.name, family=self.spec.family, needs_image=True, needs_references=False,
            languages=None, backbone=backbone_label,
            description=(
                f"Multilingual CLIPScore: cosine between the CLIP image embedding and the caption embedded by {what}, "
                f"clipped at 0, times w = {self.spec.w:g}. Any language; no references."
            ),
            range=(0.0, self.spec.w), citation=CITATION, w=self.spec.w, prefix=self.spec.prefix,
        )

    def embedding_requests(self, context: ScoreContext) -> list[EmbeddingRequest]:
        rows = rows_with(context, image=True)
        return [
            EmbeddingRequest(self.spec.vision_backbone, "image", tuple(context.image_keys[i] for i in rows)),
            EmbeddingRequest(self.spec.backbone, "text", tuple(self.spec.prefix + context.items[i].candidate for i in rows)),
        ]

    def compute(self, context: ScoreContext) -> MetricOutput:
        rows = rows_with(context, image=True)
        if not rows:
            return nothing_scored(context)
        text_encoder = context.backbone(self.spec.backbone)
        vision = context.backbone(self.spec.vision_backbone)
        texts, flags = text_encoder.text_embeddings([self.spec.prefix + context.items[i].candidate for i in rows])
        images = vision.image_embeddings([context.items[i].image for i in rows], [context.image_keys[i] for i in rows])
        if images.shape[1] != texts.shape[1]:
            from scoring.metrics.base import MetricUnavailable

            raise MetricUnavailable(
                f"text encoder outputs {texts.shape[1]} dims but the vision tower {images.shape[1]}"
            )
        values, truncated = scatter(len(context.items), rows, clip_score(images, texts, self.spec.w), flags)
        return MetricOutput(values, truncated)
