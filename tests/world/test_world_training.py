"""A few seconds of world training on the one trainer lowers the losses and saves loadable models."""
import math
from pathlib import Path

import pytest
import torch

from scoring.world.train import train_clip, train_mcs


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    out = tmp_path_factory.mktemp("world-clip") / "clip"
    meta = train_clip(out, config="test-clip", scenes=32, steps=80, batch_size=32, lr=3e-3,
                      tokenizer_scenes=30, threads=1, log=None)
    return out, meta


def _mean(values):
    return sum(values) / len(values)


def test_contrastive_loss_goes_down(tiny_clip):
    _, meta = tiny_clip
    losses = [loss for _step, loss in meta["losses"]]
    assert _mean(losses[-5:]) < _mean(losses[:5]) - 0.4
    assert _mean(losses[-5:]) < math.log(32) - 0.3  # better than matching captions to images at random


def test_saved_clip_loads_with_transformers(tiny_clip):
    from transformers import CLIPModel, CLIPProcessor

    from scoring.world.render import render_scene
    from scoring.world.scene import generate_scene

    out, meta = tiny_clip
    model = CLIPModel.from_pretrained(out)
    processor = CLIPProcessor.from_pretrained(out)
    batch = processor(text=["a small red circle"], images=[render_scene(generate_scene(1), 64)],
                      return_tensors="pt", padding=True)
    with torch.no_grad():
        logits = model(**batch).logits_per_image
    assert logits.shape == (1, 1)
    assert meta["recipe"] == "world-clip" and meta["data"]["heldout_images"] >= 1


def test_distillation_loss_goes_down(tiny_clip, tmp_path):
    out, _ = tiny_clip
    meta = train_mcs(out, tmp_path / "mcs", config="test-mcs", scenes=40, steps=40, batch_size=32, lr=3e-3,
                     tokenizer_scenes=30, threads=1, log=None)
    losses = [loss for _step, loss in meta["losses"]]
    assert _mean(losses[-5:]) < _mean(losses[:5])
    assert meta["after"]["cos_to_teacher"] > meta["before"]["cos_to_teacher"]
    for name in ("modules.json", "config.json", "1_Pooling/config.json", "2_Dense/config.json",
                 "2_Dense/model.safetensors"):
        assert (tmp_path / "mcs" / name).is_file()


def test_the_world_clip_processor_is_the_pillow_one_the_loaders_read():
    """The default CLIPImageProcessor needs torchvision (not installed): transformers warned in
    the server log on every world-clip run, and the loaders read the Pillow backend anyway."""
    from transformers import AutoTokenizer
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    from scoring.world.train import CLIP_MEAN, clip_processor

    tokenizer = AutoTokenizer.from_pretrained(Path(__file__).parents[2] / "scoring/world/checkpoints/world-clip")
    processor = clip_processor(tokenizer, 96).image_processor
    assert isinstance(processor, CLIPImageProcessorPil)
    assert processor.crop_size == {"height": 96, "width": 96} and list(processor.image_mean) == CLIP_MEAN


def test_world_clip_swap_adds_each_captions_swapped_twin_to_the_image_to_text_softmax(tiny_clip):
    """`loss.swap` of world-CLIP: each caption with one word swapped by context, read with its own
    caption's prefix, joins the image → text softmax; the batch loss is InfoNCE plus `swap` times
    the hard-negative InfoNCE, by hand on the same draws."""
    import random

    from scoring.training import TrainConfig, losses
    from scoring.training.data import image_key
    from scoring.training.models import clip_text_features
    from scoring.training.recipes import CLIP_PREFIX, RECIPES

    out, _ = tiny_clip
    recipe = RECIPES["world-clip"]
    config = TrainConfig(recipe="world-clip", data={"world": {"scenes": 6, "image_size": 32}}, out=str(out.parent / "x"),
                         base=str(out), loss={"swap": 2.0}, device="cpu")
    rows, _, _ = recipe.world_rows({"scenes": 6, "image_size": 32})
    prepared = recipe.prepare_rows(rows, config)
    assert "swapped_caption" not in recipe.prepare_rows(rows, TrainConfig(recipe="world-clip", data={}, out="x"))[0]
    swapped = [r for r in prepared if r["swapped_caption"]]
    assert len(swapped) >= len(rows) / 2
    assert all(sum(a != b for a, b in zip(r["caption"].split(), r["swapped_caption"].split())) == 1 for r in swapped)
    cpu = torch.device("cpu")
    state = recipe.setup(config, cpu, out.parent / "scratch")
    state.trainable.eval()
    with torch.no_grad():
        loss, parts = recipe.batch_loss(state, prepared, random.Random(3), cpu)
        draws = random.Random(3)
        prefixes = [CLIP_PREFIX if draws.random() < 0.5 else "" for _ in prepared]
        image = recipe.images(state, prepared, cpu)
        text = clip_text_features(state.clip, [p + r["caption"] for p, r in zip(prefixes, prepared)], cpu)
        ids = [image_key(r) for r in prepared]
        keep = [i for i, r in enumerate(prepared) if r["swapped_caption"]]
        hard = losses.hard_negative_nce(
            image[keep], text[keep],
            clip_text_features(state.clip, [prefixes[i] + prepared[i]["swapped_caption"] for i in keep], cpu),
            state.clip.model.logit_scale.exp(), [ids[i] for i in keep])
        plain = losses.info_nce(image, text, state.clip.model.logit_scale.exp(), ids)
    assert float(hard) > 0.01 and parts["swap"] == pytest.approx(float(hard), rel=1e-5)
    assert float(loss) == pytest.approx(float(plain) + 2.0 * float(hard), rel=1e-5)


