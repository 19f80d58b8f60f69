"""A finished run registers as a new version of its metric in the user registry, and the
Scorer, `caplens score --metrics` and metric_names see and score it."""
from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone

import numpy as np
import pytest

from scoring.api import ScoreItem, Scorer, get_scorer, metric_names
from scoring.registry import RegistryError, load_registry
from scoring.user_registry import register_run, registered_versions, unregister, user_registry_path

def today() -> str:
    """The date a registration made now is named after (read when needed: a suite running past
    midnight UTC must not compare with the date it started on)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%d")
CAPTIONS = ["a dog on the grass", "two red cars", "a small white cat"]


@pytest.fixture
def data_dir(tmp_path, monkeypatch, tiny_dir):
    """A data directory of its own, so registered versions stay out of other tests."""
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(folder))
    monkeypatch.delenv("CAPLENS_REGISTRY_CONFIG", raising=False)
    return folder


def make_run(folder, checkpoint, recipe, metric, kind, config, before=None, after=None):
    """A run folder as the trainer leaves it: the checkpoint plus training.json."""
    shutil.copytree(checkpoint, folder)
    (folder / "training.json").write_text(json.dumps({
        "recipe": recipe, "metric": metric, "backbone_kind": kind, "device": "cpu",
        "before": before or {}, "after": after or {}, "config": config,
    }))
    return folder


def test_registered_pacs_run_is_listed_scored_and_carded(data_dir, tmp_path, tiny_dir, images):
    run = make_run(tmp_path / "runs" / "pacs-1", tiny_dir / "clip", "pac-s", "PAC-S", "clip",
                   {"data": {"world": {"scenes": 40}}, "base": "tiny:clip"},
                   before={"tau_c": 0.5241}, after={"tau_c": 0.5612})
    day = today()
    name = register_run(run, check=False)
    assert name in {f"PAC-S@world-{day}", f"PAC-S@world-{today()}"}
    assert name in metric_names("tiny") and name not in metric_names("hub")

    scorer = Scorer("tiny", device="cpu")
    items = [ScoreItem(im, c) for im, c in zip(images, CAPTIONS)]
    results = scorer.score(items, ["CLIP-S", name])
    # Same weights as the tiny CLIP, PAC-S's w = 2.0 instead of CLIP-S's 2.5, same prefix.
    clip_values = np.array(results["CLIP-S"].values)
    assert np.count_nonzero(clip_values) >= 1
    np.testing.assert_allclose(results[name].values, clip_values * 2.0 / 2.5, atol=1e-6)
    card = scorer.info(name).description
    assert "pac-s recipe" in card and "the synthetic world (scenes 40)" in card
    assert "tau_c 0.5241 → 0.5612" in card
    assert load_registry("tiny").metrics[name].extra["run"] == str(run.resolve())


def test_a_version_is_dated_when_its_run_finished_not_when_it_is_registered(data_dir, tmp_path, tiny_dir):
    """`caplens finetune register` may come days after the run: the card's trained_at and the
    default version name take the record's finished_at, from a folder or a TrainResult alike."""
    from scoring.training import read_result

    config = {"data": {"world": {"scenes": 40}}, "base": "tiny:clip"}
    folders = [make_run(tmp_path / name, tiny_dir / "clip", "pac-s", "PAC-S", "clip", config) for name in ("a", "b")]
    for folder in folders:
        record = json.loads((folder / "training.json").read_text())
        (folder / "training.json").write_text(json.dumps(record | {"finished_at": "2026-11-20T23:50:07Z",
                                                                   "losses": [], "wall_s": 1.0}))
    names = [register_run(folders[0], check=False), register_run(read_result(folders[1]), check=False)]
    assert names == ["PAC-S@world-2026-11-20", "PAC-S@world-2026-11-20-2"]
    assert [v["trained_at"] for v in registered_versions()] == ["2026-11-20 23:50 UTC"] * 2


def test_pr_mcs_run_keeps_the_profiles_image_tower_and_names_are_unique(data_dir, tmp_path, tiny_dir, images):
    config = {"data": {"world": {"scenes": 10}}, "base": "tiny:prmcs-text", "teacher": "tiny:clip"}
    day = today()
    first = register_run(make_run(tmp_path / "a", tiny_dir / "prmcs-text", "pr-mcs", "PR-MCS", "st-text", config), check=False)
    second = register_run(make_run(tmp_path / "b", tiny_dir / "prmcs-text", "pr-mcs", "PR-MCS", "st-text", config),
                          check=False)
    day = day if first == f"PR-MCS@world-{day}" else today()
    assert (first, second) == (f"PR-MCS@world-{day}", f"PR-MCS@world-{day}-2")
    scorer = Scorer("tiny", device="cpu")
    spec = scorer.registry.metrics[second]
    assert (spec.family, spec.vision_backbone, spec.w) == ("mcs", "clip", 2.5)
    items = [ScoreItem(im, c, lang="de") for im, c in zip(images, ["ein Hund", "zwei rote Autos", "eine Katze"])]
    results = scorer.score(items, ["PR-MCS", first])
    np.testing.assert_allclose(results[first].values, results["PR-MCS"].values, atol=1e-6)
    with pytest.raises(ValueError, match="already registered"):
        register_run(tmp_path / "a", version=f"world-{day}")


