"""CapLens-R in cross mode: what it saves is what the metric scores, and a run continued from
it starts from exactly that rating."""
from __future__ import annotations

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
