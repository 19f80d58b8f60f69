"""The trainer on tiny models: it learns, resumes to identical weights, splits by image, and
what it saves loads and scores through the registry."""
import json
import os
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from scoring.training import Cancelled, load_config, train
from scoring.training.data import image_key, split_by_image, world_set
from scoring.training.trainer import split_rows


def _config(preset, out, **overrides):
    return load_config(preset, out=str(out), **overrides)


def _weights(folder):
    from safetensors.torch import load_file

    return {k: v for p in sorted(folder.rglob("*.safetensors")) for k, v in load_file(str(p)).items()}


def test_split_by_image_shares_no_image():
    rows, _, _ = world_set("prmcs", {"scenes": 12, "size": 32, "languages": ["en", "de"]})
    train_rows, held = split_by_image(rows, 0.3, seed=0)
    assert train_rows and held and len(train_rows) + len(held) == len(rows)
    assert not {image_key(r) for r in train_rows} & {image_key(r) for r in held}
    # many rows per image: a split by caption would have put some image on both sides
    assert len(held) > len({image_key(r) for r in held})


@pytest.mark.parametrize("preset, settings", [
    ("pr-mcs-tiny", {}),
    # the teacher's image embeddings: computed once before training, not cached batch by batch
    ("umic-tiny", {"teacher": "${CAPLENS_TINY_DIR}/clip", "loss": {"teacher_rank": 1.0}, "batch_size": 4}),
])
def test_interrupted_run_resumes_to_identical_weights(tmp_path, preset, settings):
    whole = train(_config(preset, tmp_path / "whole", **settings))
    cancel = threading.Event()

    def stop_after_three(fraction, message):
        if "step 3/6" in message:
            cancel.set()

    with pytest.raises(Cancelled):
        train(_config(preset, tmp_path / "cut", **settings), progress=stop_after_three, cancel=cancel)
    assert not (tmp_path / "cut" / "training.json").exists()
    resumed = train(_config(preset, tmp_path / "cut", **settings), resume=True)
    assert resumed.losses == whole.losses
    a, b = _weights(whole.out_dir), _weights(resumed.out_dir)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    record = json.loads((resumed.out_dir / "training.json").read_text())
    assert record["data"]["heldout_images"] >= 1 and record["before"] and record["after"]
    assert record["config"]["recipe"] == preset.removesuffix("-tiny") and len(record["data"]["hash"]) == 64


def test_prmcs_anchor_keeps_the_originals_near_the_base_encoder_and_resumes(tmp_path):
    """With `loss.anchor`, the originals' embeddings stay near the base encoder's (computed once,
    before any step, also when a run resumes), while the perturbed captions are pushed away."""
    from scoring.training.models import load_trainable, st_text_features

    push = {"lambda2": 1.0, "lambda3": 1.0}
    free = train(_config("pr-mcs-tiny", tmp_path / "free", loss=push, optimizer={"name": "adamw", "lr": 3e-3}))
    anchored_config = _config("pr-mcs-tiny", tmp_path / "anchored", loss={**push, "anchor": 20.0},
                              optimizer={"name": "adamw", "lr": 3e-3})
    anchored = train(anchored_config)
    rows, _, _ = world_set("prmcs", {"scenes": 12, "size": 32, "languages": ["en", "de"]})
    texts = sorted({r["original"] for r in rows})[:40]
    cpu = torch.device("cpu")

    def embed(folder):
        with torch.no_grad():
            return st_text_features(load_trainable(str(folder), cpu, ("st-text",)), texts, cpu).float()

    base = embed(anchored_config.base)
    drift = {name: float((1 - torch.nn.functional.cosine_similarity(embed(run.out_dir), base)).mean())
             for name, run in (("free", free), ("anchored", anchored))}
    assert drift["anchored"] < 0.5 * drift["free"], drift
    cancel = threading.Event()

    def stop_after_three(fraction, message):
        if "step 3/6" in message:
            cancel.set()

    cut = _config("pr-mcs-tiny", tmp_path / "cut", loss={**push, "anchor": 20.0}, optimizer={"name": "adamw", "lr": 3e-3})
    with pytest.raises(Cancelled):
        train(cut, progress=stop_after_three, cancel=cancel)
    resumed = train(cut, resume=True)
    assert resumed.losses == anchored.losses


def test_prmcs_anchor_on_with_error_is_the_mean_of_one_drift_term_per_field(tmp_path):
    """`options.anchor_on = ["original", "with_error"]`: the anchor term is loss.anchor times the
    mean of the two fields' drifts 1 - cos(T(x), T0(x)), by hand, each over the rows that have the
    field; a field no row has is refused before training."""
    import random as _random

    from scoring.training.models import st_text_features
    from scoring.training.recipes import RECIPES

    recipe = RECIPES["pr-mcs"]
    rows, _, _ = world_set("prmcs", {"scenes": 8, "size": 32, "languages": ["en", "de"]})
    rows = rows[:24]
    assert all(r["with_error"] not in ("", r["original"]) for r in rows)
    rows[3] = {**rows[3], "with_error": ""}  # a row without one: left out of that field's mean
    cpu = torch.device("cpu")
    config = _config("pr-mcs-tiny", tmp_path / "p", loss={"anchor": 4.0}, options={"anchor_on": ["original", "with_error"]})
    state = recipe.setup(config, cpu, tmp_path / "scratch")
    recipe.prepare(state, rows, cpu)  # the base encoder's embeddings, before any change
    base = lambda texts: st_text_features(state.encoder, texts, cpu).float()  # noqa: E731
    with torch.no_grad():
        originals, erred = [r["original"] for r in rows], [r["with_error"] for r in rows if r["with_error"]]
        before = {"original": base(originals), "with_error": base(erred)}
        for p in state.trainable.parameters():
            p.add_(0.05 * torch.randn_like(p))  # a student that has moved from its base
        drifts = {f: float((1 - torch.nn.functional.cosine_similarity(base(texts), before[f])).mean())
                  for f, texts in (("original", originals), ("with_error", erred))}
        loss, parts = recipe.batch_loss(state, rows, _random.Random(0), cpu)
        plain = _config("pr-mcs-tiny", tmp_path / "q", loss={"anchor": 0.0})
        without, _ = recipe.batch_loss(SimpleNamespace(**{**vars(state), "config": plain,
                                                          "weights": recipe.weights(plain)}), rows, _random.Random(0), cpu)
    assert abs(drifts["original"] - drifts["with_error"]) > 1e-4  # a mean that drops one field fails
    assert parts["anchor"] == pytest.approx(drifts["original"], rel=1e-4)
    assert parts["anchor_with_error"] == pytest.approx(drifts["with_error"], rel=1e-4)
    assert float(loss) == pytest.approx(float(without) + 4.0 * (drifts["original"] + drifts["with_error"]) / 2, rel=1e-5)
    state.config = _config("pr-mcs-tiny", tmp_path / "r", loss={"anchor": 4.0}, options={"anchor_on": ["original", "nope"]})
    with pytest.raises(ValueError, match="`nope`, which no training row has"):
        recipe.prepare(state, rows, cpu)


def test_prmcs_embeds_each_image_once_not_per_step(tmp_path, monkeypatch):
    """The vision tower is frozen: PR-MCS embeds every distinct image once before training,
    so six steps of batch 8 and two evaluations cost one vision pass per image."""
    from scoring.training import recipes

    embedded = []
    real = recipes.clip_image_features

    def counting(backbone, pixels):
        embedded.append(len(pixels))
        return real(backbone, pixels)

    monkeypatch.setattr(recipes, "clip_image_features", counting)
    train(_config("pr-mcs-tiny", tmp_path / "once"))
    rows, _, _ = world_set("prmcs", {"scenes": 12, "size": 32, "languages": ["en", "de"]})
    assert sum(embedded) == len({image_key(r) for r in rows}) == 12


def test_a_few_steps_lower_the_teacher_loss(tmp_path):
    result = train(_config("mcs-teacher-tiny", tmp_path / "mcs", max_steps=8))
    assert result.after["mse"] < result.before["mse"] - 0.05
    assert result.after["cos_to_teacher"] > result.before["cos_to_teacher"]


def _override_registry(tmp_path, monkeypatch, text: str):
    path = tmp_path / "registry.toml"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setenv("CAPLENS_REGISTRY_CONFIG", str(path))


