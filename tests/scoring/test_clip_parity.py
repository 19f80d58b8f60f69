"""CLIP-S agrees with torchmetrics' CLIPScore on the same tiny model and inputs.

Documented differences accounted for: torchmetrics reports 100·max(cos, 0) (we report
2.5·max(cos, 0)) and adds no "A photo depicts " prefix (we give it the prefixed text).
torchmetrics 1.9 expects get_image_features/get_text_features to return tensors, which
transformers 5 no longer does; the adapter below returns the projected embeddings.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from scoring.api import ScoreItem

torchmetrics_clip = pytest.importorskip("torchmetrics.multimodal.clip_score")


class TensorFeatures(torch.nn.Module):
    """transformers 5 CLIPModel with the tensor-returning feature API torchmetrics expects."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.config = model.config

    def get_image_features(self, pixel_values):
        return self.model.get_image_features(pixel_values=pixel_values).pooler_output

    def get_text_features(self, input_ids, attention_mask=None):
        return self.model.get_text_features(input_ids=input_ids, attention_mask=attention_mask).pooler_output


def test_clip_s_matches_torchmetrics(tiny_dir, tiny_scorer, images):
    from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel, CLIPProcessor

    model = CLIPModel.from_pretrained(tiny_dir / "clip").eval()
    # The checkpoint's Pillow processor, which CapLens' reference mode uses (where
    # torchvision is installed, transformers would otherwise pick its torchvision backend).
    processor = CLIPProcessor(image_processor=AutoImageProcessor.from_pretrained(tiny_dir / "clip", backend="pil"),
                              tokenizer=AutoTokenizer.from_pretrained(tiny_dir / "clip"))
    metric = torchmetrics_clip.CLIPScore(model_name_or_path=lambda: (TensorFeatures(model), processor))

    captions = ["a dog on the grass", "two red cars", "a small white cat", "people walking", "a blue boat", "a tree"]
    ours = tiny_scorer.score([ScoreItem(im, c) for im, c in zip(images, captions)], ["CLIP-S"])["CLIP-S"].values
    prefix = tiny_scorer.info("CLIP-S").prefix
    theirs = []
    for image, caption in zip(images, captions):
        metric.reset()
        pixels = torch.from_numpy(np.array(image)).permute(2, 0, 1)  # uint8 CHW, as torchmetrics takes images
        with torch.no_grad():
            theirs.append(float(metric(pixels, prefix + caption)))
    assert any(t > 0 for t in theirs), "test needs at least one positive cosine to be meaningful"
    np.testing.assert_allclose(np.array(ours) * (100 / 2.5), theirs, atol=1e-5 * 100)
    np.testing.assert_allclose(np.array(ours) / 2.5, np.array(theirs) / 100, atol=1e-5)
