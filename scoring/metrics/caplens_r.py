"""CapLens-R: a small regression head on frozen backbone features, trained on human ratings.

Not from a paper (in the spirit of Polos, CVPR 2024): the head reads the image, candidate and
reference embeddings of frozen backbones (a text encoder and a CLIP vision tower) through
:func:`features` and predicts the mean human rating of the caption.  It may also read the
[CLS] state of an image-text cross-encoder (a `blip-itm` backbone, e.g. one trained on
ratings in the recipe's cross mode), which sees word order and which words go with which
object: what separate embeddings cannot; and the features of a fluency model fitted on the
texts the raters judged fluent (:mod:`scoring.metrics.fluency`, kept in the head folder). The
head folder (`caplens_r.json` + `model.safetensors`) is written by the `caplens-r` training
recipe and says what it was trained on; trained on too few ratings it carries a warning.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn

from scoring.metrics.base import (EmbeddingRequest, Metric, MetricInfo, MetricOutput, MetricUnavailable, ScoreContext, nothing_scored,
                                  rows_with, scatter)

CITATION = "CapLens-R (CapLens's own learned metric; in the spirit of Wada et al., Polos, CVPR 2024)"
SCALARS = 5  # cos(i, c), max_r cos(c, r), mean_r cos(c, r), cos(i, r̄), has references


def feature_size(dim: int, cross_dim: int = 0, fluency: bool = False) -> int:
    from scoring.metrics.fluency import FEATURES

    return SCALARS + 3 * dim + cross_dim + (FEATURES if fluency else 0)


def features(image: np.ndarray, candidate: np.ndarray, references: list[np.ndarray]) -> np.ndarray:
    """(N, 5 + 3D) from L2-normalised embeddings: image (N, D), candidate (N, D) and per item a
    (k, D) array of reference embeddings (k may be 0): the scalar similarities, then
    |c − r̄|, c ⊙ r̄ and i ⊙ c with r̄ the normalised mean reference."""
    n, dim = candidate.shape
    out = np.zeros((n, feature_size(dim)), dtype=np.float32)
    for k in range(n):
        c, i, refs = candidate[k], image[k], references[k]
        out[k, 0] = float(i @ c)
        mean_ref = np.zeros(dim, dtype=np.float32)
        if len(refs):
            sims = refs @ c
            mean_ref = refs.mean(axis=0)
            mean_ref = mean_ref / max(float(np.linalg.norm(mean_ref)), 1e-9)
            out[k, 1:5] = (sims.max(), sims.mean(), float(i @ mean_ref), 1.0)
        out[k, SCALARS:SCALARS + dim] = np.abs(c - mean_ref)
        out[k, SCALARS + dim:SCALARS + 2 * dim] = c * mean_ref
        out[k, SCALARS + 2 * dim:] = i * c
    return out


APART_HIDDEN = 32


class RegressionHead(nn.Module):
    """features -> hidden (GELU) -> one predicted rating. With `apart` > 0 the last `apart`
    features (the fluency model's) pass through their own small branch whose output is added to
    the rest's: a caption's grammar then moves its rating by one amount whatever the caption
    says, as a rater's deduction for bad grammar does (on the world it ordered captions slightly
    worse than one network over all features: docs/training.md, "Grammar in its own branch")."""

    def __init__(self, in_features: int, hidden: int, apart: int = 0):
        super().__init__()
        self.apart = apart
        self.net = nn.Sequential(nn.Linear(in_features - apart, hidden), nn.GELU(), nn.Linear(hidden, 1))
        self.apart_net = nn.Sequential(nn.Linear(apart, APART_HIDDEN), nn.GELU(), nn.Linear(APART_HIDDEN, 1)) \
            if apart else None

    @property
    def in_features(self) -> int:
        return self.net[0].in_features + self.apart

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.apart:
            return self.net(x).squeeze(-1)
        return (self.net(x[:, :-self.apart]) + self.apart_net(x[:, -self.apart:])).squeeze(-1)


def save_head(head: RegressionHead, about: dict, out: Path) -> None:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    about = about | {"in_features": head.in_features, "hidden": head.net[0].out_features} | \
        ({"apart": head.apart} if head.apart else {})
    (out / "caplens_r.json").write_text(json.dumps(about, indent=1, ensure_ascii=False), encoding="utf-8")
    save_file({k: v.detach().float().cpu().contiguous() for k, v in head.state_dict().items()},
              str(out / "model.safetensors"))


class CaplensRHead:
    """A loaded head folder: predicts ratings from :func:`features`."""

    def __init__(self, head: RegressionHead, about: dict, fluency=None):
        self.head = head.eval()
        self.about = about
        self.fluency = fluency  # scoring.metrics.fluency.FluencyModel, for a head trained with one

    @classmethod
    def from_folder(cls, spec, local: Path, placement, resolve: Callable[[str], Path]):
        """The backbone loader's signature; a head needs only its folder (the score's key digests
        the folder's files and the towers it names: `scoring.fingerprint`)."""
        from safetensors.torch import load_file

        about = json.loads((local / "caplens_r.json").read_text(encoding="utf-8"))
        head = RegressionHead(int(about["in_features"]), int(about["hidden"]), int(about.get("apart", 0)))
        head.load_state_dict(load_file(str(local / "model.safetensors")))
        fluency = None
        if about.get("fluency"):
            from scoring.metrics.fluency import FluencyModel

            fluency = FluencyModel.load(local)
        return cls(head, about, fluency)

    def predict(self, x: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return self.head(torch.from_numpy(np.asarray(x, dtype=np.float32))).double().numpy()


def embed_items(text_backbone, vision_backbone, images, image_keys, candidates, references,
                cross_backbone=None) -> np.ndarray:
    """Features of items through the loaded backbones (shared by the metric and the training
    recipe): :func:`features`, then the cross-encoder's [CLS] states when one is given."""
    image_emb = vision_backbone.image_embeddings(images, image_keys)
    cand_emb, _ = text_backbone.text_embeddings(list(candidates))
    flat = [r for refs in references for r in refs]
    ref_emb = text_backbone.text_embeddings(flat)[0] if flat else np.zeros((0, cand_emb.shape[1]), dtype=np.float32)
    per_item, start = [], 0
    for refs in references:
        per_item.append(ref_emb[start:start + len(refs)])
        start += len(refs)
    if image_emb.shape[1] != cand_emb.shape[1]:
        raise MetricUnavailable(f"text encoder outputs {cand_emb.shape[1]} dims but the vision tower {image_emb.shape[1]}")
    x = features(image_emb, cand_emb, per_item)
    if cross_backbone is None:
        return x
    return np.concatenate([x, cross_backbone.cls_states(images, list(candidates), image_keys)], axis=1)


def with_fluency(x: np.ndarray, fluency, candidates, languages) -> np.ndarray:
    """The features of :func:`embed_items` and, for a head trained with a fluency model, its
    standardised fluency features of each candidate in its language."""
    if fluency is None:
        return x
    return np.concatenate([x, fluency.features(list(candidates), list(languages))], axis=1)


class CaplensR(Metric):
    needs_image = True
    needs_references = False  # references help when given; the head was trained with or without them

    def __init__(self, spec):
        self.spec = spec

    def info(self, backbone_label: str) -> MetricInfo:
        return MetricInfo(
            name=self.spec.name, family=self.spec.family, needs_image=True, needs_references=False,
            languages=None, backbone=backbone_label,
            description=(
                "Predicted human rating: a small regression head on frozen image, candidate and reference "
                "embeddings (and, for a head trained so, an image-text cross-encoder's reading of the pair "
                "and a word trigram model of the texts its raters judged fluent), "
                "trained on a collection's human ratings (see its training.json for the collection, "
                "the number of ratings and tau_c on held-out images). Only as good as the ratings it learned from."
            ),
            range=(0.0, 1.0), citation=CITATION, w=self.spec.w, prefix=self.spec.prefix,
        )

    def embedding_requests(self, context: ScoreContext) -> list[EmbeddingRequest]:
        """The images, candidates and references `embed_items` reads, so they are encoded with
        the other metrics' (the references in the same text batch as MCS's candidates). Only
        towers the registry row names: one read from the head's training.json is found when
        the metric runs (loading the head here could fail for every metric)."""
        text_name, vision_name = self.spec.extra.get("text_backbone"), self.spec.vision_backbone
        if self.spec.variant == "cross" or not (text_name and vision_name):
            return []
        rows = rows_with(context, image=True)
        texts = [context.items[i].candidate for i in rows] + [r for i in rows for r in context.items[i].references]
        return [EmbeddingRequest(vision_name, "image", tuple(context.image_keys[i] for i in rows)),
                EmbeddingRequest(text_name, "text", tuple(texts))]

    def compute(self, context: ScoreContext) -> MetricOutput:
        rows = rows_with(context, image=True)
        if not rows:
            return nothing_scored(context)
        head = context.backbone(self.spec.backbone)
        if self.spec.variant == "cross":  # an end-to-end cross-encoder: its pair head is the rating
            items = [context.items[i] for i in rows]
            values, flags = head.match_probability([it.image for it in items], [it.candidate for it in items],
                                                   [context.image_keys[i] for i in rows], head="pair")
            values, truncated = scatter(len(context.items), rows, values, list(flags))
            return MetricOutput(values, truncated)
        text_name = self.spec.extra.get("text_backbone") or head.about.get("text_backbone")
        vision_name = self.spec.vision_backbone or head.about.get("vision_backbone")
        if not text_name or not vision_name:
            raise MetricUnavailable("the CapLens-R entry names no text_backbone / vision_backbone")
        cross_name = None
        if head.about.get("cross_model"):  # the head was trained on a cross-encoder's states too
            cross_name = self.spec.extra.get("cross_backbone") or head.about.get("cross_backbone")
            if not cross_name:
                raise MetricUnavailable(f"the head reads the cross-encoder {head.about['cross_model']}, but the "
                                        "CapLens-R entry names no cross_backbone")
        items = [context.items[i] for i in rows]
        x = embed_items(context.backbone(text_name), context.backbone(vision_name), [it.image for it in items],
                        [context.image_keys[i] for i in rows], [it.candidate for it in items],
                        [list(it.references) for it in items],
                        context.backbone(cross_name) if cross_name else None)
        x = with_fluency(x, head.fluency, [it.candidate for it in items], [it.lang for it in items])
        if x.shape[1] != head.head.in_features:
            raise MetricUnavailable(f"the head reads {head.head.in_features} features but its backbones "
                                    f"give {x.shape[1]}")
        values, truncated = scatter(len(context.items), rows, np.clip(head.predict(x), 0.0, 1.0), [False] * len(rows))
        return MetricOutput(values, truncated)
