"""CapLens-R's value recomputed outside scoring/metrics/caplens_r.py: the towers' embeddings,
the 5 + 3D features written out from their definition (Polos-style: image-candidate cosine,
max / mean cosine to the references, image to the mean reference, a has-references flag, then
|c - r|, c * r and i * c), and the head's two layers with exact GELU in numpy, clipped to [0, 1]."""
import json
import math

import numpy as np
import pytest
from safetensors.numpy import save_file

from scoring.api import ScoreItem, Scorer
from scoring.tiny import ensure_tiny_checkpoints
from scoring.world.render import render_scene
from scoring.world.scene import generate_scenes

HIDDEN = 6


def _write_head(folder, in_features, out_bias, seed, about=None):
    rng = np.random.default_rng(seed)
    weights = {
        "net.0.weight": rng.normal(0, 2 / math.sqrt(in_features), (HIDDEN, in_features)).astype(np.float32),
        "net.0.bias": rng.normal(0, 0.5, HIDDEN).astype(np.float32),
        "net.2.weight": rng.normal(0, 0.5, (1, HIDDEN)).astype(np.float32),
        "net.2.bias": np.array([out_bias], dtype=np.float32),
    }
    folder.mkdir()
    (folder / "caplens_r.json").write_text(json.dumps({"mode": "frozen", "in_features": in_features,
                                                       "hidden": HIDDEN} | (about or {})))
    save_file(weights, str(folder / "model.safetensors"))
    return weights


def _use_registry(tmp_path, monkeypatch, toml: str) -> None:
    """Score with the shipped profile plus the rows of `toml` (CAPLENS_REGISTRY_CONFIG)."""
    registry = tmp_path / "registry.toml"
    registry.write_text(toml)
    monkeypatch.setenv("CAPLENS_REGISTRY_CONFIG", str(registry))


def _expected(weights, image, candidate, references, extra=()):
    """One item's rating from unit embeddings, by the definition (not by caplens_r.features),
    with `extra` features (a cross-encoder's [CLS] state) after them."""
    dim = len(candidate)
    if len(references):
        cosines = [float(np.dot(r, candidate)) for r in references]
        mean = np.sum(references, axis=0) / len(references)
        mean = mean / np.linalg.norm(mean)
        scalars = [float(np.dot(image, candidate)), max(cosines), sum(cosines) / len(cosines),
                   float(np.dot(image, mean)), 1.0]
    else:
        mean = np.zeros(dim)
        scalars = [float(np.dot(image, candidate)), 0.0, 0.0, 0.0, 0.0]
    x = np.concatenate([scalars, np.abs(candidate - mean), candidate * mean, image * candidate, extra])
    hidden = weights["net.0.weight"].astype(np.float64) @ x + weights["net.0.bias"]
    hidden = np.array([0.5 * h * (1 + math.erf(h / math.sqrt(2))) for h in hidden])
    out = float(weights["net.2.weight"][0].astype(np.float64) @ hidden + weights["net.2.bias"][0])
    return min(max(out, 0.0), 1.0)


@pytest.fixture()
def setup(tmp_path, monkeypatch):
    ensure_tiny_checkpoints()
    text = Scorer("tiny", "cpu").backbone("mclip-text")
    dim = text.text_embeddings(["a cat"])[0].shape[1]
    heads = {"CapLens-R": _write_head(tmp_path / "head", 5 + 3 * dim, 0.4, seed=1),
             "CapLens-R high": _write_head(tmp_path / "high", 5 + 3 * dim, 40.0, seed=2),
             "CapLens-R low": _write_head(tmp_path / "low", 5 + 3 * dim, -40.0, seed=3)}
    _use_registry(tmp_path, monkeypatch, "".join(
        f'[backbones.{folder}]\nkind = "caplens-r"\npath = "{tmp_path / folder}"\n'
        f'[metrics."{name}"]\nfamily = "caplens-r"\nbackbone = "{folder}"\nvision_backbone = "clip"\n'
        'text_backbone = "mclip-text"\n'
        for name, folder in (("CapLens-R", "head"), ("CapLens-R high", "high"), ("CapLens-R low", "low"))))
    return Scorer("tiny", "cpu"), heads


