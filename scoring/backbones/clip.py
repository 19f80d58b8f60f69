"""CLIP-like dual encoders (CLIP, PAC-S, LongCLIP/SPECS) as one transformers CLIPModel."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from scoring.backbones import Placement, fingerprint
from scoring.backbones.text import quiet_length_warnings, tokenize_truncating
from scoring.cache import LRUCache
from scoring.conversion import load_state_dict, openai_to_transformers
from scoring.images import ImageInput, image_key, load_image
from scoring.registry import BackboneSpec


def _normalise(x: torch.Tensor) -> np.ndarray:
    x = x.float()
    return torch.nn.functional.normalize(x, dim=-1).cpu().numpy()


class ClipBackbone:
    """Image and text towers with content-addressed embedding caches.

    Embeddings are L2-normalised float32 numpy rows.  Only inputs missing from the cache are
    encoded, in batches, under ``torch.inference_mode``.
    """

    def __init__(self, spec: BackboneSpec, model, tokenizer, image_processor, placement: Placement, print_: str):
        self.spec = spec
        self.label = spec.label
        self.placement = placement
        self.model = model.to(device=placement.device, dtype=placement.dtype).eval()
        self.tokenizer = tokenizer
        quiet_length_warnings(tokenizer)
        self.image_processor = image_processor
        limit = model.config.text_config.max_position_embeddings
        self.max_tokens = min(spec.max_tokens or limit, limit)
        self.fingerprint = print_
        self.image_cache = LRUCache(65536)
        self.text_cache = LRUCache(65536)
        self.image_batch_size = 32
        self.text_batch_size = 128

    # -- loading -----------------------------------------------------------------------
    @classmethod
    def from_folder(cls, spec: BackboneSpec, local: Path, placement: Placement, resolve: Callable[[str], Path]):
        from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel

        model = CLIPModel.from_pretrained(local)
        tokenizer = AutoTokenizer.from_pretrained(local)
        processor = AutoImageProcessor.from_pretrained(local)
        return cls(spec, model, tokenizer, processor, placement, fingerprint(spec, local))

    @classmethod
    def from_state_dict(cls, spec: BackboneSpec, local: Path, placement: Placement, resolve: Callable[[str], Path]):
        """OpenAI-format (PAC-S) or LongCLIP-format (SPECS) weights; tokenizer and image
        processor come from ``spec.tokenizer`` (a CLIP folder, hub id or ``@backbone``)."""
        from transformers import AutoImageProcessor, AutoTokenizer

        if spec.tokenizer is None:
            raise ValueError(f"backbone {spec.name!r} needs `tokenizer` (a CLIP tokenizer source)")
        if isinstance(spec.tokenizer, str) and spec.tokenizer.startswith("@"):
            source: str | Path = resolve(spec.tokenizer[1:])
        else:
            source = spec.tokenizer
        tokenizer = AutoTokenizer.from_pretrained(source)
        processor = AutoImageProcessor.from_pretrained(source)
        model = openai_to_transformers(
            load_state_dict(local),
            longclip=spec.kind == "longclip",
            eos_token_id=tokenizer.eos_token_id,
            bos_token_id=tokenizer.bos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        size = model.config.vision_config.image_size
        processor.size = {"shortest_edge": size}
        processor.crop_size = {"height": size, "width": size}
        return cls(spec, model, tokenizer, processor, placement, fingerprint(spec, local))

    # -- encoding ----------------------------------------------------------------------
    def image_embeddings(self, images: Sequence[ImageInput], keys: Sequence[str] | None = None) -> np.ndarray:
        """(N, D) normalised image embeddings; ``keys`` are precomputed content hashes."""
        keys = list(keys) if keys is not None else [image_key(im) for im in images]
        rows: dict[str, np.ndarray] = {}
        todo: dict[str, ImageInput] = {}
        for key, image in zip(keys, images):
            if key in rows or key in todo:
                continue
            cached = self.image_cache.get((self.fingerprint, key))
            if cached is not None:
                rows[key] = cached
            else:
                todo[key] = image
        pending = list(todo.items())
        for start in range(0, len(pending), self.image_batch_size):
            chunk = pending[start : start + self.image_batch_size]
            pixels = self.image_processor(images=[load_image(im) for _, im in chunk], return_tensors="pt")["pixel_values"]
            with torch.inference_mode():
                pixels = pixels.to(device=self.placement.device, dtype=self.placement.dtype)
                pooled = self.model.vision_model(pixel_values=pixels).pooler_output
                embedded = _normalise(self.model.visual_projection(pooled))
            for (key, _), row in zip(chunk, embedded):
                rows[key] = row
                self.image_cache.put((self.fingerprint, key), row)
        if not keys:
            return np.zeros((0, self.embedding_dim), dtype=np.float32)
        return np.stack([rows[k] for k in keys])

    def text_embeddings(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(N, D) normalised text embeddings and a bool array: was the text truncated?"""
        return encode_cached_texts(self, texts, self._encode_text_batch)

    def _encode_text_batch(self, texts: list[str]) -> tuple[np.ndarray, list[bool]]:
        ids, mask, flags = tokenize_truncating(self.tokenizer, texts, self.max_tokens)
        with torch.inference_mode():
            out = self.model.text_model(input_ids=ids.to(self.placement.device), attention_mask=mask.to(self.placement.device))
            embedded = _normalise(self.model.text_projection(out.pooler_output))
        return embedded, flags

    @property
    def embedding_dim(self) -> int:
        return self.model.config.projection_dim


def encode_cached_texts(backbone, texts: Sequence[str], encode_batch) -> tuple[np.ndarray, np.ndarray]:
    """Shared text path: cache lookup by (fingerprint, limit, text), batch-encode the misses."""
    keys = [
        hashlib.sha1(f"{backbone.fingerprint}|{backbone.max_tokens}|{t}".encode()).hexdigest() for t in texts
    ]
    found: dict[str, tuple[np.ndarray, bool]] = {}
    missing: dict[str, str] = {}
    for key, text in zip(keys, texts):
        if key in found or key in missing:
            continue
        cached = backbone.text_cache.get(key)
        if cached is not None:
            found[key] = cached
        else:
            missing[key] = text
    # Similar lengths in one batch keep padding small.
    pending = sorted(missing.items(), key=lambda kv: len(kv[1]))
    for start in range(0, len(pending), backbone.text_batch_size):
        chunk = pending[start : start + backbone.text_batch_size]
        embedded, flags = encode_batch([t for _, t in chunk])
        for (key, _), row, flag in zip(chunk, embedded, flags):
            found[key] = (row, flag)
            backbone.text_cache.put(key, (row, flag))
    if not keys:
        return np.zeros((0, backbone.embedding_dim), dtype=np.float32), np.zeros(0, dtype=bool)
    return np.stack([found[k][0] for k in keys]), np.array([found[k][1] for k in keys], dtype=bool)
