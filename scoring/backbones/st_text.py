"""Multilingual text encoder in the sentence-transformers folder layout, without that library.

Layout (as ``sentence-transformers/clip-ViT-B-32-multilingual-v1``): ``modules.json``; the
transformer's config, weights and tokenizer at the root (or the Transformer module's
folder); ``1_Pooling/config.json`` (mean pooling); ``2_Dense/config.json`` plus
``model.safetensors`` or ``pytorch_model.bin`` (``linear.weight``/``linear.bias``), identity
activation.  The output lives in CLIP's text-embedding space (MCS, PR-MCS).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from scoring.backbones import Placement, fingerprint, inference
from scoring.backbones.clip import encode_cached_texts, normalised, text_batch_size
from scoring.backbones.graphs import GraphedForward
from scoring.backbones.text import TextModelBackbone, attention_bias, pad_token_id, padded_for_graph, tokenize_truncating
from scoring.cache import LRUCache
from scoring.registry import BackboneSpec
from scoring.transfer import to_device

_ACTIVATIONS = {
    "torch.nn.modules.linear.Identity": torch.nn.Identity,
    "torch.nn.modules.activation.Tanh": torch.nn.Tanh,
}


POOLER_MODEL_TYPES = {"bert", "roberta", "xlm-roberta"}


def _read_json(path: Path) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _load_dense(folder: Path) -> torch.nn.Sequential:
    config = _read_json(folder / "config.json")
    linear = torch.nn.Linear(config["in_features"], config["out_features"], bias=config.get("bias", True))
    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        weights = load_file(str(folder / "model.safetensors"))
    elif (folder / "pytorch_model.bin").is_file():
        weights = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    else:
        raise FileNotFoundError(f"no weights in {folder}")
    linear.load_state_dict({k.removeprefix("linear."): v for k, v in weights.items()})
    activation = config.get("activation_function", "torch.nn.modules.linear.Identity")
    if activation not in _ACTIVATIONS:
        raise ValueError(f"unsupported dense activation {activation}")
    return torch.nn.Sequential(linear, _ACTIVATIONS[activation]())


class MultilingualTextEncoder(TextModelBackbone):
    """transformer → pooling (mean or CLS) → dense; normalised embeddings, cached by text."""

    def __init__(self, spec, model, tokenizer, pooling: str, dense, max_tokens: int, placement: Placement, print_: str):
        super().__init__(spec, model, tokenizer, placement, print_)
        self.pooling = pooling
        self.dense = dense.to(device=placement.device, dtype=placement.dtype).eval()
        self.max_tokens = min(spec.max_tokens or max_tokens, max_tokens)
        self.text_cache = LRUCache(65536)
        self.text_batch_size = text_batch_size(placement, model.config.hidden_size, self.max_tokens)
        self.embedding_dim = dense[0].out_features
        self.text_graph = GraphedForward(self._text_forward, placement.device, f"{spec.name} text tower")

    @classmethod
    def from_folder(cls, spec: BackboneSpec, local: Path, placement: Placement, resolve: Callable[[str], Path]):
        from transformers import AutoModel, AutoTokenizer

        modules = _read_json(local / "modules.json")
        by_type = {m["type"].rsplit(".", 1)[-1]: local / m["path"] for m in modules}
        if "Transformer" not in by_type or "Pooling" not in by_type:
            raise ValueError(f"{local}/modules.json lacks a Transformer or Pooling module")
        root = by_type["Transformer"]
        # Sentence-transformers pool token states themselves; BERT-family poolers are never
        # used, and loading them (absent from such checkpoints) would only warn.
        has_pooler = _read_json(root / "config.json").get("model_type") in POOLER_MODEL_TYPES
        model = AutoModel.from_pretrained(root, **({"add_pooling_layer": False} if has_pooler else {}))
        tokenizer = AutoTokenizer.from_pretrained(root)
        pooling_config = _read_json(by_type["Pooling"] / "config.json")
        if pooling_config.get("pooling_mode_mean_tokens"):
            pooling = "mean"
        elif pooling_config.get("pooling_mode_cls_token"):
            pooling = "cls"
        else:
            raise ValueError("only mean or CLS pooling is supported")
        if "Dense" in by_type:
            dense = _load_dense(by_type["Dense"])
        else:
            dense = torch.nn.Sequential(torch.nn.Identity())
        limit = model.config.max_position_embeddings
        st_config = root / "sentence_bert_config.json"
        if st_config.is_file():
            limit = min(limit, _read_json(st_config).get("max_seq_length", limit))
        return cls(spec, model, tokenizer, pooling, dense, limit, placement, fingerprint(spec, local))

    def text_embeddings(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return encode_cached_texts(self, texts, self._encode_text_batch)

    def project(self, texts: list[str]) -> tuple[torch.Tensor, list[bool]]:
        """Unnormalised embeddings (differentiable; the fine-tuning recipes train through it) and truncation flags."""
        ids, mask, flags = tokenize_truncating(self.tokenizer, texts, self.max_tokens)
        return self._project(to_device(ids, self.placement.device), to_device(mask, self.placement.device)), flags

    def _project(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        hidden = self.model(input_ids=ids, attention_mask=attention_bias(mask, self.model.dtype)).last_hidden_state
        if self.pooling == "mean":
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        else:
            pooled = hidden[:, 0]
        return self.dense(pooled)

    def _text_forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return normalised(self._project(ids, mask))

    def _encode_text_batch(self, texts: list[str]) -> tuple[torch.Tensor, list[bool]]:
        ids, mask, flags = tokenize_truncating(self.tokenizer, texts, self.max_tokens)
        with inference():
            device = self.placement.device
            ids, mask = padded_for_graph(device, to_device(ids, device), to_device(mask, device), pad_token_id(self.tokenizer),
                                         self.max_tokens)
            return self.text_graph(ids, mask)[: len(texts)], flags
