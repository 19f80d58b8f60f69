"""OpenAI-format and LongCLIP-format state dicts → transformers CLIPModel.

The reference forward passes below are written from the OpenAI CLIP / LongCLIP
architecture (pre-LN residual blocks, fused in-projection attention, QuickGELU, causal text
mask, pooling at the end-of-text token, LongCLIP's two position tables) and read the state
dict directly, so they share no code with scoring.conversion.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from scoring.conversion import (
    ConversionError, LONGCLIP_POSITIONS, load_state_dict, openai_to_transformers, stretch_positions,
)
from scoring.tiny import IMAGE_SIZE, build_clip_tokenizer, random_openai_state_dict


def _layer_norm(x, sd, prefix):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], sd[f"{prefix}.weight"], sd[f"{prefix}.bias"], eps=1e-5)


def _attention(x, sd, prefix, heads, causal):
    batch, length, width = x.shape
    qkv = x @ sd[f"{prefix}.in_proj_weight"].T + sd[f"{prefix}.in_proj_bias"]
    q, k, v = qkv.split(width, dim=-1)
    head = width // heads

    def split(t):
        return t.view(batch, length, heads, head).transpose(1, 2)

    scores = split(q) @ split(k).transpose(-1, -2) / math.sqrt(head)
    if causal:
        scores = scores + torch.full((length, length), float("-inf")).triu(1)
    out = (scores.softmax(-1) @ split(v)).transpose(1, 2).reshape(batch, length, width)
    return out @ sd[f"{prefix}.out_proj.weight"].T + sd[f"{prefix}.out_proj.bias"]


def _blocks(x, sd, prefix, heads, causal):
    layer = 0
    while f"{prefix}.resblocks.{layer}.ln_1.weight" in sd:
        p = f"{prefix}.resblocks.{layer}"
        x = x + _attention(_layer_norm(x, sd, f"{p}.ln_1"), sd, f"{p}.attn", heads, causal)
        h = _layer_norm(x, sd, f"{p}.ln_2") @ sd[f"{p}.mlp.c_fc.weight"].T + sd[f"{p}.mlp.c_fc.bias"]
        h = h * torch.sigmoid(1.702 * h)  # QuickGELU
        x = x + h @ sd[f"{p}.mlp.c_proj.weight"].T + sd[f"{p}.mlp.c_proj.bias"]
        layer += 1
    return x


def reference_text(sd, ids: torch.Tensor, longclip: bool = False) -> torch.Tensor:
    width = sd["ln_final.weight"].shape[0]
    length = ids.shape[1]
    positions = sd["positional_embedding"]
    if longclip:
        mask1 = torch.zeros(LONGCLIP_POSITIONS, 1)
        mask1[:20] = 1
        positions = positions * mask1 + sd["positional_embedding_res"] * (1 - mask1)
    x = sd["token_embedding.weight"][ids] + positions[:length]
    x = _blocks(x, sd, "transformer", width // 64, causal=True)
    x = _layer_norm(x, sd, "ln_final")
    pooled = x[torch.arange(ids.shape[0]), ids.argmax(-1)]
    return torch.nn.functional.normalize(pooled @ sd["text_projection"], dim=-1)


def reference_image(sd, pixels: torch.Tensor) -> torch.Tensor:
    conv = sd["visual.conv1.weight"]
    width, patch = conv.shape[0], conv.shape[-1]
    x = torch.nn.functional.conv2d(pixels, conv, stride=patch).flatten(2).transpose(1, 2)
    cls = sd["visual.class_embedding"].expand(x.shape[0], 1, width)
    x = torch.cat([cls, x], dim=1) + sd["visual.positional_embedding"]
    x = _layer_norm(x, sd, "visual.ln_pre")
    x = _blocks(x, sd, "visual.transformer", width // 64, causal=False)
    x = _layer_norm(x[:, 0], sd, "visual.ln_post")
    return torch.nn.functional.normalize(x @ sd["visual.proj"], dim=-1)


def _padded_ids(tokenizer, texts, limit):
    rows = [tokenizer(t)["input_ids"][:limit] for t in texts]
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), tokenizer.eos_token_id)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
    return ids


TEXTS = ["a dog on the grass", "two red cars next to a big house", "a"]


@pytest.mark.parametrize("longclip", [False, True])
def test_converted_embeddings_match_reference_forward(longclip):
    tokenizer = build_clip_tokenizer()
    sd = random_openai_state_dict(
        7, len(tokenizer), text_positions=LONGCLIP_POSITIONS if longclip else 77, longclip=longclip
    )
    model = openai_to_transformers(sd, longclip=longclip, eos_token_id=tokenizer.eos_token_id)
    assert model.config.text_config.max_position_embeddings == (248 if longclip else 77)
    assert model.config.vision_config.num_attention_heads == 2  # width 128 // 64

    texts = TEXTS + (["a dog " * 60] if longclip else [])  # >77 tokens reaches positions ≥ 20 and ≥ 77
    ids = _padded_ids(tokenizer, texts, model.config.text_config.max_position_embeddings)
    with torch.no_grad():
        ours = torch.nn.functional.normalize(model.text_projection(model.text_model(input_ids=ids).pooler_output), dim=-1)
        expected = reference_text(sd, ids, longclip=longclip)
    np.testing.assert_allclose(ours.numpy(), expected.numpy(), atol=1e-5)

    pixels = torch.randn(3, 3, IMAGE_SIZE, IMAGE_SIZE, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ours_img = torch.nn.functional.normalize(
            model.visual_projection(model.vision_model(pixel_values=pixels).pooler_output), dim=-1
        )
        expected_img = reference_image(sd, pixels)
    np.testing.assert_allclose(ours_img.numpy(), expected_img.numpy(), atol=1e-5)


def test_longclip_uses_both_position_tables():
    """Changing `positional_embedding_res` rows < 20 must not matter; rows ≥ 20 must."""
    tokenizer = build_clip_tokenizer()
    sd = random_openai_state_dict(11, len(tokenizer), text_positions=248, longclip=True)
    model = openai_to_transformers(sd, longclip=True)
    table = model.text_model.embeddings.position_embedding.weight.detach()
    torch.testing.assert_close(table[:20], sd["positional_embedding"][:20])
    torch.testing.assert_close(table[20:], sd["positional_embedding_res"][20:])


def test_stretch_positions_follows_longclip_initialisation():
    table = torch.arange(77, dtype=torch.float32).unsqueeze(1).repeat(1, 3)
    stretched = stretch_positions(table)
    assert stretched.shape == (248, 3)
    torch.testing.assert_close(stretched[:20], table[:20])
    # After the kept rows, each old step of 1 becomes four steps of 0.25.
    np.testing.assert_allclose(stretched[20:, 0].numpy(), 20 + 0.25 * np.arange(228), atol=1e-6)
    plain = random_openai_state_dict(5, 300)
    assert openai_to_transformers(plain, longclip=True).config.text_config.max_position_embeddings == 248


def test_load_state_dict_unwraps_containers(tmp_path):
    sd = random_openai_state_dict(3, 300)
    torch.save({"state_dict": {f"module.{k}": v for k, v in sd.items()}, "epoch": 3}, tmp_path / "wrapped.pth")
    loaded = load_state_dict(tmp_path / "wrapped.pth")
    assert loaded.keys() == sd.keys()
    torch.testing.assert_close(loaded["visual.proj"], sd["visual.proj"])


def test_rejects_what_is_not_a_vit_clip_state_dict():
    with pytest.raises(ConversionError, match="not an OpenAI ViT CLIP"):
        openai_to_transformers({"foo": torch.zeros(2)})
