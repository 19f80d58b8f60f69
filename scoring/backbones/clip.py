"""CLIP-like dual encoders (CLIP, PAC-S, LongCLIP/SPECS) as one transformers CLIPModel."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from scoring import stages
from scoring.backbones import Placement, fingerprint, inference
from scoring.backbones.graphs import GraphedForward, padded_batch
from scoring.backbones.text import TextModelBackbone, pad_token_id, padded_for_graph, tokenize_truncating
from scoring.batching import map_halving, memory_batch_size
from scoring.cache import LRUCache
from scoring.conversion import load_state_dict, openai_to_transformers
from scoring.images import ImageInput, image_key
from scoring.pixels import encode_images
from scoring.registry import BackboneSpec
from scoring.transfer import to_device, to_host


def normalised(x: torch.Tensor) -> torch.Tensor:
    """L2-normalised float32 rows (on the device)."""
    return torch.nn.functional.normalize(x.float(), dim=-1)


class ClipBackbone(TextModelBackbone):
    """Image and text towers with content-addressed embedding caches.

    Embeddings are L2-normalised float32 numpy rows. Only inputs missing from the cache are
    encoded, in batches, under ``torch.inference_mode``; images go through the shared
    :class:`~scoring.pixels.ImagePipeline` (decoded once, preprocessed once per recipe).
    """

    def __init__(self, spec: BackboneSpec, model, tokenizer, image_processor, placement: Placement, print_: str):
        super().__init__(spec, model, tokenizer, placement, print_)
        self.use_image_processor(image_processor)
        self.image_cache = LRUCache(65536)
        self.text_cache = LRUCache(65536)
        self.text_batch_size = text_batch_size(placement, model.config.text_config.hidden_size, self.max_tokens)
        self.text_graph = GraphedForward(self._text_forward, placement.device, f"{spec.name} text tower")
        self.image_graph = GraphedForward(self._image_forward, placement.device, f"{spec.name} image tower")

    # -- loading -----------------------------------------------------------------------
    @classmethod
    def from_folder(cls, spec: BackboneSpec, local: Path, placement: Placement, resolve: Callable[[str], Path]):
        from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel

        model = CLIPModel.from_pretrained(local)
        tokenizer = AutoTokenizer.from_pretrained(local)
        processor = AutoImageProcessor.from_pretrained(local, backend="pil")
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
        processor = AutoImageProcessor.from_pretrained(source, backend="pil")
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
        missing = self.missing_images(keys)
        found = {}
        if missing:
            (rows,) = encode_images([self], missing, dict(zip(keys, images)))
            found = self.store_images(missing, rows)
        if not keys:
            return np.zeros((0, self.embedding_dim), dtype=np.float32)
        distinct = list(dict.fromkeys(keys))  # each distinct image looked up and stacked once
        rest = [key for key in distinct if key not in found]
        found.update(zip(rest, self.image_cache.get_many([(self.fingerprint, key) for key in rest])))
        position = {key: row for row, key in enumerate(distinct)}
        return np.stack([found[key] for key in distinct])[[position[key] for key in keys]]

    def missing_images(self, keys: Sequence[str]) -> list[str]:
        """Distinct keys whose embedding is not cached, in first-seen order."""
        distinct = list(dict.fromkeys(keys))
        cached = self.image_cache.get_many([(self.fingerprint, key) for key in distinct])
        return [key for key, row in zip(distinct, cached) if row is None]

    def store_images(self, keys: Sequence[str], rows: torch.Tensor) -> dict[str, np.ndarray]:
        """Cache freshly encoded rows (one device-to-host copy) and return them by key."""
        stored = dict(zip(keys, to_host(rows)))
        for key, row in stored.items():
            self.image_cache.put((self.fingerprint, key), row)
        return stored

    def encode_pixels(self, pixels: torch.Tensor) -> torch.Tensor:
        """Normalised embeddings of preprocessed images, on the device (a small batch padded
        with blank images and run through a CUDA graph, :mod:`scoring.backbones.graphs`)."""
        with inference():
            pixels = pixels.to(device=self.placement.device, dtype=self.placement.dtype)
            return self.image_graph(padded_batch(self.placement.device, pixels))[: pixels.shape[0]]

    def _image_forward(self, pixels: torch.Tensor) -> torch.Tensor:
        pooled = self.model.vision_model(pixel_values=pixels).pooler_output
        return normalised(self.model.visual_projection(pooled))

    def image_bytes_per_item(self) -> int:
        return vision_bytes_per_item(self.model.config.vision_config, self.placement.dtype)

    def text_embeddings(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(N, D) normalised text embeddings and a bool array: was the text truncated?"""
        return encode_cached_texts(self, texts, self._encode_text_batch)

    def _encode_text_batch(self, texts: list[str]) -> tuple[torch.Tensor, list[bool]]:
        """The text tower runs without an attention mask: its attention is causal and the
        embedding is read at each text's end-of-text token, so padding after it (to the
        longest text, or to a graph's bucket) cannot reach it. Without a mask nothing in the
        forward waits for the GPU (transformers checks a mask's contents), so it can be captured."""
        ids, mask, flags = tokenize_truncating(self.tokenizer, texts, self.max_tokens)
        with inference():
            device = self.placement.device
            ids, _ = padded_for_graph(device, to_device(ids, device), to_device(mask, device), pad_token_id(self.tokenizer),
                                      self.max_tokens)
            return self.text_graph(ids)[: len(texts)], flags

    def _text_forward(self, ids: torch.Tensor) -> torch.Tensor:
        out = self.model.text_model(input_ids=ids)
        return normalised(self.model.text_projection(out.pooler_output))

    @property
    def embedding_dim(self) -> int:
        return self.model.config.projection_dim


