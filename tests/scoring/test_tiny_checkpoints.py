"""Tiny checkpoints: every kind, deterministic, loadable through the hub loading code."""
from __future__ import annotations

import torch
from safetensors.torch import load_file

from scoring.api import Scorer
from scoring.conversion import load_state_dict
from scoring.tiny import build_clip_folder, ensure_tiny_checkpoints


def test_every_backbone_kind_is_built_and_loads(tiny_dir, tiny_scorer):
    for name, spec in tiny_scorer.registry.backbones.items():
        assert spec.path.exists(), name
        assert tiny_scorer.unavailable_reason(next(m for m, s in tiny_scorer.registry.metrics.items() if s.backbone == name)) is None
    assert (tiny_dir / "mclip-text" / "modules.json").is_file()
    assert (tiny_dir / "mclip-text" / "2_Dense" / "config.json").is_file()
    specs = load_state_dict(tiny_dir / "specs" / "longclip_tiny.pt")
    assert specs["positional_embedding"].shape[0] == specs["positional_embedding_res"].shape[0] == 248
    assert "visual.conv1.weight" in load_state_dict(tiny_dir / "pacs" / "clip_tiny.pth")


def test_builds_are_deterministic(tmp_path, tiny_dir):
    build_clip_folder(tmp_path / "clip")
    again, first = load_file(str(tmp_path / "clip" / "model.safetensors")), load_file(str(tiny_dir / "clip" / "model.safetensors"))
    assert again.keys() == first.keys()
    assert all(torch.equal(again[k], first[k]) for k in first)
    assert (tmp_path / "clip" / "tokenizer.json").read_text() == (tiny_dir / "clip" / "tokenizer.json").read_text()


def test_tiny_profile_builds_what_is_missing(tmp_path, monkeypatch, tiny_dir):
    monkeypatch.setenv("CAPLENS_TINY_DIR", str(tmp_path / "fresh"))
    scorer = Scorer("tiny", device="cpu")
    assert (tmp_path / "fresh" / "VERSION").is_file()
    assert scorer.registry.backbones["clip"].path == tmp_path / "fresh" / "clip"
    assert ensure_tiny_checkpoints(tmp_path / "fresh") == tmp_path / "fresh"  # up to date: no rebuild
