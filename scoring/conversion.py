"""Convert OpenAI-CLIP-format and LongCLIP-format state dicts into transformers CLIPModel.

PAC-S ships its fine-tuned ViT-B/32 as the state dict of an OpenAI ``clip`` model, and
LongCLIP / SPECS ship theirs in the same layout plus a second text position table.  Both are
loaded here into ``transformers.CLIPModel`` so every CLIP-like metric runs through one code
path.  The architecture is read off the tensor shapes, as OpenAI's ``build_model`` does
(heads = width // 64 unless told otherwise).

LongCLIP detail: its text tower holds two 248-row position tables and adds
``positional_embedding`` on positions 0-19 and ``positional_embedding_res`` on 20-247 (masks
``mask1``/``mask2`` in LongCLIP's model).  The converted model stores that sum as one table,
so it computes what the LongCLIP weights compute.  A plain 77-position state dict given as
LongCLIP is stretched the way LongCLIP initialises: the first 20 positions are kept and the
other 57 are linearly interpolated 4x (4*77 - 3*20 = 248).
"""
from __future__ import annotations

import re
from pathlib import Path

import torch

LONGCLIP_KEEP = 20
LONGCLIP_POSITIONS = 248


class ConversionError(ValueError):
    """The state dict is not an OpenAI/LongCLIP ViT CLIP state dict."""


def load_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """Read a ``.pth``/``.pt`` checkpoint and unwrap the usual containers.

    Accepts a bare state dict, ``{"state_dict": ...}`` / ``{"model": ...}`` wrappers and a
    ``module.`` prefix (DataParallel), loaded with ``weights_only=True`` (no code runs).
    """
    path = Path(path)
    obj = torch.load(path, map_location="cpu", weights_only=True)
    for key in ("state_dict", "model", "model_state_dict"):
        if isinstance(obj, dict) and key in obj and isinstance(obj[key], dict):
            obj = obj[key]
    if not isinstance(obj, dict) or not obj:
        raise ConversionError(f"{path}: not a state dict")
    if all(k.startswith("module.") for k in obj):
        obj = {k[len("module."):]: v for k, v in obj.items()}
    return {k: v for k, v in obj.items() if isinstance(v, torch.Tensor)}


def stretch_positions(table: torch.Tensor, keep: int = LONGCLIP_KEEP, factor: int = 4) -> torch.Tensor:
    """LongCLIP's initial 77→248 position stretch: keep ``keep`` rows, interpolate the rest.

    Between consecutive kept-after rows p_i, p_{i+1} it inserts p_i + k/4·(p_{i+1}-p_i),
    k = 0..3; after the last row it extrapolates with the last difference.
    """
    length, _ = table.shape
    rows = [table[i] for i in range(keep)]
    for i in range(keep, length):
        step = table[i] - table[i - 1] if i + 1 == length else table[i + 1] - table[i]
        for k in range(factor):
            rows.append(table[i] + step * (k / factor))
    return torch.stack(rows)


def _count_layers(state: dict[str, torch.Tensor], prefix: str) -> int:
    pattern = re.compile(re.escape(prefix) + r"(\d+)\.")
    found = {int(m.group(1)) for k in state if (m := pattern.match(k))}
    if not found:
        raise ConversionError(f"no transformer blocks under {prefix!r}")
    return max(found) + 1


def _effective_text_positions(state: dict[str, torch.Tensor], longclip: bool) -> torch.Tensor:
    table = state["positional_embedding"]
    if "positional_embedding_res" in state:
        residual = state["positional_embedding_res"]
        if residual.shape != table.shape:
            raise ConversionError("positional_embedding_res and positional_embedding differ in shape")
        merged = residual.clone()
        merged[:LONGCLIP_KEEP] = table[:LONGCLIP_KEEP]
        return merged
    if longclip and table.shape[0] != LONGCLIP_POSITIONS:
        return stretch_positions(table)
    return table


