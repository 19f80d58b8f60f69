"""Image-text matching cross-encoder (transformers BLIP ITM) for UMIC-C and UMIC.

UMIC scores with UNITER's ITM head, which needs detector region features; uploaded images
have none, so CapLens uses BLIP's ITM head (``BlipForImageTextRetrieval``) and reports
P(match) = softmax(itm_logits)[1], the two-way form of UNITER's sigmoid(W·[CLS] + b).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from scoring import stages
from scoring.backbones import Placement, fingerprint, inference
from scoring.backbones.clip import vision_bytes_per_item
from scoring.backbones.text import quiet_length_warnings, tokenize_truncating
from scoring.batching import map_halving, memory_batch_size
from scoring.cache import LRUCache
from scoring.images import ImageInput, image_key
from scoring.pixels import ImagePipeline, PreprocessConfig
from scoring.registry import BackboneSpec


class ItmBackbone:
    """P(match) for (image, text) pairs; vision states and pair scores are cached."""

    def __init__(self, spec, model, tokenizer, image_processor, placement: Placement, print_: str):
        self.spec = spec
        self.label = spec.label
        self.placement = placement
        self.model = model.to(device=placement.device, dtype=placement.dtype).eval()
        self.tokenizer = tokenizer
        quiet_length_warnings(self.tokenizer)
        self.image_processor = image_processor
        self.preprocess = PreprocessConfig.of(image_processor)
        self.pipeline = ImagePipeline(placement.device)
        limit = model.config.text_config.max_position_embeddings
        self.max_tokens = min(spec.max_tokens or limit, limit)
        self.fingerprint = print_
        self.vision_cache = LRUCache(64)  # full patch states are large (~1.7 MB each for ViT-B): keep few
        self.pair_cache = LRUCache(65536)
        per_pair = vision_bytes_per_item(model.config.vision_config, placement.dtype) * 2
        self.batch_size = memory_batch_size(placement.device, per_pair, cap=256) if placement.device.type == "cuda" else 32

    @classmethod
    def from_folder(cls, spec: BackboneSpec, local: Path, placement: Placement, resolve: Callable[[str], Path]):
        from transformers import AutoImageProcessor, AutoTokenizer, BlipForImageTextRetrieval

        model = BlipForImageTextRetrieval.from_pretrained(local)
        tokenizer = AutoTokenizer.from_pretrained(local)
        image_processor = AutoImageProcessor.from_pretrained(local, backend="pil")
        return cls(spec, model, tokenizer, image_processor, placement, fingerprint(spec, local))

    def _vision_states(self, keys: list[str], images: list[ImageInput]) -> torch.Tensor:
        states = {k: self.vision_cache.get((self.fingerprint, k)) for k in keys}
        todo = {k: im for k, im in zip(keys, images) if states[k] is None}
        if todo:
            pixels = self.pipeline.pixels(self, list(todo), list(todo.values()))
            with stages.stage("vision"), inference():
                hidden = self.model.vision_model(
                    pixel_values=pixels.to(device=self.placement.device, dtype=self.placement.dtype)
                ).last_hidden_state
            for key, row in zip(todo, hidden):
                self.vision_cache.put((self.fingerprint, key), row)
                states[key] = row
        return torch.stack([states[key] for key in keys])

    def _match_chunk(self, pairs: list[tuple[str, ImageInput, str]]) -> tuple[np.ndarray, list[bool]]:
        states = self._vision_states([key for key, _, _ in pairs], [image for _, image, _ in pairs])
        ids, mask, flags = tokenize_truncating(self.tokenizer, [text for _, _, text in pairs], self.max_tokens)
        with stages.stage("text"), inference():
            device = self.placement.device
            image_mask = torch.ones(states.shape[:-1], dtype=torch.long, device=device)
            encoded = self.model.text_encoder(
                input_ids=ids.to(device), attention_mask=mask.to(device),
                encoder_hidden_states=states, encoder_attention_mask=image_mask,
            ).last_hidden_state
            logits = self.model.itm_head(encoded[:, 0, :]).float()
            return torch.softmax(logits, dim=-1)[:, 1].cpu().numpy(), flags

    def match_probability(
        self, images: Sequence[ImageInput], texts: Sequence[str], keys: Sequence[str] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """P(match) per (image, text) pair and whether the text was truncated."""
        keys = list(keys) if keys is not None else [image_key(im) for im in images]
        pair_keys = [
            hashlib.sha1(f"{self.fingerprint}|{self.max_tokens}|{k}|{t}".encode()).hexdigest() for k, t in zip(keys, texts)
        ]
        results: dict[str, tuple[float, bool]] = {}
        todo = []
        for i, pk in enumerate(pair_keys):
            if pk in results:
                continue
            cached = self.pair_cache.get(pk)
            if cached is not None:
                results[pk] = cached
            else:
                results[pk] = None  # placeholder keeps duplicates from being encoded twice
                todo.append(i)
        pairs = [(keys[i], images[i], texts[i]) for i in todo]
        outputs, self.batch_size = map_halving(self._match_chunk, pairs, self.batch_size)
        probs = [float(p) for batch_probs, _ in outputs for p in batch_probs]
        truncated = [flag for _, batch_flags in outputs for flag in batch_flags]
        for i, p, flag in zip(todo, probs, truncated):
            results[pair_keys[i]] = (p, flag)
            self.pair_cache.put(pair_keys[i], (p, flag))
        values = np.array([results[pk][0] for pk in pair_keys], dtype=np.float64)
        flags = np.array([results[pk][1] for pk in pair_keys], dtype=bool)
        return values, flags
