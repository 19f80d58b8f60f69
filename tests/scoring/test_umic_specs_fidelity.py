"""Fidelity points of UMIC and SPECS against hand computations on the raw models.

UMIC is sigmoid of one logit on the ITM [CLS] state and a released one-output head loads into
it; UMIC-C keeps the ITM pair head; SPECS scores max(cos, 0) (paper) or clamp((cos+1)/2, 0)
(released code) as the registry says.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from scoring.api import ScoreItem, Scorer

TEXTS = ["a dog on the grass", "two red cars", "a small white cat"]


def _scorer_with(monkeypatch, tmp_path, toml: str) -> Scorer:
    config = tmp_path / "registry.toml"
    config.write_text(toml)
    monkeypatch.setenv("CAPLENS_REGISTRY_CONFIG", str(config))
    return Scorer("tiny", device="cpu")


def _itm_cls_and_logits(folder, images, texts):
    """[CLS] states entering the ITM head and its two logits, from the raw transformers model."""
    from transformers import BlipForImageTextRetrieval, BlipProcessor

    model, processor = BlipForImageTextRetrieval.from_pretrained(folder).eval(), BlipProcessor.from_pretrained(folder)
    captured = []
    model.itm_head.register_forward_hook(lambda module, inputs, output: captured.append(inputs[0]))
    with torch.no_grad():
        batch = processor(images=images, text=texts, padding=True, return_tensors="pt")
        logits = model(**batch, use_itm_head=True).itm_score
    return captured[0].double(), logits.double()


def test_umic_without_its_own_head_is_the_pair_heads_logit_difference(tiny_scorer, images):
    """A UMIC folder with no one-output head: W = W1 − W0, b = b1 − b0, so the one logit gives
    exactly the pair head's P(match); UMIC-C on its own backbone stays softmax[:, 1]."""
    folder = tiny_scorer.registry.backbones["umic-itm"].path
    results = tiny_scorer.score([ScoreItem(im, t) for im, t in zip(images, TEXTS)], ["UMIC"])
    _, logits = _itm_cls_and_logits(folder, images[:3], TEXTS)
    np.testing.assert_allclose(results["UMIC"].values, torch.sigmoid(logits[:, 1] - logits[:, 0]).numpy(), atol=1e-5)
    assert tiny_scorer.backbone("umic-itm").one_logit_source.startswith("the ITM pair head")
    assert "sigmoid(W·i_CLS + b)" in tiny_scorer.info("UMIC").description
    assert "softmax of its two ITM logits" in tiny_scorer.info("UMIC-C").description


def test_released_one_output_umic_head_loads_and_scores_sigmoid_of_one_logit(monkeypatch, tmp_path, tiny_dir, images):
    """A UNITER-style checkpoint (uniter.*, itm_output 2×H, rank_output 1×H) as the released
    UMIC ships it: UMIC = sigmoid(rank_output(CLS)); UMIC-C keeps the pair head."""
    hidden = 64
    generator = torch.Generator().manual_seed(7)
    weight, bias = torch.randn(1, hidden, generator=generator), torch.tensor([0.3])
    released = {
        "uniter.embeddings.word_embeddings.weight": torch.randn(30, hidden, generator=generator),
        "itm_output.weight": torch.randn(2, hidden, generator=generator), "itm_output.bias": torch.zeros(2),
        "rank_output.weight": weight, "rank_output.bias": bias,
    }
    torch.save({"model": released}, tmp_path / "umic.pt")
    scorer = _scorer_with(monkeypatch, tmp_path, f'[profiles.tiny.backbones.umic-itm]\nhead_file = "{tmp_path / "umic.pt"}"\n')
    items = [ScoreItem(im, t) for im, t in zip(images, TEXTS)]
    results = scorer.score(items, ["UMIC", "UMIC-C"])
    cls, _ = _itm_cls_and_logits(tiny_dir / "umic-itm", images[:3], TEXTS)
    expected = torch.sigmoid(cls @ weight.double().T + bias.double())[:, 0].numpy()
    np.testing.assert_allclose(results["UMIC"].values, expected, atol=1e-5)
    _, pair_logits = _itm_cls_and_logits(tiny_dir / "blip-itm", images[:3], TEXTS)
    np.testing.assert_allclose(results["UMIC-C"].values, pair_logits.softmax(-1)[:, 1].numpy(), atol=1e-5)
    assert scorer.backbone("umic-itm").one_logit_source == str(tmp_path / "umic.pt")


