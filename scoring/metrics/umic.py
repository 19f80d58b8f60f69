"""UMIC-C and UMIC (Lee et al., 2021) on a transformers image-text-matching cross-encoder.

UMIC scores a caption with one logit on the [CLS] state of UNITER fine-tuned with a ranking
loss against synthetic negatives: S(I, X) = sigmoid(W·i_CLS + b).  UMIC-C is the pre-trained
ITM pair head before that fine-tuning: softmax(itm_logits)[1].  The registry's ``variant``
("umic-c" or "umic") says which a row is.  UNITER needs detector region features, which
uploaded images lack, so CapLens uses BLIP's ITM cross-encoder (Salesforce/blip-itm-base-coco)
for UMIC-C and one fine-tuned with UMIC's loss for UMIC; the backbone label says so.  The
heads are read in :mod:`scoring.backbones.itm`.
"""
from __future__ import annotations

from scoring.metrics.base import Metric, MetricInfo, MetricOutput, ScoreContext, nothing_scored, rows_with, scatter

CITATION = "Lee et al., UMIC: An Unreferenced Metric for Image Captioning via Contrastive Learning, ACL 2021"
STAND_IN = "BLIP ITM stands in for UNITER, which needs detector region features."
# variant -> (the ITM backbone's head it reads, what the card says)
VARIANTS = {
    "umic-c": ("pair", "P(match) from an image-text-matching cross-encoder: softmax of its two ITM logits, "
                       "the pre-trained head without UMIC's contrastive fine-tuning. "),
    "umic": ("one-logit", "UMIC's S(I, X) = sigmoid(W·i_CLS + b): one logit on the [CLS] state of an image-text-"
                          "matching cross-encoder fine-tuned with UMIC's ranking loss against synthetic negatives. "),
}


class ImageTextMatch(Metric):
    """UMIC-C (the ITM pair head) or UMIC (one logit), by the registry variant."""

    needs_image = True
    needs_references = False

    def __init__(self, spec):
        self.spec = spec
        self.head, self.what = VARIANTS[spec.variant]

    def info(self, backbone_label: str) -> MetricInfo:
        return MetricInfo(
            name=self.spec.name, family=self.spec.family, needs_image=True, needs_references=False,
            languages=("en",), backbone=backbone_label, description=self.what + STAND_IN,
            range=(0.0, 1.0), citation=CITATION, w=self.spec.w, prefix=self.spec.prefix,
        )

    def compute(self, context: ScoreContext) -> MetricOutput:
        rows = rows_with(context, image=True)
        if not rows:
            return nothing_scored(context)
        backbone = context.backbone(self.spec.backbone)
        probs, flags = backbone.match_probability(
            [context.items[i].image for i in rows],
            [self.spec.prefix + context.items[i].candidate for i in rows],
            [context.image_keys[i] for i in rows],
            head=self.head,
        )
        values, truncated = scatter(len(context.items), rows, probs, flags)
        return MetricOutput(values, truncated)
