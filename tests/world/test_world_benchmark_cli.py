"""The world benchmarks' shared command line (benchmarks/world_protocol.py), run as a user runs
them: every one refuses a range the protocol forbids with one line and exit status 2, and a run
writes the same report it prints, and its full result as JSON."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ["bench_ratings", "bench_prmcs", "bench_finetune", "bench_umic", "bench_world_vision"]


def _bench(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / f"{script}.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_world_benchmark_refuses_train_scenes_and_choosing_outside_validation(script):
    done = _bench(script, "--first-seed", "10", "--scenes", "3")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"{script}: seeds 10..12 overlap the train range (0..499999): report on the test range "
                           "(1000000..) or outside all ranges (2000000..)\n")
    done = _bench(script, "--choose", "--first-seed", "1000000", "--scenes", "3")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"{script}: choosing runs on the validation range (500000..999999)\n"


def test_a_choosing_run_writes_the_report_it_prints_and_its_result(tmp_path):
    md, result = tmp_path / "umic.md", tmp_path / "umic.json"
    done = _bench("bench_umic", "--choose", "--first-seed", "500000", "--scenes", "4", "--n-boot", "50",
                  "--metrics", "UMIC", "--json", str(result), "--md", str(md))
    assert done.returncode == 0, done.stderr
    assert done.stdout == md.read_text(encoding="utf-8") + "\n"
    r = json.loads(result.read_text(encoding="utf-8"))
    assert (r["first_seed"], r["scenes"], r["range"], r["profile"]) == (
        500000, 4, "validation (for choosing, not a result)", "world")
    assert "validation (for choosing, not a result) range" in done.stdout.splitlines()[0]
    for entry in r["sets"].values():
        value, low, high = entry["UMIC"]["accuracy"]
        assert entry["groups"] >= 2 and 0 <= low <= value <= high <= 100
        assert list(entry) == ["groups", "scenes", "UMIC"]  # only the metric asked for
    # The interval resamples scenes, not groups: a scene has a group for its short caption and,
    # with three objects or more, one for its long caption.
    assert r["sets"]["umic"]["scenes"] == 4 < r["sets"]["umic"]["groups"]


def test_estimates_become_plain_json_and_the_command_line_reproduces_the_range():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import world_protocol
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from scoring.analysis.correlation import Estimate

    est = Estimate(0.5, 0.25, 0.75, 300)
    plain = {"value": 0.5, "low": 0.25, "high": 0.75, "scenes": 300}
    assert world_protocol.jsonable({"a": {"b": est}, "n": 3}) == {"a": {"b": plain}, "n": 3}
    # rows of a table (bench_world_vision's) are lists of dictionaries holding estimates
    rows = world_protocol.jsonable({"rows": [{"error": "shape", "acc": est}, (est, 1)]})
    assert rows == {"rows": [{"error": "shape", "acc": plain}, [plain, 1]]}
    json.dumps(rows)
    r = {"range": "validation (for choosing, not a result)", "first_seed": 500100, "scenes": 60, "langs": ["en", "de"],
         "profile": "world"}
    assert world_protocol.command_line("bench_ratings.py", r) == (
        "python benchmarks/bench_ratings.py --choose --first-seed 500100 --scenes 60 --langs en,de --profile world")
    assert world_protocol.command_line("bench_ratings.py", r | {"range": "test"}).startswith(
        "python benchmarks/bench_ratings.py --first-seed 500100 ")


def test_training_times_count_the_steps_trained_not_the_losses_a_shipped_copy_keeps(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_finetune

    folder = tmp_path / "a-specs-run"  # the checkpoint the scored profile loads, wherever it is
    folder.mkdir(parents=True)
    registry = SimpleNamespace(metrics={"SPECS": SimpleNamespace(backbone="specs"), "CLIP-S": SimpleNamespace(backbone="clip")},
                               backbones={"specs": SimpleNamespace(path=str(folder)), "clip": SimpleNamespace(path="")})
    (folder / "training.json").write_text(json.dumps({
        "steps": 390, "wall_s": 600.0, "device": "cpu", "losses": [[s, 1.0] for s in range(0, 390, 20)],
        "lineage": [{"steps": 700, "wall_s": 1200.0, "device": "cpu"}]}))
    assert bench_finetune.training_times(registry) == {"SPECS": {"wall_s": 1800.0, "device": "cpu", "steps": 1090,
                                                                 "runs": 2}}
    # a run its time limit stopped took the steps it reached, not the ones it planned
    record = json.loads((folder / "training.json").read_text()) | {"stopped_early_at": 374}
    (folder / "training.json").write_text(json.dumps(record))
    assert bench_finetune.training_times(registry)["SPECS"]["steps"] == 1074


def test_world_vision_draws_every_single_object_and_probes_what_features_hold():
    """bench_world_vision's parts: one image per shape x colour x size x cell on the first
    one-object scene's background; the linear probe finds a label the features hold and only
    chance where they hold none."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_world_vision as bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from scoring.world.scene import generate_scenes

    scenes = generate_scenes(500100, 10)
    template, singles = bench.one_object_scenes(scenes)
    assert template == next(s for s in scenes if len(s.objects) == 1)
    kinds = {(o.shape, o.colour, o.size, o.cell) for s in singles for o in s.objects}
    assert len(singles) == len(kinds) == 6 * 8 * 2 * 9 and all(len(s.objects) == 1 for s in singles)
    assert {(s.background, s.pattern) for s in singles} == {(template.background, template.pattern)}
    with pytest.raises(ValueError, match="no one-object scene"):
        bench.one_object_scenes([s for s in scenes if len(s.objects) > 1])

    rng = np.random.default_rng(0)
    labels = [["a", "b", "c"][k % 3] for k in range(150)]
    held = np.eye(3)[[k % 3 for k in range(150)]] * 2 + rng.normal(0, 0.3, (150, 3))
    noise = rng.normal(0, 1, (150, 3))
    assert bench.linear_probe(np.hstack([held, noise]), labels) >= 0.95
    assert bench.linear_probe(noise, labels) <= 0.5