def test_caplens_r_equals_its_definition_with_and_without_references(setup):
    scorer, heads = setup
    images = [render_scene(s, size=32) for s in generate_scenes(0, 3)]
    items = [
        ScoreItem(images[0], "a red circle left of a blue square", references=["a red circle", "two shapes on grey"]),
        ScoreItem(None, "no image here", references=["a red circle"]),  # not scored: needs an image
        ScoreItem(images[1], "a green triangle", references=[]),
        ScoreItem(images[2], "a small blue square", references=["a blue square", "one square", "a square, small"]),
        ScoreItem(images[0], "two shapes", references=["one"]),
    ]
    result = scorer.score(items, ["CapLens-R", "CapLens-R high", "CapLens-R low"])
    vision, text = scorer.backbone("clip"), scorer.backbone("mclip-text")
    got = result["CapLens-R"].values
    assert got[1] is None
    for k in (0, 2, 3, 4):
        item = items[k]
        image = vision.image_embeddings([item.image], [f"image-{k}"])[0].astype(np.float64)
        candidate = text.text_embeddings([item.candidate])[0][0].astype(np.float64)
        references = (text.text_embeddings(list(item.references))[0].astype(np.float64)
                      if item.references else np.zeros((0, len(candidate))))
        want = _expected(heads["CapLens-R"], image, candidate, references)
        assert 0.0 < want < 1.0  # the head was drawn so that no value of these items is clipped
        assert got[k] == pytest.approx(want, abs=2e-5), k
        assert result["CapLens-R high"].values[k] == 1.0  # a head far above 1 is clipped to 1
        assert result["CapLens-R low"].values[k] == 0.0  # and one far below 0 to 0
    assert len({round(v, 6) for v in got if v is not None}) == 4  # four different items, four values
    assert result["CapLens-R high"].values[1] is None
    assert result["CapLens-R"].truncated == [False] * 5  # the frozen path flags no truncation
    alone = scorer.score([items[2]], ["CapLens-R"])["CapLens-R"].values  # a batch without any reference
    assert alone[0] == pytest.approx(got[2], abs=1e-6)


def test_a_head_that_reads_other_features_than_its_towers_give_is_unavailable(tmp_path, monkeypatch):
    ensure_tiny_checkpoints()
    _write_head(tmp_path / "head", 11, 0.4, seed=1)
    _use_registry(tmp_path, monkeypatch, (
        f'[backbones.head]\nkind = "caplens-r"\npath = "{tmp_path / "head"}"\n'
        '[metrics."CapLens-R"]\nfamily = "caplens-r"\nbackbone = "head"\nvision_backbone = "clip"\n'
        'text_backbone = "mclip-text"\n'))
    image = render_scene(generate_scenes(0, 1)[0], size=32)
    result = Scorer("tiny", "cpu").score([ScoreItem(image, "a red circle")], ["CapLens-R", "CLIP-S"])
    assert "the head reads 11 features but its backbones give" in result["CapLens-R"].unavailable
    assert result["CLIP-S"].unavailable is None and result["CLIP-S"].values[0] is not None


def test_a_saved_head_lands_in_a_new_nested_folder_and_predicts_what_it_predicted(tmp_path):
    """save_head creates the folders a recipe's `out` names and records the head's shape beside
    what it was told; loading the folder back predicts the same ratings."""
    import torch

    from scoring.metrics.caplens_r import CaplensRHead, RegressionHead, save_head

    torch.manual_seed(0)
    head = RegressionHead(13, 4)
    out = tmp_path / "runs" / "study α" / "head"  # neither parent exists yet
    save_head(head, {"collection": "Étude", "text_backbone": "mclip-text"}, out)
    about = json.loads((out / "caplens_r.json").read_text(encoding="utf-8"))
    assert about == {"collection": "Étude", "text_backbone": "mclip-text", "in_features": 13, "hidden": 4}

    from scoring.registry import BackboneSpec

    loaded = CaplensRHead.from_folder(BackboneSpec("head", "caplens-r", "head", path=out), out, None, lambda name: out)
    x = np.random.default_rng(3).normal(size=(5, 13))  # float64, as with a fluency model's features
    with torch.inference_mode():
        want = head(torch.from_numpy(x.astype(np.float32))).double().numpy()
    assert loaded.predict(x) == pytest.approx(want, abs=1e-6)
    assert loaded.about["collection"] == "Étude" and loaded.fluency is None


