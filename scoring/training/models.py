"""Trainable models loaded and saved through the same code that scores with them.

Loading goes through the backbone loaders of `scoring.backbones` (in fp32: training runs
under autocast, never on half-precision weights), so a trained folder is known to load in
the Scorer.  The differentiable forward passes mirror the backbones' inference paths.
"""
from __future__ import annotations

import dataclasses

import json
from pathlib import Path

import torch
from torch import nn

from scoring.backbones import Placement
from scoring.backbones.text import tokenize_truncating
from scoring.images import load_image
from scoring.registry import BackboneSpec, tiny_dir


def detect_kind(folder: Path) -> str:
    """The backbone kind of a checkpoint folder, from its files."""
    about = folder / "caplens_r.json"
    if about.is_file() and json.loads(about.read_text(encoding="utf-8")).get("mode", "frozen") == "frozen":
        return "caplens-r"  # a cross-mode CapLens-R is a BLIP ITM folder with a note beside it
    if (folder / "modules.json").is_file():
        return "st-text"
    config = folder / "config.json"
    if config.is_file():
        model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type")
        if model_type in ("clip", "blip"):
            return {"clip": "clip", "blip": "blip-itm"}[model_type]
    raise ValueError(f"{folder.name}/ is not a CLIP, sentence-transformers, BLIP ITM or CapLens-R folder")


def check_model_ref(ref: str) -> None:
    """The error `resolve_model` gives for a folder that is not there, without loading a model:
    a run checks its `base` and `teacher` before minutes of loading data (a preset chain such as
    `pac-s-swap` starts from the run folder of the preset before it). The tiny checkpoints, which
    tiny presets name, are built here on first use."""
    path = Path(ref)
    if not path.exists() and tiny_dir() in path.parents:
        from scoring.tiny import ensure_tiny_checkpoints

        ensure_tiny_checkpoints()  # tiny presets name the tiny checkpoints, built on first use
    if not path.exists() and not ref.partition(":")[1]:
        raise ValueError(f"model not found: {ref} (a folder, or PROFILE:BACKBONE such as world:clip)")


def resolve_model(ref: str) -> tuple[Path, BackboneSpec]:
    """A model reference (a folder, or `PROFILE:BACKBONE` of a registry profile) -> local folder and spec."""
    from scoring.backbones import BackboneUnavailable, fetch
    from scoring.registry import load_registry

    path = Path(ref)
    check_model_ref(ref)
    if path.exists():
        return path, BackboneSpec(name=path.name, kind=detect_kind(path), label=path.name, path=path)
    profile, _, name = ref.partition(":")
    registry = load_registry(profile)
    if name not in registry.backbones:
        raise ValueError(f"profile {profile!r} has no backbone {name!r}; known: {', '.join(registry.backbones)}")
    spec = registry.backbones[name]
    try:
        return fetch(spec), spec
    except BackboneUnavailable as exc:
        raise ValueError(f"{ref}: {exc}") from None


def load_trainable(ref: str, device: torch.device, expected: tuple[str, ...]):
    """The loaded backbone object for `ref` (fp32, on `device`), checked to be of an expected kind."""
    from scoring.backbones import load_backbone

    local, spec = resolve_model(ref)
    if spec.kind not in expected:
        raise ValueError(f"{ref} is a {spec.kind} checkpoint; this recipe needs {' or '.join(expected)}")

    def resolve_reference(name: str) -> Path:
        raise ValueError(f"{ref}: state-dict checkpoints (kind {spec.kind}) need a folder checkpoint to train")

    # fp32 weights even on CUDA, where scoring runs each kind in its own half precision: an
    # optimizer stepping fp16 weights overflows (a cross-mode run went to NaN before step 400)
    return load_backbone(dataclasses.replace(spec, precision="fp32"), Placement(device, torch.float32),
                         resolve_reference)


class PixelCache:
    """Pixel tensors of images by path (or id), computed once with the checkpoint's own image processor."""

    def __init__(self, image_processor):
        self.image_processor = image_processor
        self.cache: dict[str, torch.Tensor] = {}

    def __call__(self, images: list, keys: list[str], device: torch.device) -> torch.Tensor:
        todo = [(k, im) for k, im in dict(zip(keys, images)).items() if k not in self.cache]
        if todo:
            pixels = self.image_processor(images=[load_image(im) for _, im in todo], return_tensors="pt")["pixel_values"]
            for (key, _), row in zip(todo, pixels):
                self.cache[key] = row
        return torch.stack([self.cache[k] for k in keys]).to(device)