def test_world_vision_twin_pairs_score_a_captions_own_image_against_its_twin(monkeypatch):
    """Each scene is embedded once with its twins and captions; each pair counts 1 when the
    caption is nearer its own image, 0.5 on a tie, 0 when nearer its twin."""
    import torch

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_world_vision as bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from scoring.world.scene import generate_scenes

    scenes = generate_scenes(500100, 12)
    seen = []

    def embed(image_row):
        def fake(clip, pixels, images, keys, texts, device):
            seen.append((keys, texts))
            return torch.tensor([[1.0, 0.0]] + [image_row] * len(texts)), torch.tensor([[1.0, 0.0]] * len(texts))
        return fake

    monkeypatch.setattr(bench, "_embed", embed([0.0, 1.0]))
    right = bench.twin_pairs(None, None, scenes, "cpu")
    assert right and {v for *_, v in right} == {1.0} and {e for _, s, e, _ in right} <= {"shape", "places"}
    assert all(s == "twin" for _, s, _, _ in right) and max(sum(k == i for k, *_ in right) for i in range(12)) <= 3
    assert all(all(k.startswith(keys[0] + "~") for k in keys[1:]) and len(keys) == len(texts) + 1
               for keys, texts in seen)
    assert len(right) == sum(len(texts) for _, texts in seen)
    monkeypatch.setattr(bench, "_embed", embed([1.0, 0.0]))
    assert {v for *_, v in bench.twin_pairs(None, None, scenes, "cpu")} == {0.5}
    monkeypatch.setattr(bench, "_embed", embed([2.0, 0.0]))
    assert {v for *_, v in bench.twin_pairs(None, None, scenes, "cpu")} == {0.0}