def test_fluency_apart_adds_a_branch_so_grammar_moves_every_caption_by_the_same_amount(tmp_path):
    """With `apart`, the last features go through their own branch, added to the rest's output
    (a hand computation of both branches); so swapping one caption's fluency features for
    another's changes the rating by the same amount whatever the rest of the features say.
    Saved and loaded back, the head keeps the branch and predicts the same ratings."""
    import torch

    from scoring.metrics.caplens_r import CaplensRHead, RegressionHead, save_head
    from scoring.registry import BackboneSpec

    torch.manual_seed(1)
    head = RegressionHead(13, 4, apart=5)
    assert head.in_features == 13 and head.net[0].in_features == 8 and head.apart_net[0].in_features == 5
    x = torch.randn(6, 13)
    with torch.no_grad():
        w1, b1, w2, b2 = head.net[0].weight, head.net[0].bias, head.net[2].weight, head.net[2].bias
        v1, c1, v2, c2 = (head.apart_net[0].weight, head.apart_net[0].bias,
                          head.apart_net[2].weight, head.apart_net[2].bias)
        gelu = torch.nn.functional.gelu
        by_hand = (gelu(x[:, :8] @ w1.T + b1) @ w2.T + b2 + gelu(x[:, 8:] @ v1.T + c1) @ v2.T + c2).squeeze(-1)
        assert torch.allclose(head(x), by_hand, atol=1e-6)
        fluent, damaged = x.clone(), x.clone()
        damaged[:, 8:] = x[0, 8:] + 2.0  # every caption given the same worse fluency features
        fluent[:, 8:] = x[0, 8:]
        change = head(damaged) - head(fluent)
        assert torch.allclose(change, change[0].expand_as(change), atol=1e-6) and change.abs().min() > 0
        joint = RegressionHead(13, 4)  # one network over all features: the change depends on the rest
        joint_change = joint(damaged) - joint(fluent)
        assert not torch.allclose(joint_change, joint_change[0].expand_as(joint_change), atol=1e-4)
    out = tmp_path / "head"
    save_head(head, {"text_backbone": "mclip-text"}, out)
    about = json.loads((out / "caplens_r.json").read_text(encoding="utf-8"))
    assert about["in_features"] == 13 and about["hidden"] == 4 and about["apart"] == 5
    loaded = CaplensRHead.from_folder(BackboneSpec("head", "caplens-r", "head", path=out), out, None, lambda name: out)
    with torch.inference_mode():
        assert loaded.predict(x.numpy()) == pytest.approx(head(x).double().numpy(), abs=1e-6)


def test_towers_of_different_widths_are_named_with_both_widths(tmp_path, monkeypatch):
    """A 64-dim tiny text encoder beside the 128-dim world-CLIP vision tower: CapLens-R cannot
    compare them and says which is which; the other metrics still score."""
    from pathlib import Path

    import scoring

    ensure_tiny_checkpoints()
    _write_head(tmp_path / "head", 5 + 3 * 64, 0.4, seed=1)
    world_clip = Path(scoring.__file__).parent / "world" / "checkpoints" / "world-clip"
    _use_registry(tmp_path, monkeypatch, (
        f'[backbones.head]\nkind = "caplens-r"\npath = "{tmp_path / "head"}"\n'
        f'[backbones.world-clip]\nkind = "clip"\nlabel = "world-CLIP"\npath = "{world_clip}"\n'
        '[metrics."CapLens-R"]\nfamily = "caplens-r"\nbackbone = "head"\n'
        'vision_backbone = "world-clip"\ntext_backbone = "mclip-text"\n'))
    image = render_scene(generate_scenes(0, 1)[0], size=32)
    result = Scorer("tiny", "cpu").score([ScoreItem(image, "a red circle", ["a circle"])], ["CapLens-R", "CLIP-S"])
    assert result["CapLens-R"].unavailable == "text encoder outputs 64 dims but the vision tower 128"
    assert result["CLIP-S"].unavailable is None and result["CLIP-S"].values[0] is not None


def test_an_end_to_end_cross_encoder_row_scores_its_pair_heads_match_probability(tmp_path, monkeypatch):
    """The recipe's cross mode registers a BLIP ITM folder as CapLens-R with variant "cross": its
    value is the pair head's softmax[:, 1] for each (image, caption), computed here from the raw
    transformers model; an item without an image gets none, an over-long caption is flagged."""
    import torch
    from transformers import BlipForImageTextRetrieval, BlipProcessor

    folder = ensure_tiny_checkpoints() / "blip-itm"
    _use_registry(tmp_path, monkeypatch, (
        f'[backbones.rated-itm]\nkind = "blip-itm"\npath = "{folder}"\n'
        '[metrics."CapLens-R cross"]\nfamily = "caplens-r"\nbackbone = "rated-itm"\nvariant = "cross"\n'))
    scorer = Scorer("tiny", "cpu")
    images = [render_scene(s, size=32) for s in generate_scenes(5, 2)]
    long_caption = " ".join(["a red circle left of a blue square"] * 80)
    items = [ScoreItem(images[0], "a red circle"), ScoreItem(None, "no image"),
             ScoreItem(images[1], "two shapes on grey"), ScoreItem(images[0], long_caption)]
    result = scorer.score(items, ["CapLens-R cross"])["CapLens-R cross"]
    assert result.unavailable is None and result.values[1] is None

    model, processor = BlipForImageTextRetrieval.from_pretrained(folder).eval(), BlipProcessor.from_pretrained(folder)
    limit = scorer.backbone("rated-itm").max_tokens
    with torch.no_grad():
        batch = processor(images=[images[0], images[1], images[0]],
                          text=["a red circle", "two shapes on grey", long_caption], padding=True, truncation=True, max_length=limit, return_tensors="pt")
        want = model(**batch, use_itm_head=True).itm_score.softmax(-1)[:, 1].double().numpy()
    got = [result.values[k] for k in (0, 2, 3)]
    assert got == pytest.approx(list(want), abs=1e-5)
    assert len({round(v, 6) for v in got}) == 3
    assert result.truncated == [False, False, False, True]


