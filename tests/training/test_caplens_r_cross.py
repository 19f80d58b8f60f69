"""CapLens-R in cross mode: what it saves is what the metric scores, and a run continued from
it starts from exactly that rating."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch


def test_saved_cross_encoder_scores_what_the_recipe_predicted_and_continues_from_it(tmp_path):
    from scoring.backbones import Placement
    from scoring.backbones.itm import ItmBackbone
    from scoring.registry import BackboneSpec
    from scoring.tiny import ensure_tiny_checkpoints
    from scoring.training import RECIPES, load_config, train
    from scoring.training.trainer import split_rows

    ensure_tiny_checkpoints()
    config = load_config("caplens-r-cross-tiny", out=str(tmp_path / "run"), options={"languages": ["en"]})
    result = train(config)
    folder = result.out_dir
    assert result.backbone_kind == "blip-itm"

    recipe = RECIPES["caplens-r"]
    continued = load_config("caplens-r-cross-tiny", out=str(tmp_path / "next"), base=str(folder),
                            options={"languages": ["en"]})
    state = recipe.setup(continued, torch.device("cpu"), tmp_path / "scratch")
    _, held, _, _ = split_rows(continued)
    captions = [c for group in held for c in group["captions"]][:12]
    state.trainable.eval()
    with torch.no_grad():
        predicted = recipe.predict(state, captions, torch.device("cpu"))

    spec = BackboneSpec(name="r", kind="blip-itm", label="r", path=folder)
    backbone = ItmBackbone.from_folder(spec, folder, Placement(torch.device("cpu"), torch.float32), lambda n: folder)
    scored, _ = backbone.match_probability([c["image"] for c in captions], [c["candidate"] for c in captions],
                                           [c["image"] for c in captions])
    assert np.allclose(predicted, scored, atol=1e-5)
    assert np.ptp(scored) > 0  # the captions get different ratings


def test_evaluation_reports_tau_c_within_each_caption_style(monkeypatch):
    """The all-caption tau_c can be high while one style is unordered: evaluate reports each
    style apart when rows name it (the world's rows do; a study's export may not)."""
    from scipy.stats import kendalltau

    from scoring.training import RECIPES

    recipe = RECIPES["caplens-r"]
    human = [0.9, 0.8, 0.7, 0.6, 0.5, 0.3, 0.2, 0.1]
    predicted = np.array([0.1, 0.2, 0.3, 0.4, 0.6, 0.5, 0.2, 0.1])  # long: reversed; short: mostly right
    styles = ["long"] * 4 + ["short"] * 4
    captions = [{"target": h, "language": "en", "style": s} for h, s in zip(human, styles)]
    monkeypatch.setattr(recipe, "predict", lambda state, rows, device: predicted)
    out = recipe.evaluate(None, captions, torch.device("cpu"))
    assert out["tau_c_long"] == pytest.approx(-1.0)
    assert out["tau_c_short"] == pytest.approx(kendalltau(predicted[4:], human[4:], variant="c").statistic)
    assert out["tau_c"] == pytest.approx(kendalltau(predicted, human, variant="c").statistic)


def test_weights_stored_in_half_precision_score_as_the_fp32_run_did(tmp_path):
    """`options.save_dtype = "float16"` halves a shipped checkpoint; the ITM loader casts it back
    to its placement dtype, so scores move by fp16 rounding only."""
    from safetensors import safe_open

    from scoring.backbones import Placement
    from scoring.backbones.itm import ItmBackbone
    from scoring.registry import BackboneSpec
    from scoring.tiny import ensure_tiny_checkpoints
    from scoring.training import load_config, train
    from scoring.training.trainer import store_weights_as

    ensure_tiny_checkpoints()
    folder = train(load_config("caplens-r-cross-tiny", out=str(tmp_path / "run"), options={"languages": ["en"]})).out_dir
    spec = BackboneSpec(name="r", kind="blip-itm", label="r", path=folder)
    placement = Placement(torch.device("cpu"), torch.float32)
    full = ItmBackbone.from_folder(spec, folder, placement, lambda n: folder)
    size = (folder / "model.safetensors").stat().st_size
    store_weights_as(folder, "float16")
    assert (folder / "model.safetensors").stat().st_size < 0.6 * size
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        assert {str(f.get_tensor(k).dtype) for k in f.keys() if f.get_tensor(k).is_floating_point()} == {"torch.float16"}
    half = ItmBackbone.from_folder(spec, folder, placement, lambda n: folder)
    assert next(half.model.parameters()).dtype == torch.float32
    from PIL import Image

    image = Image.new("RGB", (32, 32), (200, 30, 30))
    texts = ["a red circle", "a blue square on the left", "two shapes"]
    before, _ = full.match_probability([image] * 3, texts, ["k"] * 3)
    after, _ = half.match_probability([image] * 3, texts, ["k"] * 3)
    assert np.allclose(before, after, atol=5e-3) and not np.array_equal(before, after)
    with pytest.raises(ValueError, match="save_dtype"):
        store_weights_as(folder, "int8")


def test_rank_within_draws_each_rows_captions_from_one_language_and_style():
    """With options.rank_within = ["language", "style"] every drawn group is one (language,
    style) of the image, each group is drawn, and an unknown field is refused."""
    import random

    from scoring.training import RECIPES, load_config

    recipe = RECIPES["caplens-r"]
    captions = [{"language": lang, "style": style, "n": n}
                for lang in ("en", "ja") for style in ("short", "long") for n in range(3)]
    rng = random.Random(0)
    seen = set()
    for _ in range(40):
        group = recipe.rank_group(captions, ("language", "style"), rng)
        keys = {(c["language"], c["style"]) for c in group}
        assert len(keys) == 1 and len(group) == 3
        seen |= keys
    assert len(seen) == 4
    assert recipe.rank_group(captions, (), rng) is captions
    config = load_config("caplens-r-cross-tiny", options={"rank_within": ["style", "annotator"]})
    with pytest.raises(ValueError, match="annotator"):
        recipe.rank_within(config)


def test_a_head_reading_a_cross_encoder_scores_what_the_recipe_predicted(tmp_path, monkeypatch):
    """architecture.cross: the frozen-feature head also reads a cross-encoder's [CLS] states.
    The saved head names that encoder, registering the run brings it along as the metric's
    cross_backbone, and the Scorer gives exactly the recipe's predictions; with other [CLS]
    states (a planted swap of the encoder) the scores change."""
    from scoring.api import ScoreItem, Scorer
    from scoring.metrics.caplens_r import feature_size
    from scoring.tiny import ensure_tiny_checkpoints
    from scoring.training import RECIPES, load_config, train
    from scoring.training.trainer import split_rows
    from scoring.user_registry import register_run

    tiny = ensure_tiny_checkpoints()
    config = load_config("caplens-r-hybrid-tiny", out=str(tmp_path / "run"))
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))  # where the run registers
    result = train(config)
    about = json.loads((result.out_dir / "caplens_r.json").read_text(encoding="utf-8"))
    recipe = RECIPES["caplens-r"]
    state = recipe.setup(config, torch.device("cpu"), tmp_path / "scratch")
    cross_dim = state.cross.model.itm_head.in_features
    assert about["cross_model"] == str(tiny / "blip-itm")
    assert about["in_features"] == feature_size(state.vision.embedding_dim, cross_dim) == feature_size(state.vision.embedding_dim) + cross_dim
    from safetensors.torch import load_file

    state.head.load_state_dict(load_file(str(result.out_dir / "model.safetensors")))
    _, held, _, _ = split_rows(config)
    rows = held[:10]
    recipe.prepare(state, rows, torch.device("cpu"))
    with torch.no_grad():
        predicted = np.clip(recipe.predict(state, rows, torch.device("cpu")), 0.0, 1.0)
    # The head's last columns are each pair's own [CLS] state, the one the ITM pair head reads.
    from scoring.training.data import image_key

    keys = [image_key(r) for r in rows]
    own = np.concatenate([state.cross.cls_states([r["image"]], [r["candidate"]], [k]) for r, k in zip(rows, keys)])
    assert np.allclose(recipe.features(state, rows, torch.device("cpu")).numpy()[:, -cross_dim:], own, atol=1e-5)
    with torch.no_grad():
        read = torch.softmax(state.cross.model.itm_head(torch.from_numpy(own)), -1)[:, 1].numpy()
    matched, _ = state.cross.match_probability([r["image"] for r in rows], [r["candidate"] for r in rows], keys)
    assert np.allclose(read, matched, atol=1e-5)

    name = register_run(result.out_dir, profile="tiny", check=False)
    items = [ScoreItem(r["image"], r["candidate"], references=r["references"], lang=r["language"]) for r in rows]
    scored = np.array(Scorer("tiny", "cpu").score(items, [name])[name].values, dtype=float)
    assert np.allclose(scored, predicted, atol=1e-5) and np.ptp(scored) > 0

    registry = (tmp_path / "data" / "registry.toml").read_text(encoding="utf-8")
    assert "cross_backbone" in registry
    swapped = registry.replace(str(tiny / "blip-itm"), str(tiny / "umic-itm"))
    assert swapped != registry
    (tmp_path / "data" / "registry.toml").write_text(swapped, encoding="utf-8")
    other = np.array(Scorer("tiny", "cpu").score(items, [name])[name].values, dtype=float)
    assert not np.allclose(other, scored, atol=1e-4)