def test_world_clip_twins_join_the_batch_beside_their_rows(tiny_clip):
    """`data.world.twins`: each short caption's row carries its counterfactual twin (image, id,
    caption), long captions none, and the batch loss is InfoNCE over the rows and their twins
    together, by hand; without the option the rows are the ones world-CLIP always trained on."""
    import random

    from scoring.training import TrainConfig, losses
    from scoring.training.data import image_key
    from scoring.training.models import clip_text_features
    from scoring.training.recipes import CLIP_PREFIX, RECIPES
    from scoring.world.captions import describe_long, realise
    from scoring.world.sets import split_scenes
    from scoring.world.train import english_captions

    out, _ = tiny_clip
    recipe = RECIPES["world-clip"]
    plain_rows, plain_digest, _ = recipe.world_rows({"scenes": 8, "image_size": 32})
    rows, digest, meta = recipe.world_rows({"scenes": 8, "image_size": 32, "twins": True})
    assert digest != plain_digest
    expected, longs = [], set()
    for scene in split_scenes("train", 8):
        expected += english_captions(scene, long=False)
        if len(scene.objects) >= 3:
            longs.add(realise(describe_long(scene), "en").text)
            expected.append(realise(describe_long(scene), "en").text)
    assert [r["caption"] for r in plain_rows] == expected == [r["caption"] for r in rows]
    assert not any("twin_id" in r for r in plain_rows)
    twinned = [r for r in rows if "twin_id" in r]
    assert meta["twins"] == len(twinned) >= (len(rows) - len(longs)) * 0.8
    assert not any(r["caption"] in longs for r in twinned)
    assert all(r["twin_caption"] != r["caption"] and r["twin_id"].startswith(r["image_id"] + "~") for r in twinned)
    assert {r["twin_edit"] for r in twinned} == {"places", "shape"}
    places, _, _ = recipe.world_rows({"scenes": 8, "image_size": 32, "twins": True, "twin_places": 1.0,
                                      "twin_edits": ["places"]})
    kept = [r for r in places if "twin_id" in r]
    assert kept and {r["twin_edit"] for r in kept} == {"places"} and len(kept) < len(twinned)
    assert [r["caption"] for r in places] == expected

    config = TrainConfig(recipe="world-clip", data={"world": {"scenes": 8, "image_size": 32, "twins": True}},
                         out=str(out.parent / "t"), base=str(out), device="cpu")
    cpu = torch.device("cpu")
    state = recipe.setup(config, cpu, out.parent / "scratch-t")
    state.trainable.eval()
    batch = rows[:12]
    with torch.no_grad():
        loss, _ = recipe.batch_loss(state, batch, random.Random(5), cpu)
        draws = random.Random(5)
        prefixes = [CLIP_PREFIX if draws.random() < 0.5 else "" for _ in batch]
        pairs = [(p, r) for p, r in zip(prefixes, batch) if "twin_id" in r]
        image = recipe.images(state, batch + [{"image": r["twin_image"], "image_id": r["twin_id"]} for _, r in pairs], cpu)
        text = clip_text_features(state.clip, [p + r["caption"] for p, r in zip(prefixes, batch)]
                                  + [p + r["twin_caption"] for p, r in pairs], cpu)
        by_hand = losses.info_nce(image, text, state.clip.model.logit_scale.exp(),
                                  [image_key(r) for r in batch] + [r["twin_id"] for _, r in pairs])
        without = losses.info_nce(image[:len(batch)], text[:len(batch)], state.clip.model.logit_scale.exp(),
                                  [image_key(r) for r in batch])
    assert pairs and float(loss) == pytest.approx(float(by_hand), rel=1e-5)
    assert abs(float(by_hand) - float(without)) > 1e-3
    # `architecture.grid_positions`: the tower starts from the base plus the fixed 2-D grid
    from scoring.training.models import grid_position_table

    gridded = recipe.setup(TrainConfig(**(config.to_dict() | {"architecture": {"grid_positions": 0.5}})), cpu,
                           out.parent / "scratch-g")
    base, moved = (s.clip.model.vision_model.embeddings.position_embedding.weight.detach() for s in (state, gridded))
    assert torch.equal(moved[0], base[0])
    assert torch.allclose(moved[1:] - base[1:], 0.5 * grid_position_table(int((len(base) - 1) ** 0.5), base.shape[1]),
                          atol=1e-6)