def test_caplens_r_requests_only_the_towers_its_row_names_and_only_rows_with_an_image():
    """The Scorer encodes what metrics request before any runs: CapLens-R asks for its images and
    for its candidates then references (in one text batch), of the items with an image only; a row
    that names only one tower, or none (the head's caplens_r.json names them), or an end-to-end
    cross-encoder, asks for nothing ahead."""
    import dataclasses

    from scoring.metrics.base import EmbeddingRequest, ScoreContext
    from scoring.metrics.caplens_r import CaplensR
    from scoring.registry import load_registry

    spec = next(s for s in load_registry("world").metrics.values() if s.family == "caplens-r" and s.variant != "cross")
    text, vision = spec.extra["text_backbone"], spec.vision_backbone
    image = render_scene(generate_scenes(0, 1)[0], size=16)
    items = [ScoreItem(image, "a red circle", ["a circle", "red"]), ScoreItem(None, "no image", ["left out"]),
             ScoreItem(image, "two shapes", [])]
    context = ScoreContext(items, ["k0", None, "k2"], backbone=None)
    assert CaplensR(spec).embedding_requests(context) == [
        EmbeddingRequest(vision, "image", ("k0", "k2")),
        EmbeddingRequest(text, "text", ("a red circle", "two shapes", "a circle", "red"))]
    only_vision = dataclasses.replace(spec, extra={k: v for k, v in spec.extra.items() if k != "text_backbone"})
    for row in (only_vision, dataclasses.replace(spec, vision_backbone=None),
                dataclasses.replace(only_vision, vision_backbone=None), dataclasses.replace(spec, variant="cross")):
        assert CaplensR(row).embedding_requests(context) == [], row


def test_a_head_finds_the_towers_its_json_names_when_its_row_names_none(tmp_path, monkeypatch):
    """A registry row may name only the head: the text, vision and cross-encoder towers then come
    from its caplens_r.json, and the value is the definition's with the cross-encoder's [CLS]
    state appended. A head that needs a tower nobody names is unavailable, saying which."""
    ensure_tiny_checkpoints()
    scorer = Scorer("tiny", "cpu")
    text, vision, cross = scorer.backbone("mclip-text"), scorer.backbone("clip"), scorer.backbone("blip-itm")
    dim = text.text_embeddings(["a cat"])[0].shape[1]
    image = render_scene(generate_scenes(7, 1)[0], size=32)
    item = ScoreItem(image, "a green triangle above a circle", references=["a triangle", "two shapes"])
    cls = cross.cls_states([image], [item.candidate], ["k"])[0].astype(np.float64)
    towers = {"text_backbone": "mclip-text", "vision_backbone": "clip"}
    heads = {"reads all": towers | {"cross_model": "rated-itm", "cross_backbone": "blip-itm"},
             "no cross tower": towers | {"cross_model": "rated-itm"}, "no text tower": {"vision_backbone": "clip"}}
    weights = {name: _write_head(tmp_path / f"h{k}", 5 + 3 * dim + len(cls), 0.4, seed=10 + k, about=about)
               for k, (name, about) in enumerate(heads.items())}
    _use_registry(tmp_path, monkeypatch, "".join(
        f'[backbones.h{k}]\nkind = "caplens-r"\npath = "{tmp_path / f"h{k}"}"\n'
        f'[metrics."{name}"]\nfamily = "caplens-r"\nbackbone = "h{k}"\n' for k, name in enumerate(heads)))
    result = Scorer("tiny", "cpu").score([item], list(heads))
    candidate = text.text_embeddings([item.candidate])[0][0].astype(np.float64)
    references = text.text_embeddings(list(item.references))[0].astype(np.float64)
    want = _expected(weights["reads all"], vision.image_embeddings([image], ["k"])[0].astype(np.float64),
                     candidate, references, cls)
    assert 0.0 < want < 1.0 and result["reads all"].values[0] == pytest.approx(want, abs=2e-5)
    assert result["no cross tower"].unavailable == ("the head reads the cross-encoder rated-itm, but the CapLens-R "
                                                    "entry names no cross_backbone")
    assert result["no text tower"].unavailable == "the CapLens-R entry names no text_backbone / vision_backbone"