def test_running_scorer_cli_and_api_see_a_version_registered_after_they_started(data_dir, tmp_path, tiny_dir, images,
                                                                             capsys):
    from app.api import score_endpoint
    from app.cli import main

    shared = get_scorer("tiny")
    before = shared.metric_names()
    run = make_run(tmp_path / "specs-run", tiny_dir / "clip", "specs", "SPECS", "clip", {"data": str(tmp_path / "x.jsonl")})
    name = register_run(run, version="mine", profile="tiny", check=False)
    assert name == "SPECS@mine" and name not in before
    assert name in get_scorer("tiny").metric_names()
    images[0].save(tmp_path / "one.png")
    (tmp_path / "cands.json").write_text(json.dumps({"one": "a dog on the grass"}))
    code = main(["score", str(tmp_path / "cands.json"), str(tmp_path), "--profile", "tiny", "--metrics", name])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith(f"{name}: ")
    answer = score_endpoint("tiny", str(tmp_path / "one.png"), "a dog on the grass", "", "en", name.lower())
    assert answer["metrics"][name]["status"] == "available"
    assert float(out.split(": ")[1]) == pytest.approx(answer["rows"][0][name], abs=5e-5)


def test_bad_runs_write_nothing(data_dir, tmp_path, tiny_dir):
    with pytest.raises(ValueError, match="not a finished run"):
        register_run(tmp_path)
    odd = make_run(tmp_path / "odd", tiny_dir / "clip", "pac-s", "PAC-S", "no-such-kind", {"base": "tiny:clip"})
    with pytest.raises(RegistryError, match="nothing written"):
        register_run(odd)
    mcs = make_run(tmp_path / "m", tiny_dir / "prmcs-text", "pr-mcs", "PR-MCS", "st-text", {"data": "x"})
    with pytest.raises(ValueError, match="name the profile"):
        register_run(mcs)
    assert not user_registry_path().exists()


def test_users_own_overrides_survive_registration(data_dir, tmp_path, tiny_dir):
    user_registry_path().write_text('# my settings\n[metrics."CLIP-S"]\nw = 3.0\n')
    register_run(make_run(tmp_path / "r", tiny_dir / "clip", "pac-s", "PAC-S", "clip", {"base": "tiny:clip"}), check=False)
    text = user_registry_path().read_text()
    assert text.startswith('# my settings\n[metrics."CLIP-S"]\nw = 3.0\n')
    assert Scorer("tiny", device="cpu").registry.metrics["CLIP-S"].w == 3.0


def test_caplens_r_run_brings_its_frozen_backbones_along(data_dir, tmp_path, tiny_dir, images):
    """A real tiny CapLens-R run whose config names its text encoder and vision tower by path:
    the entry registers them beside the head, so the version scores in any profile."""
    from scoring.training import load_config, train

    config = load_config("caplens-r-tiny", out=str(tmp_path / "run"), base=str(tiny_dir / "mclip-text"),
                         teacher=str(tiny_dir / "clip"))
    name = register_run(train(config))
    assert name in metric_names("hub") and name in metric_names("tiny")
    scorer = Scorer("tiny", device="cpu")
    spec = scorer.registry.metrics[name]
    text, vision = scorer.registry.backbones[spec.extra["text_backbone"]], scorer.registry.backbones[spec.vision_backbone]
    assert (text.kind, text.path, vision.kind, vision.path) == ("st-text", tiny_dir / "mclip-text", "clip", tiny_dir / "clip")
    result = scorer.score([ScoreItem(images[0], "a dog", ["a dog on the grass"])], [name])[name]
    assert result.unavailable is None and 0.0 <= result.values[0] <= 1.0
    assert "tau_c" in scorer.info(name).description


def test_a_broken_registry_edit_keeps_the_running_scorer_on_its_last_good_registry(data_dir, tmp_path, tiny_dir):
    register_run(make_run(tmp_path / "r", tiny_dir / "clip", "pac-s", "PAC-S", "clip", {"base": "tiny:clip"}), check=False)
    scorer = get_scorer("tiny")
    names = scorer.metric_names()
    user_registry_path().write_text(user_registry_path().read_text() + "\n[metrics.broken\n")
    assert get_scorer("tiny").metric_names() == names
    with pytest.raises(RegistryError, match="invalid TOML"):
        Scorer("tiny", device="cpu")


def test_a_version_that_cannot_rebuild_its_heldout_set_is_refused_and_nothing_written(data_dir, tmp_path, tiny_dir):
    run = make_run(tmp_path / "r", tiny_dir / "clip", "pac-s", "PAC-S", "clip", {"base": "tiny:clip"})
    with pytest.raises(ValueError, match="its held-out set cannot be rebuilt"):
        register_run(run)
    assert not user_registry_path().exists()


def test_unregister_takes_out_its_entry_and_keeps_everything_else(data_dir, tmp_path, tiny_dir):
    """Entries before and after it, and the user's own lines, stay; its backbones go too."""
    mine = '# my settings\n[metrics."CLIP-S"]\nw = 3.0\n'
    user_registry_path().write_text(mine)
    runs = [make_run(tmp_path / n, tiny_dir / "clip", "pac-s", "PAC-S", "clip", {"base": "tiny:clip"}) for n in "ab"]
    first, second = (register_run(run, version=v, check=False, owner="rita") for run, v in zip(runs, ["one", "two"]))
    with_both = user_registry_path().read_text()
    user_registry_path().write_text(with_both + '\n[metrics."BLEU-4"]\nn = 4\n')
    unregister(first)
    text = user_registry_path().read_text()
    assert text.startswith(mine) and first not in text and "run-pac-s-one" not in text and second in text
    assert text.endswith('\n[metrics."BLEU-4"]\nn = 4\n')
    assert [v["name"] for v in registered_versions()] == [second] and registered_versions()[0]["registered_by"] == "rita"
    unregister(second)
    assert [n for n in metric_names("tiny") if "@" in n] == [] and load_registry("tiny").metrics["CLIP-S"].w == 3.0
    with pytest.raises(LookupError, match="not a version registered by CapLens"):
        unregister(second)