def test_world_clip_regions_align_each_objects_cell_with_its_own_caption(tiny_clip):
    """`loss.regions`: every row carries each object's grid cell and caption; the batch loss adds
    `regions` times InfoNCE between each object's cell state (the mean of the patches whose centres
    lie in the cell, layer-normed and projected as the [CLS] state is) and its caption's
    embedding, over the batch's distinct images, by hand on a 4 x 4 patch grid."""
    import random

    from scoring.training import TrainConfig, losses
    from scoring.training.data import image_key
    from scoring.training.models import clip_text_features
    from scoring.training.recipes import RECIPES
    from scoring.world.sets import split_scenes

    out, _ = tiny_clip
    recipe = RECIPES["world-clip"]
    rows, _, _ = recipe.world_rows({"scenes": 8, "image_size": 32, "regions": True})
    scenes = {s.scene_id: s for s in split_scenes("train", 8)}
    for r in rows:
        scene = scenes[r["image_id"]]
        assert [cell for cell, _ in r["regions"]] == [o.cell[0] * 3 + o.cell[1] for o in scene.objects]
        assert [text for _, text in r["regions"]] == [f"a {o.size} {o.colour} {o.shape}" for o in scene.objects]
    assert "regions" not in recipe.world_rows({"scenes": 2, "image_size": 32})[0][0]

    config = TrainConfig(recipe="world-clip", data={"world": {"scenes": 8, "image_size": 32, "regions": True}},
                         out=str(out.parent / "r"), base=str(out), loss={"regions": 2.0}, device="cpu")
    cpu = torch.device("cpu")
    state = recipe.setup(config, cpu, out.parent / "scratch-r")
    state.trainable.eval()
    batch = rows[:10]
    model = state.clip.model
    with torch.no_grad():
        loss, parts = recipe.batch_loss(state, batch, random.Random(2), cpu)
        plain_state = recipe.setup(TrainConfig(recipe="world-clip", data={}, out="x", base=str(out), device="cpu"),
                                   cpu, out.parent / "scratch-p")
        plain_state.trainable.eval()
        plain, _ = recipe.batch_loss(plain_state, batch, random.Random(2), cpu)
        first = {}
        for r in batch:
            first.setdefault(image_key(r), r)
        pixels = state.pixels([r["image"] for r in first.values()], list(first), cpu)
        hidden = model.vision_model(pixel_values=pixels).last_hidden_state[:, 1:]  # 16 patches of 8 px
        states, texts = [], []
        for n, r in enumerate(first.values()):
            for cell, text in r["regions"]:
                inside = [i * 4 + j for i in range(4) for j in range(4)
                          if int((i * 8 + 4) // (32 / 3)) == cell // 3 and int((j * 8 + 4) // (32 / 3)) == cell % 3]
                states.append(hidden[n, inside].mean(0))
                texts.append(text)
        region = model.visual_projection(model.vision_model.post_layernorm(torch.stack(states)))
        by_hand = losses.info_nce(region, clip_text_features(state.clip, texts, cpu), model.logit_scale.exp(), texts)
    assert len(first) >= 2 and parts["regions"] == pytest.approx(float(by_hand), rel=1e-5)
    assert float(loss) == pytest.approx(float(plain) + 2.0 * float(by_hand), rel=1e-5)