def openai_to_transformers(
    state: dict[str, torch.Tensor],
    *,
    longclip: bool = False,
    vision_heads: int | None = None,
    text_heads: int | None = None,
    eos_token_id: int | None = None,
    bos_token_id: int | None = None,
    pad_token_id: int | None = None,
):
    """Build a transformers ``CLIPModel`` holding the weights of an OpenAI-format state dict."""
    from transformers import CLIPConfig, CLIPModel

    required = ("visual.conv1.weight", "visual.proj", "token_embedding.weight", "text_projection", "ln_final.weight")
    missing = [k for k in required if k not in state]
    if missing:
        kind = "ResNet CLIP" if "visual.layer1.0.conv1.weight" in state else "OpenAI ViT CLIP"
        raise ConversionError(f"not an OpenAI ViT CLIP state dict ({kind}); missing {missing}")

    conv = state["visual.conv1.weight"]
    vision_width, patch = conv.shape[0], conv.shape[-1]
    grid = round((state["visual.positional_embedding"].shape[0] - 1) ** 0.5)
    text_width = state["ln_final.weight"].shape[0]
    positions = _effective_text_positions(state, longclip)
    vocab_size = state["token_embedding.weight"].shape[0]
    vision_config = dict(
        hidden_size=vision_width,
        intermediate_size=state["visual.transformer.resblocks.0.mlp.c_fc.weight"].shape[0],
        num_hidden_layers=_count_layers(state, "visual.transformer.resblocks."),
        num_attention_heads=vision_heads or max(1, vision_width // 64),
        image_size=patch * grid,
        patch_size=patch,
        hidden_act="quick_gelu",
        projection_dim=state["visual.proj"].shape[1],
    )
    text_config = dict(
        vocab_size=vocab_size,
        hidden_size=text_width,
        intermediate_size=state["transformer.resblocks.0.mlp.c_fc.weight"].shape[0],
        num_hidden_layers=_count_layers(state, "transformer.resblocks."),
        num_attention_heads=text_heads or max(1, text_width // 64),
        max_position_embeddings=positions.shape[0],
        hidden_act="quick_gelu",
        projection_dim=state["text_projection"].shape[1],
        # OpenAI pools at the end-of-text token, the largest id of its vocabulary.
        eos_token_id=vocab_size - 1 if eos_token_id is None else eos_token_id,
        bos_token_id=vocab_size - 2 if bos_token_id is None else bos_token_id,
        pad_token_id=(vocab_size - 1 if eos_token_id is None else eos_token_id) if pad_token_id is None else pad_token_id,
    )
    config = CLIPConfig(
        text_config=text_config,
        vision_config=vision_config,
        projection_dim=state["text_projection"].shape[1],
    )
    hf_state = _convert_keys(state, positions)
    model = CLIPModel(config)
    result = model.load_state_dict(hf_state, strict=False)
    missing = [k for k in result.missing_keys if not k.endswith("position_ids")]
    if missing or result.unexpected_keys:
        raise ConversionError(f"key conversion incomplete: missing {missing}, unexpected {result.unexpected_keys}")
    return model.eval()


def _convert_blocks(state, source_prefix: str, target_prefix: str, out: dict) -> None:
    for layer in range(_count_layers(state, source_prefix)):
        src = f"{source_prefix}{layer}."
        dst = f"{target_prefix}{layer}."
        q, k, v = state[src + "attn.in_proj_weight"].chunk(3, dim=0)
        qb, kb, vb = state[src + "attn.in_proj_bias"].chunk(3, dim=0)
        for name, weight, bias in (("q_proj", q, qb), ("k_proj", k, kb), ("v_proj", v, vb)):
            out[f"{dst}self_attn.{name}.weight"] = weight
            out[f"{dst}self_attn.{name}.bias"] = bias
        renames = {
            "attn.out_proj": "self_attn.out_proj",
            "ln_1": "layer_norm1",
            "ln_2": "layer_norm2",
            "mlp.c_fc": "mlp.fc1",
            "mlp.c_proj": "mlp.fc2",
        }
        for old, new in renames.items():
            out[f"{dst}{new}.weight"] = state[f"{src}{old}.weight"]
            out[f"{dst}{new}.bias"] = state[f"{src}{old}.bias"]


def _convert_keys(state: dict[str, torch.Tensor], text_positions: torch.Tensor) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {
        "text_model.embeddings.token_embedding.weight": state["token_embedding.weight"],
        "text_model.embeddings.position_embedding.weight": text_positions,
        "text_model.final_layer_norm.weight": state["ln_final.weight"],
        "text_model.final_layer_norm.bias": state["ln_final.bias"],
        "text_projection.weight": state["text_projection"].t().contiguous(),
        "vision_model.embeddings.class_embedding": state["visual.class_embedding"],
        "vision_model.embeddings.patch_embedding.weight": state["visual.conv1.weight"],
        "vision_model.embeddings.position_embedding.weight": state["visual.positional_embedding"],
        "vision_model.pre_layrnorm.weight": state["visual.ln_pre.weight"],
        "vision_model.pre_layrnorm.bias": state["visual.ln_pre.bias"],
        "vision_model.post_layernorm.weight": state["visual.ln_post.weight"],
        "vision_model.post_layernorm.bias": state["visual.ln_post.bias"],
        "visual_projection.weight": state["visual.proj"].t().contiguous(),
    }
    if "logit_scale" in state:
        out["logit_scale"] = state["logit_scale"].reshape(())
    _convert_blocks(state, "transformer.resblocks.", "text_model.encoder.layers.", out)
    _convert_blocks(state, "visual.transformer.resblocks.", "vision_model.encoder.layers.", out)
    return {k: v.float() for k, v in out.items()}
