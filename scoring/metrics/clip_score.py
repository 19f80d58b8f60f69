"""CLIP-S / RefCLIP-S (Hessel et al., 2021) and PAC-S / RefPAC-S (Sarto et al., 2023).

Both are the same formula on different weights: PAC-S is CLIPScore computed with the
positive-augmented fine-tuned CLIP and w = 2.0 instead of 2.5.
"""
from __future__ import annotations

import numpy as np

from scoring.metrics.base import (
    EmbeddingRequest, Metric, MetricInfo, MetricOutput, ScoreContext, harmonic_mean, rows_with, scatter,
)
from scoring.registry import MetricSpec

CITATIONS = {
    "clip": "Hessel et al., CLIPScore: A Reference-free Evaluation Metric for Image Captioning, EMNLP 2021",
    "pacs": "Sarto et al., Positive-Augmented Contrastive Learning for Image and Video Captioning Evaluation, CVPR 2023",
}
# Per registry variant: the model named in descriptions, and the reference-free score's name.
MODELS = {"clip": "CLIP", "pacs": "PAC-S fine-tuned CLIP"}
REFERENCE_FREE_NAMES = {"clip": "CLIP-S", "pacs": "PAC-S"}


def clip_score(image_embeddings: np.ndarray, text_embeddings: np.ndarray, w: float) -> np.ndarray:
    """w · max(cos(v, t), 0) for row-paired, L2-normalised embeddings."""
    cos = np.sum(np.asarray(image_embeddings, np.float64) * np.asarray(text_embeddings, np.float64), axis=1)
    return w * np.clip(cos, 0, None)


def best_reference_similarity(candidate_embeddings: np.ndarray, reference_embeddings: list[np.ndarray]) -> np.ndarray:
    """max(0, max_r cos(c, r)) per candidate; ``reference_embeddings[i]`` is (R_i, D)."""
    best = [
        max(0.0, float(np.max(refs.astype(np.float64) @ cand.astype(np.float64))))
        for cand, refs in zip(candidate_embeddings, reference_embeddings)
    ]
    return np.array(best, dtype=np.float64)


def ref_clip_score(
    image_embeddings: np.ndarray, text_embeddings: np.ndarray, reference_embeddings: list[np.ndarray], w: float
) -> np.ndarray:
    """Harmonic mean of CLIP-S and the best clipped candidate-reference cosine."""
    return harmonic_mean(
        clip_score(image_embeddings, text_embeddings, w),
        best_reference_similarity(text_embeddings, reference_embeddings),
    )


class ClipScore(Metric):
    """Reference-free: w · max(cos(image, prefix + caption), 0); range [0, w]."""

    needs_image = True
    needs_references = False

    def __init__(self, spec: MetricSpec):
        self.spec = spec

    def info(self, backbone_label: str) -> MetricInfo:
        what = MODELS[self.spec.variant]
        return MetricInfo(
            name=self.spec.name, family=self.spec.family, needs_image=True, needs_references=False,
            languages=("en",), backbone=backbone_label,
            description=(
                f"Image-caption compatibility: cosine between the {what} embeddings of the image and of "
                f"'{self.spec.prefix}' + caption, clipped at 0 and scaled by w = {self.spec.w:g}. No references."
            ),
            range=(0.0, self.spec.w), citation=CITATIONS[self.spec.variant],
            w=self.spec.w, prefix=self.spec.prefix,
        )

    def embedding_requests(self, context: ScoreContext) -> list[EmbeddingRequest]:
        rows = rows_with(context, image=True, references=self.needs_references)
        texts = [self.spec.prefix + context.items[i].candidate for i in rows]
        if self.needs_references:
            texts += [self.spec.prefix + r for i in rows for r in context.items[i].references]
        return [
            EmbeddingRequest(self.spec.backbone, "image", tuple(context.image_keys[i] for i in rows)),
            EmbeddingRequest(self.spec.backbone, "text", tuple(texts)),
        ]

    def _embed(self, context: ScoreContext, rows: list[int]):
        backbone = context.backbone(self.spec.backbone)
        items = context.items
        images = backbone.image_embeddings([items[i].image for i in rows], [context.image_keys[i] for i in rows])
        texts, flags = backbone.text_embeddings([self.spec.prefix + items[i].candidate for i in rows])
        return backbone, images, texts, flags

    def compute(self, context: ScoreContext) -> MetricOutput:
        rows = rows_with(context, image=True)
        if not rows:
            return MetricOutput([None] * len(context.items), [False] * len(context.items))
        _, images, texts, flags = self._embed(context, rows)
        values, truncated = scatter(len(context.items), rows, self.pair_scores(images, texts), flags)
        return MetricOutput(values, truncated)

    def pair_scores(self, image_embeddings: np.ndarray, text_embeddings: np.ndarray) -> np.ndarray:
        """The score of each row-paired (image, caption) embedding."""
        return clip_score(image_embeddings, text_embeddings, self.spec.w)


def ref_clip_score_max(w: float) -> float:
    """The highest RefCLIP-S: the harmonic mean grows with both of its terms, so it peaks at
    CLIP-S = w and reference similarity = 1, where it is 2w/(w + 1) (1.43 at w = 2.5)."""
    return 2 * w / (w + 1)


class RefClipScore(ClipScore):
    """Reference-augmented: H-mean(CLIP-S, max(0, max_r cos(c, r))); range [0, 2w/(w + 1)]."""

    needs_references = True

    def info(self, backbone_label: str) -> MetricInfo:
        base = super().info(backbone_label)
        return MetricInfo(
            **{**base.__dict__, "needs_references": True, "range": (0.0, ref_clip_score_max(self.spec.w)),
               "description": (
                   f"Harmonic mean of {REFERENCE_FREE_NAMES[self.spec.variant]} (w = {self.spec.w:g}) and the best clipped cosine "
                   "between the caption and a reference caption (both prefixed); needs references."
               )}
        )

    def compute(self, context: ScoreContext) -> MetricOutput:
        rows = rows_with(context, image=True, references=True)
        if not rows:
            return MetricOutput([None] * len(context.items), [False] * len(context.items))
        backbone, images, texts, flags = self._embed(context, rows)
        counts = [len(context.items[i].references) for i in rows]
        flat = [self.spec.prefix + r for i in rows for r in context.items[i].references]
        embedded, _ = backbone.text_embeddings(flat)
        refs = np.split(embedded, np.cumsum(counts)[:-1])
        values, truncated = scatter(
            len(context.items), rows, ref_clip_score(images, texts, refs, self.spec.w), flags
        )
        return MetricOutput(values, truncated)