def vision_bytes_per_item(config, dtype: torch.dtype) -> int:
    """Rough working set of one image in a ViT forward: the widest activations of one layer
    (MLP and attention scores) plus the residual stream, in the model's dtype."""
    tokens = (config.image_size // config.patch_size) ** 2 + 1
    width = config.hidden_size
    per_layer = tokens * (config.intermediate_size + 4 * width) + config.num_attention_heads * tokens * tokens
    return per_layer * torch.tensor([], dtype=dtype).element_size() * 2


def text_batch_size(placement: Placement, width: int, max_tokens: int) -> int:
    """Texts per forward: large on CUDA (bounded by free memory), moderate on CPU."""
    per_text = max_tokens * width * 8 * torch.tensor([], dtype=placement.dtype).element_size()
    return memory_batch_size(placement.device, per_text, cap=1024) if placement.device.type == "cuda" else 128


def encode_cached_texts(backbone, texts: Sequence[str], encode_batch) -> tuple[np.ndarray, np.ndarray]:
    """Shared text path: cache lookup by (fingerprint, limit, text), batch-encode the misses.

    Misses are sorted by length so each batch pads little; a batch that runs out of device
    memory is halved and the rest continues at that size.
    """
    keys = [(backbone.fingerprint, backbone.max_tokens, t) for t in texts]
    distinct = list(dict.fromkeys(zip(keys, texts)))
    found: dict[tuple, tuple[np.ndarray, bool]] = {}
    missing: dict[tuple, str] = {}
    for (key, text), cached in zip(distinct, backbone.text_cache.get_many([key for key, _ in distinct])):
        if cached is not None:
            found[key] = cached
        else:
            missing[key] = text
    if missing:
        pending = sorted(missing.items(), key=lambda kv: len(kv[1]))
        with stages.stage("text"):
            outputs, backbone.text_batch_size = map_halving(
                lambda chunk: encode_batch([text for _, text in chunk]), pending, backbone.text_batch_size
            )
            rows = to_host(torch.cat([embedded for embedded, _ in outputs]))
        flags = [flag for _, batch_flags in outputs for flag in batch_flags]
        for (key, _), row, flag in zip(pending, rows, flags):
            found[key] = (row, flag)
            backbone.text_cache.put(key, (row, flag))
    if not keys:
        return np.zeros((0, backbone.embedding_dim), dtype=np.float32), np.zeros(0, dtype=bool)
    return np.stack([found[k][0] for k in keys]), np.array([found[k][1] for k in keys], dtype=bool)