# -- position information ----------------------------------------------------------------------------
def grid_position_table(side: int, dim: int) -> torch.Tensor:
    """(side * side, dim) fixed 2-D sine-cosine positions of a square patch grid in row-major order
    (a quarter of the channels each: sin x, cos x, sin y, cos y, frequencies 1 to 1/10), each
    channel scaled to unit standard deviation over the grid."""
    if dim % 4:
        raise ValueError(f"2-D positions split the width in four; {dim} is not a multiple of 4")
    ys, xs = torch.meshgrid(torch.arange(side, dtype=torch.float64), torch.arange(side, dtype=torch.float64),
                            indexing="ij")
    freq = 10.0 ** (-torch.arange(dim // 4, dtype=torch.float64) / (dim // 4))
    table = torch.cat([f(axis[..., None] * freq) for axis in (xs, ys) for f in (torch.sin, torch.cos)], -1)
    table = table.reshape(side * side, dim)
    return (table / table.std(dim=0, unbiased=False).clamp(min=1e-6)).float()


@torch.no_grad()
def add_grid_positions(vision_model: nn.Module, strength: float) -> None:
    """Add `strength` x `grid_position_table` to a ViT's learned patch positions ([CLS] untouched).
    Why: the world towers' learned positions stayed tiny (per-channel spread about 0.03 against
    patch contents of about 2), so nothing downstream could tell where an object is, and a
    relation ("left of") could not be learned at all; with the fixed grid added a cross-encoder
    learns relations in a few hundred steps (docs/training.md). A weight edit done once before a
    continuation; the saved folder loads as any other."""
    embeddings = vision_model.embeddings
    weight = embeddings.position_embedding
    weight = weight.weight if isinstance(weight, nn.Embedding) else weight  # CLIP: Embedding; BLIP: (1, n, d)
    table = weight.view(-1, weight.shape[-1])
    side = int(round((table.shape[0] - 1) ** 0.5))
    if side * side + 1 != table.shape[0]:
        raise ValueError(f"{table.shape[0]} positions are not a [CLS] plus a square grid")
    table[1:] += strength * grid_position_table(side, table.shape[-1]).to(table.device, table.dtype)


# -- forward passes (differentiable twins of the backbones' inference code) ------------------------
def clip_text_features(backbone, texts: list[str], device: torch.device) -> torch.Tensor:
    ids, mask, _ = tokenize_truncating(backbone.tokenizer, texts, backbone.max_tokens)
    out = backbone.model.text_model(input_ids=ids.to(device), attention_mask=mask.to(device))
    return backbone.model.text_projection(out.pooler_output)


def clip_image_features(backbone, pixels: torch.Tensor) -> torch.Tensor:
    return backbone.model.visual_projection(backbone.model.vision_model(pixel_values=pixels).pooler_output)


def st_text_features(encoder, texts: list[str], device: torch.device) -> torch.Tensor:
    return encoder.project(texts)[0]


def itm_cls(backbone, pixels: torch.Tensor, texts: list[str], device: torch.device,
            image_index: torch.Tensor | None = None) -> torch.Tensor:
    """[CLS] state of the ITM text encoder cross-attending to the image (BLIP ITM).  With
    `image_index`, `pixels` holds each distinct image once and text k reads image
    image_index[k] (one vision pass per image, however many captions it has)."""
    states = backbone.model.vision_model(pixel_values=pixels).last_hidden_state
    if image_index is not None:
        states = states[image_index.to(states.device)]
    ids, mask, _ = tokenize_truncating(backbone.tokenizer, texts, backbone.max_tokens)
    image_mask = torch.ones(states.shape[:-1], dtype=torch.long, device=device)
    encoded = backbone.model.text_encoder(
        input_ids=ids.to(device), attention_mask=mask.to(device),
        encoder_hidden_states=states, encoder_attention_mask=image_mask).last_hidden_state
    return encoded[:, 0, :]


# -- saving ----------------------------------------------------------------------------------------
def save_backbone(backbone, out: Path) -> None:
    """A CLIP or ITM backbone as the folder its loader reads: model, tokenizer, image processor."""
    out.mkdir(parents=True, exist_ok=True)
    backbone.model.save_pretrained(out)
    backbone.tokenizer.save_pretrained(out)
    backbone.image_processor.save_pretrained(out)


def save_st_text(transformer, tokenizer, dense: nn.Linear, out: Path, max_seq_length: int, pooling: str = "mean") -> None:
    """Sentence-transformers layout: transformer at the root, 1_Pooling, 2_Dense (identity activation)."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    transformer.save_pretrained(out)
    tokenizer.save_pretrained(out)
    width = transformer.config.hidden_size
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
    ]
    (out / "modules.json").write_text(json.dumps(modules, indent=1), encoding="utf-8")
    (out / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False}), encoding="utf-8")
    (out / "1_Pooling").mkdir(exist_ok=True)
    (out / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": width, "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean", "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False}, indent=1), encoding="utf-8")
    (out / "2_Dense").mkdir(exist_ok=True)
    (out / "2_Dense" / "config.json").write_text(json.dumps({
        "in_features": dense.in_features, "out_features": dense.out_features, "bias": dense.bias is not None,
        "activation_function": "torch.nn.modules.linear.Identity"}, indent=1), encoding="utf-8")
    weights = {"linear.weight": dense.weight.detach().float().cpu().contiguous()}
    if dense.bias is not None:
        weights["linear.bias"] = dense.bias.detach().float().cpu().contiguous()
    save_file(weights, str(out / "2_Dense" / "model.safetensors"))


def save_st_encoder(encoder, out: Path) -> None:
    """A loaded MultilingualTextEncoder (its Linear inside the dense Sequential) back to its folder layout."""
    save_st_text(encoder.model, encoder.tokenizer, encoder.dense[0], out, encoder.max_tokens, encoder.pooling)
