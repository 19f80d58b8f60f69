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

from scoring.backbones import Placement, fingerprint
from scoring.backbones.text import quiet_length_warnings, tokenize_truncating
from scoring.cache import LRUCache
from scoring.images import ImageInput, image_key, load_image
from scoring.registry import BackboneSpec


class ItmBackbone:
    """P(match) for (image, text) pairs; vision states and pair scores are cached."""

    def __init__(self, spec, model, processor, placement: Placement, print_: str):
        self.spec = spec
        self.label = spec.label
        self.placement = placement
        self.model = model.to(device=placement.device, dtype=placement.dtype).eval()
        self.processor = processor
        self.tokenizer = processor.tokenizer
        quiet_length_warnings(self.tokenizer)
        limit = model.config.text_config.max_position_embeddings
        self.max_tokens = min(spec.max_tokens or limit, limit)
        self.fingerprint = print_
        self.vision_cache = LRUCache(64)  # full patch states are large (~1.7 MB each for ViT-B): keep few
        self.pair_cache = LRUCache(65536)
        self.batch_size = 32

    @classmethod
    def from_folder(cls, spec: BackboneSpec, local: Path, placement: Placement, resolve: Callable[[str], Path]):
        from transformers import BlipForImageTextRetrieval, BlipProcessor

        model = BlipForImageTextRetrieval.from_pretrained(local)
        processor = BlipProcessor.from_pretrained(local)
        return cls(spec, model, processor, placement, fingerprint(spec, local))

    def _vision_states(self, keys: list[str], images: list[ImageInput]) -> torch.Tensor:
        states = []
        todo = [(i, k, im) for i, (k, im) in enumerate(zip(keys, images)) if self.vision_cache.get((self.fingerprint, k)) is None]
        if todo:
            pixels = self.processor.image_processor(images=[load_image(im) for _, _, im in todo], return_tensors="pt")["pixel_values"]
            with torch.inference_mode():
                hidden = self.model.vision_model(
                    pixel_values=pixels.to(device=self.placement.device, dtype=self.placement.dtype)
                ).last_hidden_state
            for (_, key, _), row in zip(todo, hidden):
                self.vision_cache.put((self.fingerprint, key), row)
        for key in keys:
            states.append(self.vision_cache.get((self.fingerprint, key)))
        return torch.stack(states)

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
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            states = self._vision_states([keys[i] for i in chunk], [images[i] for i in chunk])
            ids, mask, flags = tokenize_truncating(self.tokenizer, [texts[i] for i in chunk], self.max_tokens)
            with torch.inference_mode():
                device = self.placement.device
                image_mask = torch.ones(states.shape[:-1], dtype=torch.long, device=device)
                encoded = self.model.text_encoder(
                    input_ids=ids.to(device), attention_mask=mask.to(device),
                    encoder_hidden_states=states, encoder_attention_mask=image_mask,
                ).last_hidden_state
                logits = self.model.itm_head(encoded[:, 0, :]).float()
                probs = torch.softmax(logits, dim=-1)[:, 1].cpu().numpy()
            for i, p, flag in zip(chunk, probs, flags):
                results[pair_keys[i]] = (float(p), flag)
                self.pair_cache.put(pair_keys[i], (float(p), flag))
        values = np.array([results[pk][0] for pk in pair_keys], dtype=np.float64)
        flags = np.array([results[pk][1] for pk in pair_keys], dtype=bool)
        return values, flags
