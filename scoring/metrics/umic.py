"""UMIC-C and UMIC (Lee et al., 2021) on a transformers image-text-matching cross-encoder.

UMIC scores a caption by the ITM head of UNITER fine-tuned with a ranking loss against
synthetic negatives; UMIC-C is the ITM head before that fine-tuning.  UNITER needs detector
region features, which uploaded images lack, so CapLens uses BLIP's ITM head
(Salesforce/blip-itm-base-coco) for UMIC-C and a BLIP ITM fine-tuned with UMIC's loss for
UMIC; the backbone label says so.
"""
from __future__ import annotations

from scoring.metrics.base import MetricInfo, MetricOutput, ScoreContext, rows_with, scatter

CITATION = "Lee et al., UMIC: An Unreferenced Metric for Image Captioning via Contrastive Learning, ACL 2021"


class ImageTextMatch:
    needs_image = True
    needs_references = False

    def __init__(self, spec):
        self.spec = spec

    def info(self, backbone_label: str) -> MetricInfo:
        tuned = self.spec.name.upper() == "UMIC"
        return MetricInfo(
            name=self.spec.name, family=self.spec.family, needs_image=True, needs_references=False,
            languages=("en",), backbone=backbone_label,
            description=(
                "P(match) from an image-text-matching cross-encoder head (softmax of the ITM logits); "
                + ("fine-tuned with UMIC's ranking loss against synthetic negatives; the score is UMIC's "
                   "S(I, X) = sigmoid(W·[CLS] + b), one logit, stored as the pair head [0; W], [0; b] so that "
                   "softmax(...)[1] equals it exactly (a released one-output head loads the same way). " if tuned
                   else "pre-trained head without UMIC's contrastive fine-tuning. ")
                + "BLIP ITM stands in for UNITER, which needs detector region features."
            ),
            range=(0.0, 1.0), citation=CITATION, w=self.spec.w, prefix=self.spec.prefix,
        )

    def compute(self, context: ScoreContext) -> MetricOutput:
        rows = rows_with(context, image=True)
        n = len(context.items)
        if not rows:
            return MetricOutput([None] * n, [False] * n)
        backbone = context.backbone(self.spec.backbone)
        probs, flags = backbone.match_probability(
            [context.items[i].image for i in rows],
            [self.spec.prefix + context.items[i].candidate for i in rows],
            [context.image_keys[i] for i in rows],
        )
        values, truncated = scatter(n, rows, probs, flags)
        return MetricOutput(values, truncated)
