"""A checkpoint that cannot be had makes only its metrics unavailable, with the reason."""
from __future__ import annotations

import shutil

import pytest

from scoring.api import ScoreItem, Scorer


def _write_profile(tmp_path, tiny_dir, pacs_path: str, clip_source: str) -> str:
    profile = tmp_path / "broken.toml"
    profile.write_text(f'''
[backbones.clip]
kind = "clip"
label = "tiny CLIP"
{clip_source}

[backbones.pacs]
kind = "openai-clip"
label = "PAC-S"
path = "{pacs_path}"
tokenizer = "{tiny_dir / 'clip'}"

[backbones.text]
kind = "st-text"
label = "multilingual"
path = "{tiny_dir / 'mclip-text'}"

[metrics."CLIP-S"]
family = "clip-s"
backbone = "clip"
w = 2.5
prefix = "A photo depicts "

[metrics."PAC-S"]
family = "clip-s"
backbone = "pacs"
w = 2.0

[metrics.MCS]
family = "mcs"
backbone = "text"
vision_backbone = "clip"
w = 2.5
''')
    return str(profile)


def _score(profile, make_image):
    scorer = Scorer(profile, device="cpu")
    return scorer.score([ScoreItem(make_image(1), "a dog"), ScoreItem(make_image(2), "a cat")])


def test_missing_file(tmp_path, tiny_dir, make_image):
    results = _score(_write_profile(tmp_path, tiny_dir, str(tmp_path / "nope.pth"), f'path = "{tiny_dir / "clip"}"'), make_image)
    assert results["PAC-S"].unavailable.startswith("checkpoint not found:")
    assert results["PAC-S"].values == [None, None]
    assert results["CLIP-S"].unavailable is None and results["MCS"].unavailable is None
    assert all(isinstance(v, float) for v in results["CLIP-S"].values)


def test_corrupt_file(tmp_path, tiny_dir, make_image):
    corrupt = tmp_path / "corrupt.pth"
    corrupt.write_bytes(b"this is not a torch checkpoint")
    results = _score(_write_profile(tmp_path, tiny_dir, str(corrupt), f'path = "{tiny_dir / "clip"}"'), make_image)
    assert results["PAC-S"].unavailable.startswith("cannot load")
    assert results["CLIP-S"].unavailable is None


def test_corrupt_folder_weights(tmp_path, tiny_dir, make_image):
    broken = tmp_path / "clip"
    shutil.copytree(tiny_dir / "clip", broken)
    (broken / "model.safetensors").write_bytes(b"\x00" * 100)
    results = _score(_write_profile(tmp_path, tiny_dir, str(tiny_dir / "pacs" / "clip_tiny.pth"), f'path = "{broken}"'), make_image)
    # CLIP-S and MCS (CLIP vision tower) go; PAC-S borrows only the tokenizer and still runs.
    assert results["CLIP-S"].unavailable.startswith("cannot load")
    assert results["MCS"].unavailable == results["CLIP-S"].unavailable
    assert results["PAC-S"].unavailable is None


def test_offline_hub_id(tmp_path, tiny_dir, monkeypatch, make_image):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # an empty hub cache
    clip = 'hub = "openai/clip-vit-base-patch32"\nrevision = "main"'
    results = _score(_write_profile(tmp_path, tiny_dir, str(tiny_dir / "pacs" / "clip_tiny.pth"), clip), make_image)
    assert results["CLIP-S"].unavailable.startswith("cannot fetch openai/clip-vit-base-patch32@main")
    assert results["MCS"].unavailable is not None
    assert results["PAC-S"].unavailable is None


def test_hub_profile_offline_still_scores_ngrams(tmp_path, monkeypatch, make_image):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    scorer = Scorer("hub", device="cpu")
    results = scorer.score([ScoreItem(make_image(3), "a dog", ["a dog"])], ["CLIP-S", "PAC-S", "PR-MCS", "UMIC", "ROUGE-L"])
    assert "cannot fetch" in results["CLIP-S"].unavailable
    assert results["PAC-S"].unavailable.startswith("checkpoint not found")
    assert "pr-mcs-text" in results["PR-MCS"].unavailable and "umic-itm" in results["UMIC"].unavailable
    assert scorer.unavailable_reason("CLIP-S") == results["CLIP-S"].unavailable
    if shutil.which("java"):
        assert results["ROUGE-L"].values == [1.0]


def test_bad_inputs_raise_before_scoring(tiny_scorer, tmp_path):
    with pytest.raises(FileNotFoundError, match="image not found"):
        tiny_scorer.score([ScoreItem(tmp_path / "missing.png", "a dog")])
    not_image = tmp_path / "x.png"
    not_image.write_text("hello")
    with pytest.raises(OSError, match="cannot read image"):
        tiny_scorer.score([ScoreItem(not_image, "a dog")], ["CLIP-S"])
    with pytest.raises(LookupError, match="unknown metric"):
        tiny_scorer.score([ScoreItem(None, "a dog")], ["NOPE"])
    with pytest.raises(ValueError, match="references"):
        tiny_scorer.score([ScoreItem(None, "a dog", "not a list")])


def test_without_java_ngram_metrics_are_unavailable(tiny_scorer, monkeypatch):
    from scoring.metrics import coco

    monkeypatch.setattr(coco.shutil, "which", lambda name: None)
    coco._ptb_cache.clear()
    result = tiny_scorer.score([ScoreItem(None, "a brand new caption", ["a dog"])], ["ROUGE-L", "BLEU-1"])
    assert result["ROUGE-L"].unavailable.startswith("needs a Java runtime")
    assert result["BLEU-1"].unavailable.startswith("needs a Java runtime")