def test_umic_checkpoint_scores_through_the_registry_as_sigmoid_of_one_logit(tmp_path, monkeypatch):
    from scoring.api import ScoreItem, Scorer
    from scoring.training.models import PixelCache, itm_cls, load_trainable

    result = train(_config("umic-tiny", tmp_path / "umic"))
    assert result.metric == "UMIC" and result.backbone_kind == "blip-itm"
    _override_registry(tmp_path, monkeypatch, f'[backbones.umic-itm]\npath = "{result.out_dir}"\n')
    rows, _, _ = world_set("umic", {"scenes": 12, "size": 32, "languages": ["en", "de"]})
    row = rows[0]
    scored = Scorer("tiny", "cpu").score([ScoreItem(row["image"], row["positive"])], ["UMIC"])["UMIC"].values[0]
    # the same number by hand: sigmoid(w·[CLS] + b) with the head's second row (the first is zero)
    itm = load_trainable(str(result.out_dir), torch.device("cpu"), ("blip-itm",))
    head = itm.model.itm_head
    assert torch.count_nonzero(head.weight[0]) == 0 and head.bias[0] == 0
    with torch.no_grad():
        pixels = PixelCache(itm.image_processor)([row["image"]], ["x"], torch.device("cpu"))
        logit = head(itm_cls(itm, pixels, [row["positive"]], torch.device("cpu")))[0, 1]
    assert scored == pytest.approx(torch.sigmoid(logit).item(), abs=1e-5)


def test_prmcs_and_caplens_r_checkpoints_score_through_the_registry(tmp_path, monkeypatch):
    from scoring.api import ScoreItem, Scorer
    from scoring.tiny import ensure_tiny_checkpoints

    prmcs = train(_config("pr-mcs-tiny", tmp_path / "prmcs"))
    head = train(_config("caplens-r-tiny", tmp_path / "head"))
    assert head.warnings and "ratings" in head.warnings[0]  # 12 scenes are far too few ratings
    tiny = ensure_tiny_checkpoints()
    _override_registry(tmp_path, monkeypatch, (
        f'[backbones.prmcs-text]\npath = "{prmcs.out_dir}"\n'
        f'[backbones.caplens-r-head]\nkind = "caplens-r"\npath = "{head.out_dir}"\n'
        '[metrics."CapLens-R"]\nfamily = "caplens-r"\nbackbone = "caplens-r-head"\nvision_backbone = "clip"\n'
        'text_backbone = "mclip-text"\n'))
    rows, _, _ = world_set("ratings", {"scenes": 12, "size": 32, "languages": ["en", "de"]})
    items = [ScoreItem(r["image"], r["text"], references=r["references"], lang=r["lang"]) for r in rows[:6]]
    before = Scorer("tiny", "cpu").score(items, ["PR-MCS"])["PR-MCS"].values
    results = Scorer("tiny", "cpu").score(items, ["PR-MCS", "CapLens-R"])
    assert all(v is not None and 0.0 <= v <= 1.0 for v in results["CapLens-R"].values)
    monkeypatch.delenv("CAPLENS_REGISTRY_CONFIG")
    untrained = Scorer("tiny", "cpu").score(items, ["PR-MCS"])["PR-MCS"].values
    assert before == results["PR-MCS"].values and before != untrained  # the trained encoder, not the tiny one
    assert (tiny / "prmcs-text").is_dir()


def test_a_separate_heldout_set_is_evaluated_and_all_of_data_trains(tmp_path):
    spec = {"scenes": 2, "split": "heldout", "size": 32, "languages": ["en"]}
    result = train(_config("caplens-r-tiny", tmp_path / "run", heldout={"world": spec}, max_steps=2))
    record = json.loads((result.out_dir / "training.json").read_text(encoding="utf-8"))
    # all 12 training scenes train (no 30 % split of them); the 2 held-out scenes are evaluated
    assert record["data"]["heldout_images"] == 2
    rows = world_set("ratings", {"scenes": 12, "split": "train", "size": 32, "languages": ["en", "de"]})[0]
    assert record["data"]["train_rows"] == len({r["caption_id"] for r in rows})  # one row per rated caption
    with pytest.raises(ValueError, match="both in `data` and in `heldout`"):
        train(_config("caplens-r-tiny", tmp_path / "again", heldout={"world": spec | {"split": "train"}}))


def test_a_continued_run_records_the_runs_it_continues(tmp_path):
    """A checkpoint trained from another CapLens checkpoint says how it got there: each earlier
    run's steps, wall time and data, oldest first, so its total training cost is on record."""
    from scoring.training.trainer import lineage

    first = train(_config("mcs-teacher-tiny", tmp_path / "a", max_steps=2))
    second = train(_config("mcs-teacher-tiny", tmp_path / "b", max_steps=3, base=str(first.out_dir)))
    third = train(_config("mcs-teacher-tiny", tmp_path / "c", max_steps=1, base=str(second.out_dir)))
    record = json.loads((third.out_dir / "training.json").read_text())
    assert [(r["folder"], r["steps"]) for r in record["lineage"]] == [(str(first.out_dir), 2), (str(second.out_dir), 3)]
    assert record["lineage"][1]["base"] == str(first.out_dir)
    assert record["lineage"][0]["wall_s"] == json.loads((first.out_dir / "training.json").read_text())["wall_s"]
    for entry, run in zip(record["lineage"], (first, second), strict=True):  # each field from that run's record
        kept = json.loads((run.out_dir / "training.json").read_text())
        assert entry == {
            "folder": str(run.out_dir), "recipe": "mcs-teacher", "base": kept["config"]["base"],
            "data": {k: kept["data"][k] for k in ("source", "hash", "rows")},
            "lr": kept["config"]["optimizer"]["lr"], "steps": len(kept["losses"]), "wall_s": kept["wall_s"],
            "device": "cpu", "git_commit": kept["git_commit"], "finished_at": kept["finished_at"]}
        assert entry["data"]["rows"] > 0 and entry["data"]["hash"] and entry["lr"] > 0
    assert lineage(str(third.out_dir)) == record["lineage"] + [lineage(str(third.out_dir))[-1]]
    # A record written before lineage was kept is followed through its own `base`: the second
    # run's record without its lineage still leads back to the first run.
    older = json.loads((second.out_dir / "training.json").read_text())
    del older["lineage"]
    (second.out_dir / "training.json").write_text(json.dumps(older))
    first_base = json.loads((first.out_dir / "training.json").read_text())["config"]["base"]
    assert [(r["folder"], r["steps"], r["base"]) for r in lineage(str(second.out_dir))] == [
        (str(first.out_dir), 2, first_base), (str(second.out_dir), 3, str(first.out_dir))]
    assert [r["steps"] for r in lineage(str(third.out_dir))] == [2, 3, 1]  # its own record keeps its lineage
    assert first_base and lineage(first_base) == []  # the tiny base was not trained by CapLens
    # The lineage a record keeps outlives the folders it names.
    import shutil

    shutil.rmtree(first.out_dir)
    assert [r["steps"] for r in lineage(str(third.out_dir))] == [2, 3, 1]
    assert lineage("world:clip") == [] and lineage(None) == []


def test_caplens_r_features_are_kept_on_disk_and_recomputed_when_an_image_changes(tmp_path, monkeypatch):
    """A second head on the same set reads the prepared features instead of running the towers,
    gets exactly the same weights, and an image replaced in place is embedded again."""
    import scoring.metrics.caplens_r as caplens_r
    from scoring.training.recipes import CaplensRRecipe

    monkeypatch.setattr(CaplensRRecipe, "FEATURE_CHUNK", 32)  # several chunks from the tiny set
    cache = tmp_path / "features"
    first = train(_config("caplens-r-tiny", tmp_path / "a", max_steps=3, options={"feature_cache": str(cache)}))
    chunks = sorted(cache.glob("*.npy"))
    assert len(chunks) > 3 and not list(cache.glob(".*tmp*"))
    computed = []
    real = caplens_r.embed_items
    monkeypatch.setattr(caplens_r, "embed_items", lambda *a, **k: computed.append(len(a[4])) or real(*a, **k))
    second = train(_config("caplens-r-tiny", tmp_path / "b", max_steps=3, options={"feature_cache": str(cache)}))
    assert computed == []  # every chunk came from disk
    a, b = _weights(first.out_dir), _weights(second.out_dir)
    assert all(torch.equal(a[k], b[k]) for k in a)

    rows, _, _ = world_set("ratings", {"scenes": 12, "size": 32, "languages": ["en", "de"]})
    image = Path(rows[0]["image"])
    os.utime(image, ns=(image.stat().st_atime_ns, image.stat().st_mtime_ns + 1_000_000))
    train(_config("caplens-r-tiny", tmp_path / "c", max_steps=1, options={"feature_cache": str(cache)}))
    assert 0 < sum(computed) < sum(len(np.load(c)) for c in chunks)  # only the chunks holding that image's captions
    uncached = []
    monkeypatch.setattr(caplens_r, "embed_items", lambda *a, **k: uncached.append(1) or real(*a, **k))
    train(_config("caplens-r-tiny", tmp_path / "d", max_steps=1, options={"feature_cache": False}))
    assert uncached