def test_umic_head_file_in_the_checkpoint_folder_is_used(monkeypatch, tmp_path, tiny_dir, images):
    import shutil

    from safetensors.torch import save_file

    from scoring.backbones.itm import ONE_LOGIT_HEAD_FILE

    folder = shutil.copytree(tiny_dir / "umic-itm", tmp_path / "umic-itm")
    weight, bias = torch.full((1, 64), 0.05), torch.tensor([-1.0])
    save_file({"weight": weight, "bias": bias}, str(folder / ONE_LOGIT_HEAD_FILE))
    scorer = _scorer_with(monkeypatch, tmp_path, f'[profiles.tiny.backbones.umic-itm]\npath = "{folder}"\n')
    result = scorer.score([ScoreItem(images[0], TEXTS[0])], ["UMIC"])["UMIC"]
    cls, _ = _itm_cls_and_logits(folder, images[:1], TEXTS[:1])
    assert result.values[0] == pytest.approx(float(torch.sigmoid(cls @ weight.double().T - 1.0)), abs=1e-5)


def test_a_head_file_without_a_one_output_head_makes_umic_unavailable(monkeypatch, tmp_path, tiny_dir, images):
    from safetensors.torch import save_file

    save_file({"weight": torch.zeros(2, 64), "bias": torch.zeros(2)}, str(tmp_path / "pair.safetensors"))
    scorer = _scorer_with(monkeypatch, tmp_path,
                          f'[profiles.tiny.backbones.umic-itm]\nhead_file = "{tmp_path / "pair.safetensors"}"\n')
    result = scorer.score([ScoreItem(images[0], "a dog")], ["UMIC"])["UMIC"]
    assert result.values == [None] and "no one-output head (a 1×64 weight with a bias of 1)" in result.unavailable


def test_specs_paper_and_released_scales(monkeypatch, tmp_path, tiny_dir, make_image):
    scorer = _scorer_with(monkeypatch, tmp_path, (
        '[profiles.tiny.metrics."SPECS (released scale)"]\nfamily = "specs"\nbackbone = "specs"\nscale = "released"\n'
    ))
    # Image seeds and captions picked so the tiny random SPECS gives cosines of both signs.
    images = [make_image(seed) for seed in (7, 7, 9, 0)]
    captions = ["a dog on the grass next to a red car", "two red cars", "a small white cat", "a tree"]
    results = scorer.score([ScoreItem(im, c) for im, c in zip(images, captions)], ["SPECS", "SPECS (released scale)"])
    cos = np.sum(scorer.image_embeddings(images, backbone="specs")
                 * scorer.text_embeddings(captions, backbone="specs"), axis=1).astype(np.float64)
    assert (cos < 0).any() and (cos > 0).any(), "the check needs cosines on both sides of 0"
    np.testing.assert_allclose(results["SPECS"].values, np.maximum(cos, 0), atol=1e-5)
    np.testing.assert_allclose(results["SPECS (released scale)"].values, (cos + 1) / 2, atol=1e-5)
    assert "released SPECS code" in scorer.info("SPECS (released scale)").description
    assert "paper's definition" in scorer.info("SPECS").description


def test_unknown_specs_scale_is_a_registry_error(monkeypatch, tmp_path, tiny_dir):
    from scoring.registry import RegistryError

    with pytest.raises(RegistryError, match="scale 'percent'"):
        _scorer_with(monkeypatch, tmp_path, '[profiles.tiny.metrics.SPECS]\nscale = "percent"\n')


def test_specs_values_on_both_scales_in_float64():
    """By hand: cosines 0.6, -0.8 and 1/3 (float32 inputs, summed in float64)."""
    from scoring.metrics.specs import specs_values

    third = np.float32(1 / 3) ** 0.5
    image = np.array([[1, 0], [0, 1], [third, third]], dtype=np.float32)
    text = np.array([[0.6, 0.8], [0, -0.8], [third, third]], dtype=np.float32)
    cos = np.sum(image.astype(np.float64) * text.astype(np.float64), axis=1)
    assert cos[:2] == pytest.approx([0.6, -0.8])
    paper = specs_values(image, text)  # the default scale is the paper's
    assert paper.dtype == np.float64
    assert cos[2] == pytest.approx(2 / 3, abs=1e-7)
    assert paper.tolist() == pytest.approx([0.6, 0.0, 2 / 3], abs=1e-7)  # by hand: max(cos, 0)
    assert specs_values(image, text, "released").tolist() == pytest.approx([0.8, 0.1, 5 / 6], abs=1e-7)  # (cos+1)/2
    np.testing.assert_array_equal(paper, np.clip(cos, 0, None))  # exactly: no float32 rounding
    np.testing.assert_array_equal(specs_values(image, text, "released"), np.clip((cos + 1) / 2, 0, None))
    with pytest.raises(ValueError, match=r"^SPECS scale must be one of paper, released, not 'log'$"):
        specs_values(image, text, "log")


def test_a_specs_entry_with_an_unknown_scale_is_refused_naming_the_scales():
    from scoring.metrics.specs import Specs
    from scoring.registry import RegistryError, load_registry

    spec = load_registry("tiny").metrics["SPECS"]
    bad = type(spec)(**{**spec.__dict__, "extra": {**spec.extra, "scale": "log"}})
    with pytest.raises(RegistryError, match=r"^metric 'SPECS': scale 'log'; expected one of paper, released$"):
        Specs(bad)