def test_prmcs_trains_on_the_chosen_operations_and_evaluates_all_five(tmp_path):
    config = _config("pr-mcs-tiny", tmp_path / "ops", options={"train_operations": ["jumble", "masking"]})
    train_rows, held, _, _ = split_rows(config)
    everything, all_held, _, _ = split_rows(_config("pr-mcs-tiny", tmp_path / "all"))
    assert {r["operation"] for r in train_rows} == {"jumble", "masking"}
    assert train_rows == [r for r in everything if r["operation"] in ("jumble", "masking")]
    assert held == all_held and {r["operation"] for r in held} == {"repetition", "removal", "masking", "jumble",
                                                                   "substitution"}
    for wrong in (["shuffle"], []):
        with pytest.raises(ValueError, match="options.train_operations must name some of repetition"):
            split_rows(_config("pr-mcs-tiny", tmp_path / "bad", options={"train_operations": wrong}))


def test_trainable_backbones_load_in_fp32_even_where_cuda_scores_in_half_precision(monkeypatch):
    """Scoring runs an ITM in fp16 on CUDA (`placement_for`); an optimizer stepping fp16 weights
    overflowed on an H100 (a cross-mode CapLens-R run was NaN before step 400), so
    `load_trainable` asks for fp32 whatever the device."""
    import scoring.backbones as backbones
    from scoring.backbones import Placement, placement_for
    from scoring.training.models import load_trainable, resolve_model

    asked = []
    monkeypatch.setattr(backbones, "load_backbone", lambda spec, placement, resolve: asked.append((spec, placement)) or "ok")
    assert load_trainable("world:blip-itm", torch.device("cpu"), ("blip-itm",)) == "ok"
    cuda = Placement(torch.device("cuda"), torch.float32)
    assert placement_for(resolve_model("world:blip-itm")[1], cuda).dtype == torch.float16  # how it scores there
    assert placement_for(asked[0][0], cuda).dtype == torch.float32  # how it trains there
    assert asked[0][1].dtype == torch.float32


def test_weights_stored_in_half_precision_keep_integer_tensors_and_the_pt_format_tag(tmp_path):
    """`options.save_dtype`: floating-point tensors become float16, integer ones (position ids)
    stay as they are, and the file keeps the {"format": "pt"} metadata that older transformers
    versions require before they load a safetensors file."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    from scoring.training.trainer import store_weights_as

    weights = {"w": torch.tensor([[0.1, -2.5]], dtype=torch.float32), "ids": torch.arange(4, dtype=torch.int64)}
    save_file(weights, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    (tmp_path / ".resume").mkdir()  # the run's scratch (sorted first): left as it is, and the rest still done
    save_file(weights, str(tmp_path / ".resume" / "model.safetensors"))
    (tmp_path / "2_Dense").mkdir()  # a sentence-transformers layer in a sub-folder
    save_file(weights, str(tmp_path / "2_Dense" / "model.safetensors"))
    store_weights_as(tmp_path, "float16")
    loaded = load_file(str(tmp_path / "model.safetensors"))
    assert loaded["w"].dtype == torch.float16 and torch.equal(loaded["w"], weights["w"].half())
    assert load_file(str(tmp_path / "2_Dense" / "model.safetensors"))["w"].dtype == torch.float16
    assert load_file(str(tmp_path / ".resume" / "model.safetensors"))["w"].dtype == torch.float32
    assert loaded["ids"].dtype == torch.int64 and torch.equal(loaded["ids"], weights["ids"])
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as stored:
        assert stored.metadata() == {"format": "pt"}
    with pytest.raises(ValueError) as error:
        store_weights_as(tmp_path, "int8")
    assert str(error.value) == "options.save_dtype must be one of float16, bfloat16, not 'int8'"


def test_a_snapshot_written_on_cuda_resumes_on_the_cpu_without_touching_cuda(monkeypatch):
    """Its CUDA generator state is kept for a CUDA resume and ignored on the CPU."""
    from scoring.training import trainer

    state = trainer._rng_state(torch.device("cpu"))
    state["cuda"] = torch.zeros(16, dtype=torch.uint8)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda *a: pytest.fail("set a CUDA generator on the CPU"))
    expected = torch.rand(3)
    trainer._restore_rng(state, torch.device("cpu"))
    assert torch.equal(torch.rand(3), expected)


def test_rng_states_loaded_onto_another_device_still_restore(monkeypatch):
    """A snapshot is loaded with map_location = the run's device; the generators take CPU
    states only. "meta" stands in for CUDA here; the CUDA state goes to torch.cuda as a CPU one."""
    import io

    from scoring.training import trainer

    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device="cuda": torch.full((4,), 7, dtype=torch.uint8))
    calls = []
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device="cuda": calls.append(state))
    buffer = io.BytesIO()
    torch.save({"rng": trainer._rng_state(torch.device("cuda", 0))}, buffer)
    buffer.seek(0)
    state = torch.load(buffer, map_location="meta", weights_only=False)["rng"]
    expected = torch.rand(3)
    trainer._restore_rng(state, torch.device("cuda", 0))
    assert torch.equal(torch.rand(3), expected)
    assert [(c.device.type, c.tolist()) for c in calls] == [("cpu", [7] * 4)]


def test_a_cuda_resume_sets_the_cuda_generator_it_saved_and_only_where_it_saved_one(monkeypatch):
    """On CUDA the snapshot's CUDA generator state is put back on that device; a snapshot
    written on the CPU (no CUDA state) resumes on CUDA with the CPU generators only."""
    from scoring.training import trainer

    calls = []
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device="cuda": calls.append((state, device)))
    read_from = []
    monkeypatch.setattr(torch.cuda, "get_rng_state",
                        lambda device="cuda": read_from.append(device) or torch.full((4,), 7, dtype=torch.uint8))
    cuda = torch.device("cuda", 0)
    state = trainer._rng_state(cuda)
    assert (state["cuda"] == 7).all() and len(state["cuda"]) == 4 and read_from == [cuda]
    expected = torch.rand(3)
    trainer._restore_rng(state, cuda)
    assert torch.equal(torch.rand(3), expected)
    ((restored, device),) = calls
    assert torch.equal(restored, torch.full((4,), 7, dtype=torch.uint8)) and restored.device.type == "cpu"
    assert device == cuda
    calls.clear()
    trainer._restore_rng(trainer._rng_state(torch.device("cpu")), cuda)
    assert calls == []


def test_specs_contrastive_term_pairs_the_image_with_the_fields_contrastive_on_names(tmp_path):
    """`options.contrastive_on`: the contrastive term is the mean of one symmetric InfoNCE per
    named field (the default c_j + d+, the paper's full caption, the world's short caption)."""
    import random as _random

    from scoring.training import losses
    from scoring.training.recipes import RECIPES

    recipe = RECIPES["specs"]
    rows, _, _ = world_set("specs", {"scenes": 8, "size": 32, "languages": ["en"]})
    rows = list({image_key(r): r for r in rows}.values())  # one triplet of each image
    assert len(rows) >= 4
    assert all(r["caption"].startswith(r["positive"]) and r["short_caption"] not in (r["caption"], "") for r in rows)
    cpu = torch.device("cpu")

    def contrastive(fields):
        config = _config("specs-tiny", tmp_path / "s", loss={"alpha": 1.0, "beta": 0.0, "gamma": 0.0},
                         options={"contrastive_on": fields})
        state = recipe.setup(config, cpu, tmp_path / "scratch")
        state.trainable.eval()
        with torch.no_grad():
            loss, parts = recipe.batch_loss(state, rows, _random.Random(0), cpu)
            by_hand = {f: float(losses.info_nce(recipe.images(state, rows, cpu),
                                                recipe.texts(state, [r[f] for r in rows], cpu),
                                                recipe.scale(state), [image_key(r) for r in rows]))
                       for f in ("positive", "caption", "short_caption")}
        return float(loss), by_hand

    default, by_hand = contrastive(["positive"])
    both, _ = contrastive(["positive", "short_caption"])
    paper, _ = contrastive(["caption"])
    assert default == pytest.approx(by_hand["positive"], rel=1e-5)
    assert paper == pytest.approx(by_hand["caption"], rel=1e-5)
    assert both == pytest.approx((by_hand["positive"] + by_hand["short_caption"]) / 2, rel=1e-5)
    # the tiny tower's few text positions cut c_j + d+ and its full caption alike; the short caption differs
    assert abs(by_hand["short_caption"] - by_hand["positive"]) > 1e-3
    with pytest.raises(ValueError, match="rows without short_caption"):
        recipe.batch_loss(recipe.setup(_config("specs-tiny", tmp_path / "s", options={"contrastive_on": ["short_caption"]}),
                                       cpu, tmp_path / "scratch"),
                          [{k: v for k, v in r.items() if k != "short_caption"} for r in rows], _random.Random(0), cpu)


def _anchor_cosines(state, clip, rows, field):
    """By hand: the image x `field`-caption cosine matrix of `rows` under `clip` (a recipe's anchor),
    its images through `clip`'s own processor."""
    from scoring.training.models import PixelCache, clip_image_features, clip_text_features

    cpu = torch.device("cpu")
    pixels = PixelCache(clip.image_processor)([r["image"] for r in rows], [image_key(r) for r in rows], cpu)
    image = clip_image_features(clip, pixels)
    text = clip_text_features(clip, [state.prefix + r[field] for r in rows], cpu)
    return torch.nn.functional.normalize(image, dim=-1) @ torch.nn.functional.normalize(text, dim=-1).T


@pytest.mark.parametrize("name", ["specs", "pac-s"])
def test_teacher_terms_embed_the_teachers_images_through_the_teachers_own_processor(name, monkeypatch):
    """A student built at 96 px and a 224 px teacher: the teacher's image embeddings (SPECS's and
    PAC-S's anchor, PAC-S's style gap) must come from the teacher's pixels, not the student's."""
    from types import SimpleNamespace

    from scoring.training import models, recipes
    from scoring.training.models import PixelCache

    def processor(size):
        return lambda images, return_tensors: {"pixel_values": torch.zeros(len(images), 3, size, size)}

    fed = []
    monkeypatch.setattr(models, "load_image", lambda image: image)
    monkeypatch.setattr(recipes, "clip_image_features", lambda clip, pixels: fed.append((clip.name, pixels.shape[-1]))
                        or torch.zeros(len(pixels), 4))
    monkeypatch.setattr(recipes, "clip_text_features", lambda clip, texts, device: torch.zeros(len(texts), 4))
    student, teacher = (SimpleNamespace(name=n, image_processor=processor(size)) for n, size in (("student", 96),
                                                                                                   ("teacher", 224)))
    state = SimpleNamespace(clip=student, teacher=teacher, pixels=PixelCache(student.image_processor), prefix="",
                            weights={"anchor": 1.0, "style_gap": 1.0}, config=SimpleNamespace(options={}))
    rows = [{"image": f"{i}.png", "caption": "c", "short_caption": "s", "long_caption": "l"} for i in range(3)]
    recipes.RECIPES[name].prepare(state, rows, torch.device("cpu"))
    assert fed == [("teacher", 224)] and len(state.teacher_images) == 3


def test_specs_anchor_is_the_squared_gap_between_its_and_the_teachers_short_caption_cosine_matrices(tmp_path):
    """`loss.anchor` (with `teacher`): mean over the batch's image x short-caption cosine matrix of
    (SPECS − teacher)²; zero while SPECS is still its teacher, by hand against a changed teacher."""
    import random as _random

    from scoring.training.recipes import RECIPES

    recipe = RECIPES["specs"]
    rows, _, _ = world_set("specs", {"scenes": 8, "size": 32, "languages": ["en"]})
    rows = list({image_key(r): r for r in rows}.values())
    cpu = torch.device("cpu")
    tiny_clip = "${CAPLENS_TINY_DIR}/clip"

    def state_for(weights, teacher=tiny_clip):
        config = _config("specs-tiny", tmp_path / "s", teacher=teacher, loss=weights)
        state = recipe.setup(config, cpu, tmp_path / "scratch")
        state.trainable.eval()
        return state

    plain, anchored = state_for({}), state_for({"anchor": 3.0})
    with torch.no_grad():
        recipe.prepare(anchored, rows, cpu)  # the teacher's embeddings, once before training
        loss, _ = recipe.batch_loss(plain, rows, _random.Random(0), cpu)
        same, parts = recipe.batch_loss(anchored, rows, _random.Random(0), cpu)
        assert parts["anchor"] == pytest.approx(0.0, abs=1e-10) and float(same) == pytest.approx(float(loss), rel=1e-6)
        teacher = anchored.teacher.model
        for p in [*teacher.text_projection.parameters(), *teacher.visual_projection.parameters()]:
            p.add_(0.05 * torch.randn_like(p))  # a teacher that differs from the student in both towers
        recipe.prepare(anchored, rows, cpu)
        moved, parts = recipe.batch_loss(anchored, rows, _random.Random(0), cpu)

        student, teacher = (_anchor_cosines(anchored, clip, rows, "short_caption")
                            for clip in (anchored.clip, anchored.teacher))
        by_hand = float(((student - teacher) ** 2).mean())
    assert student.shape == (len(rows), len(rows)) and by_hand > 1e-6
    assert parts["anchor"] == pytest.approx(by_hand, rel=1e-5)
    assert float(moved) == pytest.approx(float(loss) + 3.0 * by_hand, rel=1e-5)
    with pytest.raises(ValueError, match="set `teacher`"):
        state_for({"anchor": 1.0}, teacher=None)


def test_specs_anchor_on_several_fields_is_the_mean_of_one_anchor_per_field(tmp_path):
    """`options.anchor_on = ["short_caption", "short_with_error"]`: the anchor term is the mean of
    the by-hand squared gaps on each field's cosine matrix; a field the rows lack is refused."""
    import random as _random

    from scoring.training.recipes import RECIPES

    recipe = RECIPES["specs"]
    rows, _, _ = world_set("specs", {"scenes": 8, "size": 32, "languages": ["en"]})
    rows = list({image_key(r): r for r in rows}.values())
    assert all(r["short_with_error"] not in ("", r["short_caption"]) for r in rows)
    cpu = torch.device("cpu")
    fields = ["short_caption", "short_with_error"]
    config = _config("specs-tiny", tmp_path / "s", teacher="${CAPLENS_TINY_DIR}/clip", loss={"anchor": 2.0},
                     options={"languages": ["en"], "anchor_on": fields})
    state = recipe.setup(config, cpu, tmp_path / "scratch")
    state.trainable.eval()
    with torch.no_grad():
        for p in [*state.teacher.model.text_projection.parameters(), *state.teacher.model.visual_projection.parameters()]:
            p.add_(0.05 * torch.randn_like(p))
        recipe.prepare(state, rows, cpu)
        _, parts = recipe.batch_loss(state, rows, _random.Random(0), cpu)
        gaps = [float(((_anchor_cosines(state, state.clip, rows, f) - _anchor_cosines(state, state.teacher, rows, f))
                       ** 2).mean()) for f in fields]
    assert abs(gaps[0] - gaps[1]) > 1e-7  # the two fields' terms differ, so a mean that drops one fails
    assert parts["anchor"] == pytest.approx(sum(gaps) / 2, rel=1e-5)
    with pytest.raises(ValueError, match="rows without short_with_error"):
        recipe.batch_loss(state, [{k: v for k, v in r.items() if k != "short_with_error"} for r in rows],
                          _random.Random(0), cpu)


def test_the_teacher_reads_captions_with_its_own_prefix(tmp_path):
    """`options.teacher_prefix`: a SPECS (no prefix) anchored to a PAC-S-like teacher holds the
    cosines that teacher's metric gives, with "A photo depicts " before each caption."""
    from scoring.training.models import clip_text_features
    from scoring.training.recipes import RECIPES

    recipe = RECIPES["specs"]
    rows, _, _ = world_set("specs", {"scenes": 4, "size": 32, "languages": ["en"]})
    cpu = torch.device("cpu")
    config = _config("specs-tiny", tmp_path / "s", teacher="${CAPLENS_TINY_DIR}/clip", loss={"anchor": 1.0},
                     options={"languages": ["en"], "teacher_prefix": "A photo depicts "})
    state = recipe.setup(config, cpu, tmp_path / "scratch")
    recipe.prepare(state, rows, cpu)
    text = rows[0]["short_caption"]
    with torch.no_grad():
        prefixed, bare = clip_text_features(state.teacher, ["A photo depicts " + text, text], cpu).float()
    assert state.prefix == "" and not torch.allclose(prefixed, bare)
    assert torch.allclose(state.teacher_texts[text], prefixed, atol=1e-6)


def test_pacs_anchor_holds_the_long_captions_of_the_rows_that_have_one(tmp_path):
    """PAC-S's `loss.anchor`: the squared gap between its and the teacher's image x long-caption
    cosine matrices, over only the rows whose scene has a long caption; without any, an error."""
    import random as _random

    from scoring.training.recipes import RECIPES

    recipe = RECIPES["pac-s"]
    rows, _, _ = world_set("pacs", {"scenes": 10, "size": 32, "languages": ["en"]})
    with_long = [r for r in rows if r["long_caption"]]
    assert 2 <= len(with_long) < len(rows)  # the world's sparse scenes have no long caption
    cpu = torch.device("cpu")

    def state_for(weights):
        state = recipe.setup(_config("pac-s-tiny", tmp_path / "p", teacher="${CAPLENS_TINY_DIR}/clip", loss=weights),
                             cpu, tmp_path / "scratch")
        state.trainable.eval()
        return state

    plain, anchored = state_for({}), state_for({"anchor": 2.0})
    assert plain.teacher is None
    with torch.no_grad():
        recipe.prepare(anchored, rows, cpu)
        loss, _ = recipe.batch_loss(plain, rows, _random.Random(0), cpu)
        same, parts = recipe.batch_loss(anchored, rows, _random.Random(0), cpu)
        assert parts["anchor"] == pytest.approx(0.0, abs=1e-10) and float(same) == pytest.approx(float(loss), rel=1e-6)
        for p in [*anchored.teacher.model.text_projection.parameters(), *anchored.teacher.model.visual_projection.parameters()]:
            p.add_(0.05 * torch.randn_like(p))
        recipe.prepare(anchored, rows, cpu)
        moved, parts = recipe.batch_loss(anchored, rows, _random.Random(0), cpu)

        by_hand = float(((_anchor_cosines(anchored, anchored.clip, with_long, "long_caption")
                          - _anchor_cosines(anchored, anchored.teacher, with_long, "long_caption")) ** 2).mean())
    assert by_hand > 1e-6 and parts["anchor"] == pytest.approx(by_hand, rel=1e-5)
    assert float(moved) == pytest.approx(float(loss) + 2.0 * by_hand, rel=1e-5)
    with pytest.raises(ValueError, match="no row has one"):
        recipe.prepare(anchored, [{**r, "long_caption": ""} for r in rows], cpu)


def _with_and_without(recipe, config, preset, rows, tmp_path):
    """The recipe's state for `config`, its batch loss on `rows` and that of `preset` without the
    config's loss weights (both in eval mode, one draw)."""
    import random as _random

    cpu = torch.device("cpu")
    state = recipe.setup(config, cpu, tmp_path / "scratch")
    plain = recipe.setup(_config(preset, tmp_path / "plain"), cpu, tmp_path / "scratch-plain")
    for s in (state, plain):
        s.trainable.eval()
    with torch.no_grad():
        return (state, recipe.batch_loss(state, rows, _random.Random(0), cpu),
                recipe.batch_loss(plain, rows, _random.Random(0), cpu))


def test_pacs_swap_adds_one_keyword_swapped_caption_per_row_to_the_image_to_text_softmax(tmp_path):
    """PAC-S's `loss.swap`: `prepare_rows` gives each row its caption with exactly one word swapped
    for a word of the rows' captions (seeded); the batch loss adds `swap` times the hard-negative
    InfoNCE of the row's image, caption and swapped caption, by hand; without the weight, no field."""
    from scoring.training.losses import hard_negative_nce
    from scoring.training.models import PixelCache, clip_image_features, clip_text_features
    from scoring.training.recipes import RECIPES

    recipe = RECIPES["pac-s"]
    rows, _, _ = world_set("pacs", {"scenes": 10, "size": 32, "languages": ["en"]})
    cpu = torch.device("cpu")
    config = _config("pac-s-tiny", tmp_path / "p", loss={"swap": 0.5}, options={"swap_by": "part_of_speech"})
    assert "swapped_caption" not in recipe.prepare_rows(rows, _config("pac-s-tiny", tmp_path / "q"))[0]
    prepared = recipe.prepare_rows(rows, config)
    assert prepared == recipe.prepare_rows(rows, config)  # seeded
    by_context = recipe.prepare_rows(rows, _config("pac-s-tiny", tmp_path / "p", loss={"swap": 0.5}))
    words = {w for r in rows for w in r["caption"].split()}
    for r, c in zip(prepared, by_context):
        for swapped in filter(None, (r["swapped_caption"], c["swapped_caption"])):
            before, after = r["caption"].split(), swapped.split()
            changed = [(a, b) for a, b in zip(before, after) if a != b]
            assert len(before) == len(after) and len(changed) == 1 and changed[0][1] in words
        assert r["swapped_caption"]
    # 10 scenes give few words for a slot: some captions keep theirs ("") by context, none by part of speech
    assert 0 < sum(c["swapped_caption"] == "" for c in by_context) < len(rows) / 2
    state, (loss, parts), (base, base_parts) = _with_and_without(recipe, config, "pac-s-tiny", prepared, tmp_path)
    with torch.no_grad():
        pixels = PixelCache(state.clip.image_processor)([r["image"] for r in prepared],
                                                        [image_key(r) for r in prepared], cpu)
        by_hand = hard_negative_nce(clip_image_features(state.clip, pixels),
                                    clip_text_features(state.clip, [r["caption"] for r in prepared], cpu),
                                    clip_text_features(state.clip, [r["swapped_caption"] for r in prepared], cpu),
                                    state.clip.model.logit_scale.exp(), [image_key(r) for r in prepared]).item()
    assert "swap" not in base_parts and parts["swap"] == pytest.approx(by_hand, rel=1e-5)
    assert float(loss) == pytest.approx(float(base) + 0.5 * by_hand, rel=1e-5)


def test_specs_swap_holds_each_true_detail_above_the_same_detail_with_one_word_swapped(tmp_path):
    """SPECS's `loss.swap`: `prepare_rows` gives each triplet c_j + d+ with one word of d+ swapped
    for a word seen between the same neighbours (a colour for a colour, a side for a side; seeded);
    the batch loss adds `swap` times the SPECS hinge of θ(c_j + d+) over θ(swapped), by hand."""
    from scoring.training import losses
    from scoring.training.recipes import RECIPES, _cos

    recipe = RECIPES["specs"]
    rows, _, _ = world_set("specs", {"scenes": 8, "size": 32, "languages": ["en"]})
    # one triplet per image, c_j cut to its last unit: the tiny tower reads only a caption's first tokens
    rows = [r | {"base": r["base"][cut], "positive": r["positive"][cut], "negative": r["negative"][cut]}
            for r in {image_key(r): r for r in rows if r["j"] > 1}.values() for cut in [slice(len(r["base"].rsplit(".", 1)[0]) + 1, None)]]
    assert len(rows) >= 4
    cpu = torch.device("cpu")
    config = _config("specs-tiny", tmp_path / "s", loss={"swap": 3.0})
    assert "swapped" not in recipe.prepare_rows(rows, _config("specs-tiny", tmp_path / "q"))[0]
    prepared = recipe.prepare_rows(rows, config)
    assert prepared == recipe.prepare_rows(rows, config)  # seeded
    colours = {"black", "blue", "brown", "green", "purple", "red", "white", "yellow"}
    sizes, sides = {"small", "large"}, {"top", "bottom", "left", "right", "centre"}
    kinds = set()
    for r in prepared:
        assert r["swapped"].startswith(r["base"])  # only d+ changes
        before, after = r["positive"].split(), r["swapped"].split()
        changed = [(a, b) for a, b in zip(before, after) if a != b]
        assert len(before) == len(after) and len(changed) == 1, (r["positive"], r["swapped"])
        (a, b), = changed
        kind = next(name for name, words in (("colour", colours), ("size", sizes), ("side", sides), ("shape", None))
                    if words is None or a.strip(".") in words)
        assert kind == "shape" or b.strip(".") in {"colour": colours, "size": sizes, "side": sides}[kind], (a, b)
        kinds.add(kind)
    assert len(kinds) >= 2
    state, (loss, parts), (base, base_parts) = _with_and_without(recipe, config, "specs-tiny", prepared, tmp_path)
    with torch.no_grad():
        image = recipe.images(state, prepared, cpu)
        theta_true = _cos(image, recipe.texts(state, [r["positive"] for r in prepared], cpu))
        theta_swapped = _cos(image, recipe.texts(state, [r["swapped"] for r in prepared], cpu))
        gap = theta_true - theta_swapped
        by_hand = float((gap.mean().clamp(0, 1) - gap).clamp(min=0).mean())
    assert by_hand > 1e-4
    assert float(losses.specs_hinge(theta_true, theta_swapped)) == pytest.approx(by_hand, rel=1e-6)
    assert "swap" not in base_parts and parts["swap"] == pytest.approx(by_hand, rel=1e-5)
    assert float(loss) == pytest.approx(float(base) + 3.0 * by_hand, rel=1e-5)
    # A positive that does not extend its base has no swapped detail; an unknown way to swap is refused.
    odd = recipe.prepare_rows([rows[0] | {"positive": "something else"}], config)
    assert odd[0]["swapped"] == ""
    with pytest.raises(ValueError, match="options.swap_by is 'nearby'; expected one of context, part_of_speech"):
        recipe.prepare_rows(rows, _config("specs-tiny", tmp_path / "t", loss={"swap": 1.0}, options={"swap_by": "nearby"}))


def test_pacs_style_gap_holds_each_images_long_minus_short_similarity(tmp_path):
    """PAC-S's `loss.style_gap`: mean over the rows with a long caption of ((long − short) −
    (teacher's long − teacher's short))², each a row's image with its own caption; zero while
    PAC-S is its teacher, by hand against a changed teacher, and blind to a shift of both styles."""
    import random as _random

    from scoring.training import losses
    from scoring.training.recipes import RECIPES

    by_formula = losses.style_gap(torch.tensor([0.5, 0.2]), torch.tensor([0.1, 0.3]),
                                  torch.tensor([0.4, 0.2]), torch.tensor([0.2, 0.2]))
    assert float(by_formula) == pytest.approx(((0.4 - 0.2) ** 2 + (-0.1 - 0.0) ** 2) / 2)
    shifted = losses.style_gap(torch.tensor([0.9, 0.6]), torch.tensor([0.5, 0.7]),  # both styles +0.4
                               torch.tensor([0.4, 0.2]), torch.tensor([0.2, 0.2]))
    assert float(shifted) == pytest.approx(float(by_formula))

    recipe = RECIPES["pac-s"]
    rows, _, _ = world_set("pacs", {"scenes": 10, "size": 32, "languages": ["en"]})
    with_long = [r for r in rows if r["long_caption"]]
    cpu = torch.device("cpu")
    state = recipe.setup(_config("pac-s-tiny", tmp_path / "p", teacher="${CAPLENS_TINY_DIR}/clip",
                                 loss={"style_gap": 3.0}), cpu, tmp_path / "scratch")
    state.trainable.eval()
    plain = recipe.setup(_config("pac-s-tiny", tmp_path / "q"), cpu, tmp_path / "scratch")
    plain.trainable.eval()
    with torch.no_grad():
        recipe.prepare(state, rows, cpu)
        loss, _ = recipe.batch_loss(plain, rows, _random.Random(0), cpu)
        same, parts = recipe.batch_loss(state, rows, _random.Random(0), cpu)
        assert set(parts) >= {"style_gap"} and "anchor" not in parts
        assert parts["style_gap"] == pytest.approx(0.0, abs=1e-10) and float(same) == pytest.approx(float(loss), rel=1e-6)
        for p in [*state.teacher.model.text_projection.parameters(), *state.teacher.model.visual_projection.parameters()]:
            p.add_(0.05 * torch.randn_like(p))
        recipe.prepare(state, rows, cpu)
        moved, parts = recipe.batch_loss(state, rows, _random.Random(0), cpu)

        def gaps(clip):
            return (torch.diagonal(_anchor_cosines(state, clip, with_long, "long_caption"))
                    - torch.diagonal(_anchor_cosines(state, clip, with_long, "caption")))

        by_hand = float(((gaps(state.clip) - gaps(state.teacher)) ** 2).mean())
    assert by_hand > 1e-6 and parts["style_gap"] == pytest.approx(by_hand, rel=1e-5)
    assert float(moved) == pytest.approx(float(loss) + 3.0 * by_hand, rel=1e-5)


def test_umic_detail_term_ranks_each_long_reference_above_its_scenes_short_one(tmp_path):
    """`loss.detail` (0 by default): the UMIC ranking loss of each long positive against its scene's
    short caption, by hand from the model's own scores; evaluate reports it apart from the paper's kinds."""
    import random as _random

    from scoring.training import losses
    from scoring.training.recipes import RECIPES

    recipe = RECIPES["umic"]
    rows, _, _ = world_set("umic", {"scenes": 12, "size": 32, "languages": ["en"]})
    long_rows = [r for r in rows if r["style"] == "long"]
    assert long_rows and all(r["short_caption"] and r["short_caption"] != r["positive"] for r in long_rows)
    assert all(r["short_caption"] == r["positive"] for r in rows if r["style"] == "short")
    batch = long_rows[:3] + [r for r in rows if r["style"] == "short"][:3]
    cpu = torch.device("cpu")

    def state_for(weights):
        state = recipe.setup(_config("umic-tiny", tmp_path / "u", loss=weights), cpu, tmp_path / "scratch")
        state.trainable.eval()
        return state

    plain, detailed = state_for({}), state_for({"detail": 2.5})
    with torch.no_grad():
        loss, parts = recipe.batch_loss(plain, batch, _random.Random(0), cpu)
        with_detail, parts_detail = recipe.batch_loss(detailed, batch, _random.Random(0), cpu)
        pixels = recipe.pixels(detailed, batch[:3], cpu)
        long_scores = recipe.match(detailed, pixels, [r["positive"] for r in batch[:3]], cpu)
        short_scores = recipe.match(detailed, pixels, [r["short_caption"] for r in batch[:3]], cpu)
        by_hand = float((losses.UMIC_MARGIN - (long_scores - short_scores)).clamp(min=0).mean())
        evaluated = recipe.evaluate(detailed, batch, cpu)
    assert parts == {} and parts_detail["detail"] == pytest.approx(by_hand, rel=1e-5)
    assert float(with_detail) == pytest.approx(float(loss) + 2.5 * by_hand, rel=1e-5)
    expected = np.mean([1.0 if a > b else 0.5 if a == b else 0.0 for a, b in zip(long_scores.tolist(), short_scores.tolist())])
    assert evaluated["pairwise_detail"] == pytest.approx(expected)
    assert "pairwise_detail" not in {k for k in recipe.evaluate(detailed, batch[3:], cpu)}


def test_umic_margin_by_kind_sets_each_negatives_margin_by_its_kind(tmp_path):
    """`options.margin_by_kind` (unset by default): each negative held below its positive by its
    kind's margin, the others by `loss.margin`; a kind that does not exist is refused."""
    import random as _random

    from scoring.training.recipes import RECIPES

    recipe = RECIPES["umic"]
    rows, _, _ = world_set("umic", {"scenes": 6, "size": 32, "languages": ["en"]})
    batch = rows[:4]
    assert all(r["negative_kinds"][2:] == ["repeat-remove", "permutation"] for r in batch)
    cpu = torch.device("cpu")
    by_kind = {"repeat-remove": 0.03, "permutation": 0.6}
    state = recipe.setup(_config("umic-tiny", tmp_path / "u", options={"margin_by_kind": by_kind}),
                         cpu, tmp_path / "scratch")
    state.trainable.eval()
    with torch.no_grad():
        total, _ = recipe.batch_loss(state, batch, _random.Random(0), cpu)
        k = len(batch[0]["negatives"])
        pixels = recipe.pixels(state, batch, cpu)
        positive = recipe.match(state, pixels, [r["positive"] for r in batch], cpu).tolist()
        negatives = recipe.match(state, pixels.repeat_interleave(k, dim=0),
                                 [n for r in batch for n in r["negatives"]], cpu).view(len(batch), k).tolist()
    by_hand = np.mean([max(0.0, by_kind.get(kind, 0.2) - (positive[i] - negatives[i][m]))
                       for i, r in enumerate(batch) for m, kind in enumerate(r["negative_kinds"])])
    plain = np.mean([max(0.0, 0.2 - (positive[i] - negatives[i][m])) for i in range(4) for m in range(k)])
    assert abs(by_hand - plain) > 1e-3 and float(total) == pytest.approx(by_hand, rel=1e-5)
    styled = recipe.setup(_config("umic-tiny", tmp_path / "s", options={"margin_by_kind": by_kind,
                                                                         "margin_by_kind_styles": ["short"]}),
                          cpu, tmp_path / "scratch3")
    styled.trainable.load_state_dict(state.trainable.state_dict())
    styled.trainable.eval()
    assert {r["style"] for r in batch} == {"short", "long"}
    with torch.no_grad():
        styled_total, _ = recipe.batch_loss(styled, batch, _random.Random(0), cpu)
    by_style = np.mean([max(0.0, (by_kind.get(kind, 0.2) if r["style"] == "short" else 0.2) - (positive[i] - negatives[i][m]))
                        for i, r in enumerate(batch) for m, kind in enumerate(r["negative_kinds"])])
    assert min(abs(by_style - by_hand), abs(by_style - plain)) > 1e-4
    assert float(styled_total) == pytest.approx(by_style, rel=1e-5)
    with pytest.raises(ValueError, match="shuffle; known: keyword-substitution"):  # before any set is loaded
        split_rows(_config("umic-tiny", tmp_path / "t", options={"margin_by_kind": {"shuffle": 0.1}},
                           data=str(tmp_path / "no-such-set")))


def test_umic_cross_term_ranks_each_positive_above_the_other_images_negatives(tmp_path):
    """`loss.cross` (0 by default): each positive against the negatives of the batch's other rows,
    by hand from the model's own scores, added on top of the paper's loss."""
    import random as _random

    from scoring.training import losses
    from scoring.training.recipes import RECIPES

    recipe = RECIPES["umic"]
    rows, _, _ = world_set("umic", {"scenes": 6, "size": 32, "languages": ["en"]})
    batch = rows[:4]
    cpu = torch.device("cpu")
    state = recipe.setup(_config("umic-tiny", tmp_path / "u", loss={"cross": 1.5}), cpu, tmp_path / "scratch")
    state.trainable.eval()
    with torch.no_grad():
        total, parts = recipe.batch_loss(state, batch, _random.Random(0), cpu)
        k = len(batch[0]["negatives"])
        pixels = recipe.pixels(state, batch, cpu)
        positive = recipe.match(state, pixels, [r["positive"] for r in batch], cpu)
        negatives = recipe.match(state, pixels.repeat_interleave(k, dim=0),
                                 [n for r in batch for n in r["negatives"]], cpu).view(len(batch), k)
    own = float((losses.UMIC_MARGIN - (positive[:, None] - negatives)).clamp(min=0).mean())
    cross = np.mean([max(0.0, losses.UMIC_MARGIN - (float(positive[i]) - float(negatives[j, m])))
                     for i in range(4) for j in range(4) if j != i for m in range(k)])
    assert cross > 1e-4 and parts["cross"] == pytest.approx(cross, rel=1e-5)
    assert float(total) == pytest.approx(own + 1.5 * cross, rel=1e-5)


def test_umic_teacher_rank_term_distils_the_teacher_clips_order_of_other_images_captions(tmp_path):
    """`loss.teacher_rank` (0 by default): the batch's positives of different images ordered as the
    teacher CLIP's cosine orders them, by hand from both models' own outputs."""
    import math
    import random as _random

    from scoring.training.models import PixelCache, clip_image_features, clip_text_features
    from scoring.training.recipes import RECIPES

    recipe = RECIPES["umic"]
    rows, _, _ = world_set("umic", {"scenes": 6, "size": 32, "languages": ["en"]})
    batch = rows[::3][:5]
    cpu = torch.device("cpu")
    with pytest.raises(ValueError, match="set `teacher`"):
        recipe.setup(_config("umic-tiny", tmp_path / "u", loss={"teacher_rank": 2.0}), cpu, tmp_path / "scratch")
    config = _config("umic-tiny", tmp_path / "u", loss={"teacher_rank": 2.0}, teacher="${CAPLENS_TINY_DIR}/clip",
                     options={"prefix": "A photo depicts "})
    state, unweighted = (recipe.setup(c, cpu, tmp_path / f"scratch{k}")
                         for k, c in enumerate((config, _config("umic-tiny", tmp_path / "p"))))
    torch.manual_seed(0)  # the tiny head scores every caption alike, and at equal logits the
    with torch.no_grad():  # cross-entropy is log 2 whatever the teacher says: spread them
        state.head.weight.normal_(0, 3)
        unweighted.head.load_state_dict(state.head.state_dict())
    state.trainable.eval()
    unweighted.trainable.eval()
    for prepared in (state, unweighted):
        recipe.prepare(prepared, batch, cpu)
    with torch.no_grad():
        total, parts = recipe.batch_loss(state, batch, _random.Random(0), cpu)
        plain, _ = recipe.batch_loss(unweighted, batch, _random.Random(0), cpu)
        logits = recipe.one_logit(state, recipe.pixels(state, batch, cpu), [r["positive"] for r in batch], cpu)
        pixels = PixelCache(state.teacher.image_processor)([r["image"] for r in batch], [image_key(r) for r in batch], cpu)
        image = torch.nn.functional.normalize(clip_image_features(state.teacher, pixels), dim=-1)
        text = torch.nn.functional.normalize(
            clip_text_features(state.teacher, ["A photo depicts " + r["positive"] for r in batch], cpu), dim=-1)
        teacher = (image * text).sum(-1).tolist()
        temperature = 1 / float(state.teacher.model.logit_scale.exp())
    terms = []
    for i in range(len(batch)):
        for j in range(len(batch)):
            if image_key(batch[i]) != image_key(batch[j]):
                z, y = float(logits[i] - logits[j]), 1 / (1 + math.exp(-(teacher[i] - teacher[j]) / temperature))
                terms.append(-(y * math.log(1 / (1 + math.exp(-z))) + (1 - y) * math.log(1 / (1 + math.exp(z)))))
    assert len({image_key(r) for r in batch}) > 1 and terms and float(logits.std()) > 0.1
    assert parts["teacher_rank"] == pytest.approx(np.mean(terms), rel=1e-4)
    assert float(total) == pytest.approx(float(plain) + 2.0 * np.mean(terms), rel=1e-4)


@pytest.mark.parametrize("field", ["base", "teacher"])
def test_a_missing_start_folder_fails_before_any_data_is_loaded(tmp_path, field):
    """A chained preset (`pac-s-swap` starts from `world-clip-swap-2`'s run) run before its
    predecessor names the folder at once, not after minutes of writing the world set."""
    told = []
    missing = tmp_path / "runs" / "world-clip-swap-2"
    config = _config("pac-s-tiny", tmp_path / "out", **{field: str(missing)})
    with pytest.raises(ValueError, match="model not found: .*world-clip-swap-2"):
        train(config, progress=lambda fraction, message: told.append(message))
    assert told == []  # nothing loaded, not even the data
    assert not (tmp_path / "out").exists()
    from scoring.training.models import resolve_model

    with pytest.raises(ValueError, match="model not found: .*world-clip-swap-2"):  # the same check when loading
        resolve_model(str(missing))


def test_itm_twins_are_rows_of_the_sets_images_and_each_adds_three_pairs_to_the_itm_loss(tmp_path, monkeypatch):
    """`data.world.twins` for the ITM recipe: twin rows name their scene's image as the set's groups
    do (so no caption of the scene is another row's "other image" negative), `twin_edits` keeps the
    places edits, whose caption differs from the positive in the relation word only; the batch loss
    is the ITM cross-entropy over the usual pairs plus (twin, own caption) = 0, (twin, twin caption)
    = 1 and (image, twin caption) = 0; evaluate reports the twins apart from UMIC's kinds."""
    import random as _random
    import zlib

    from scoring.training import losses
    from scoring.training.recipes import RECIPES

    recipe, cpu = RECIPES["itm"], torch.device("cpu")
    spec = {"scenes": 16, "size": 32, "languages": ["en"]}
    plain, plain_digest, _ = recipe.world_rows(spec)
    rows, digest, about = recipe.world_rows(spec | {"twins": True, "twin_places": 1.0, "twin_edits": ["places"]})
    twins = [r for r in rows if r.get("twin_id")]
    assert rows[:len(plain)] == plain and digest != plain_digest and about["twins"] == len(twins) >= 4
    images = {image_key(r) for r in plain}
    assert all(image_key(r) in images and r["twin_edit"] == "places" and r["negatives"] == [] for r in twins)
    relations = {"left", "right", "above", "below"}
    for r in twins:
        a, b = r["positive"].split(), r["twin_caption"].split()
        assert len(a) == len(b) and {x for x, y in zip(a, b) if x != y} <= relations != {x for x, y in zip(a, b) if x != y}
    alone, _, about_alone = recipe.world_rows(spec | {"twins": "only", "twin_places": 1.0, "twin_edits": ["places"]})
    assert alone == twins and about_alone["groups"] == 0 and about["groups"] == len(plain)
    everything, _, _ = recipe.world_rows(spec | {"twins": True})
    assert {r["twin_edit"] for r in everything if r.get("twin_id")} == {"places", "shape"}
    with pytest.raises(ValueError, match="twin_edits names colour"):
        recipe.world_rows(spec | {"twins": True, "twin_edits": ["colour"]})

    state = recipe.setup(_config("itm-tiny", tmp_path / "i"), cpu, tmp_path / "scratch")
    state.trainable.eval()
    batch = plain[:3] + twins[:2]
    with torch.no_grad():
        loss, _ = recipe.batch_loss(state, batch, _random.Random(0), cpu)
        pixels = recipe.pixels(state, batch, cpu)
        twin_pixels = state.pixels([r["twin_image"] for r in twins[:2]], [r["twin_id"] for r in twins[:2]], cpu)
        keys = [image_key(r) for r in batch]
        other = [next(batch[(k + j) % 5]["positive"] for j in range(1, 5) if keys[(k + j) % 5] != keys[k]) for k in range(5)]
        pairs = [(pixels[k], r["positive"], 1) for k, r in enumerate(batch)] + \
            [(pixels[k], other[k], 0) for k in range(5)] + \
            [(twin_pixels[n], r["positive"], 0) for n, r in enumerate(twins[:2])] + \
            [(twin_pixels[n], r["twin_caption"], 1) for n, r in enumerate(twins[:2])] + \
            [(pixels[3 + n], r["twin_caption"], 0) for n, r in enumerate(twins[:2])]
        logits = recipe.logits(state, torch.stack([p for p, _, _ in pairs]), [t for _, t, _ in pairs], cpu)
        by_hand = losses.itm_cross_entropy(logits, torch.tensor([y for _, _, y in pairs]))
    assert float(loss) == pytest.approx(float(by_hand), rel=1e-5)

    # the tiny model scores a scene and its twin alike, so evaluate's bookkeeping is checked with a
    # match that reads where the pixels are and which caption it is given
    def placed(state, pixels, texts, device):
        ramp = torch.linspace(-1, 1, pixels.shape[-1])
        return torch.stack([(p[0] * ramp).mean() * (1 + 0.1 * (zlib.crc32(t.encode()) % 7)) for p, t in zip(pixels, texts)])

    monkeypatch.setattr(recipe, "match", placed)
    evaluated = recipe.evaluate(state, plain[:3] + twins[:2], cpu)
    match = placed(state, torch.cat([pixels[3:], twin_pixels, twin_pixels, pixels[3:]]),
                   [r["positive"] for r in twins[:2]] * 2 + [r["twin_caption"] for r in twins[:2]] * 2, cpu)
    own_pos, twin_pos, twin_twin, own_twin = match.view(4, 2)
    wins = [1.0 if a > b else 0.5 if a == b else 0.0
            for a, b in zip(own_pos.tolist() + twin_twin.tolist(), twin_pos.tolist() + own_twin.tolist())]
    assert 0.0 < np.mean(wins) < 1.0 and 0.5 not in wins  # both outcomes occur, no ties
    assert evaluated["pairwise_twin_places"] == pytest.approx(np.mean(wins))
    assert evaluated["pairwise_accuracy"] == pytest.approx(recipe.evaluate(state, plain[:3], cpu)["pairwise_accuracy"])


def test_itm_twin_head_scores_each_twin_rows_four_pairings_and_twins_come_in_each_language(tmp_path, monkeypatch):
    """`architecture.twin_head`: twin rows go through a new one-logit head on the [CLS] state (BCE
    over own/twin image x own/twin caption), groups through the pair head as before; evaluate reads
    the twin head; `twin_languages` gives one row per language of the same twin."""
    import random as _random
    import zlib

    from scoring.training import losses, recipes
    from scoring.training.recipes import RECIPES

    # the tiny model's [CLS] hardly tells a scene from its twin, so the bookkeeping is checked with
    # a [CLS] that reads where the pixels are and which caption it is given
    def itm_cls(backbone, pixels, texts, device, image_index=None):
        pixels = pixels if image_index is None else pixels[image_index]
        ramp = torch.linspace(-1, 1, pixels.shape[-1])
        value = torch.stack([(p[0] * ramp).mean() * (zlib.crc32(t.encode()) % 7 - 3.5) for p, t in zip(pixels, texts)])
        return value[:, None].expand(-1, backbone.model.itm_head.in_features)

    monkeypatch.setattr(recipes, "itm_cls", itm_cls)

    recipe, cpu = RECIPES["itm"], torch.device("cpu")
    spec = {"scenes": 16, "size": 32, "languages": ["en"], "twin_places": 1.0, "twin_edits": ["places"]}
    plain, _, _ = recipe.world_rows(spec)
    english, _, _ = recipe.world_rows(spec | {"twins": "only"})
    both, digest, _ = recipe.world_rows(spec | {"twins": "only", "twin_languages": ["en", "de"]})
    _, english_digest, _ = recipe.world_rows(spec | {"twins": "only", "twin_languages": ["en"]})
    assert digest != english_digest
    german = [r for r in both if r["language"] == "de"]
    assert [r for r in both if r["language"] == "en"] == english and len(german) == len(english)
    assert [r["twin_id"] for r in german] == [r["twin_id"] for r in english]  # the same twin, realised in German
    assert all(g["positive"] != e["positive"] and g["twin_caption"] != e["twin_caption"] != e["positive"]
               for g, e in zip(german, english))

    config = _config("itm-tiny", tmp_path / "i", architecture={"twin_head": True})
    state = recipe.setup(config, cpu, tmp_path / "scratch")
    assert set(dict(state.trainable.named_children())) == {"itm", "twin_head"}
    state.trainable.eval()
    twins = german[:6]
    with torch.no_grad():
        loss, parts = recipe.batch_loss(state, plain[:3] + twins, _random.Random(0), cpu)
        groups, _ = recipe.pair_loss(state, plain[:3], _random.Random(0), cpu)
        own = recipe.pixels(state, twins, cpu)
        other = state.pixels([r["twin_image"] for r in twins], [r["twin_id"] for r in twins], cpu)
        z = torch.tensor([[[float(state.twin_head(itm_cls(state.itm, image[n:n + 1], [text], cpu)))
                            for text in (r["positive"], r["twin_caption"])] for image in (own, other)]
                          for n, r in enumerate(twins)])
        assert float(loss) == pytest.approx(float(groups) + float(losses.twin_match_bce(z)), rel=1e-5)
        assert parts["twins"] == pytest.approx(float(losses.twin_match_bce(z)), rel=1e-5)
        evaluated = recipe.evaluate(state, twins, cpu)
    wins = [1.0 if a > b else 0.5 if a == b else 0.0
            for m in z for a, b in ((m[0, 0], m[1, 0]), (m[1, 1], m[0, 1]))]
    assert 0.0 < np.mean(wins) < 1.0 and 0.5 not in wins  # both outcomes occur, no ties
    assert evaluated["pairwise_twin_places"] == pytest.approx(np.mean(wins))
    assert "pairwise_accuracy" not in evaluated  # twins alone: no groups to report
    with pytest.raises(ValueError, match="twin_head is the itm recipe's"):
        RECIPES["umic"].setup(_config("umic-tiny", tmp_path / "u", architecture={"twin_head": True}), cpu, tmp_path / "s2")


def test_grid_positions_add_a_unit_spread_sine_cosine_grid_to_the_patches_only(tmp_path):
    """`add_grid_positions`: every channel of the table has unit spread over the grid, the grid is
    row-major (x varies along a row), and only the patch positions move, by strength x the table."""
    from scoring.training.models import add_grid_positions, grid_position_table, load_trainable
    from scoring.tiny import ensure_tiny_checkpoints

    table = grid_position_table(3, 8)
    assert torch.allclose(table.std(dim=0, unbiased=False), torch.ones(8), atol=1e-5)
    assert torch.equal(table[0, 4:], table[1, 4:]) and not torch.equal(table[0, :4], table[1, :4])  # same row: same y
    assert torch.equal(table[0, :4], table[3, :4]) and not torch.equal(table[0, 4:], table[3, 4:])  # same column: same x
    with pytest.raises(ValueError, match="multiple of 4"):
        grid_position_table(3, 6)
    itm = load_trainable(str(ensure_tiny_checkpoints() / "blip-itm"), torch.device("cpu"), ("blip-itm",))
    vision = itm.model.vision_model
    before = vision.embeddings.position_embedding.detach().clone()
    add_grid_positions(vision, 1.5)
    after = vision.embeddings.position_embedding.detach()
    side = int(round((before.shape[1] - 1) ** 0.5))
    assert torch.equal(after[0, 0], before[0, 0])
    assert torch.allclose(after[0, 1:] - before[0, 1:], 1.5 * grid_position_table(side, before.shape[-1]), atol=1e-6)
