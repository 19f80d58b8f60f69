"""What a finished run leaves behind and how it is read back: training.json through
`read_result`, the runs under a folder through `list_runs` (what the Train tab and `caplens
finetune --list` show), and the commit the code was at (`_git_commit`)."""
import dataclasses
import json
import os
import shutil
import subprocess

import pytest

from scoring.training import list_runs, load_config, train
from scoring.training import trainer
from scoring.training.trainer import RESULT_FILE, TrainResult, read_result


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "first"
    return train(load_config("pr-mcs-tiny", out=str(out)))


def _fields(result: TrainResult) -> str:
    return json.dumps(dataclasses.asdict(result), default=str, sort_keys=True)


def test_read_result_gives_back_what_the_run_returned(finished):
    back = read_result(finished.out_dir)
    # every field (NaN, which a tiny run's "before" holds, equal to NaN), the losses as tuples
    assert _fields(back) == _fields(finished)
    assert back.losses and all(isinstance(x, tuple) and len(x) == 2 for x in back.losses)
    assert back.recipe == "pr-mcs" and back.device == "cpu" and back.wall_s > 0
    record = json.loads((finished.out_dir / RESULT_FILE).read_text())
    assert back.before == record["before"] and back.after == record["after"]


def test_read_result_of_a_record_without_warnings_has_none(tmp_path, finished):
    folder = tmp_path / "old"
    shutil.copytree(finished.out_dir, folder)
    record = json.loads((folder / RESULT_FILE).read_text())
    record["warnings"] = ["few ratings"]
    record["device"] = "NVIDIA H100 80GB HBM3"  # what a CUDA run records
    (folder / RESULT_FILE).write_text(json.dumps(record))
    assert read_result(folder).warnings == ["few ratings"]
    assert read_result(folder).device == "NVIDIA H100 80GB HBM3"
    del record["warnings"]  # written before warnings were kept
    (folder / RESULT_FILE).write_text(json.dumps(record))
    assert read_result(folder).warnings == []


def test_list_runs_finds_finished_runs_at_any_depth_newest_first(tmp_path, finished, caplog):
    root = tmp_path / "runs"
    record = json.loads((finished.out_dir / RESULT_FILE).read_text())
    folders = {"a": root / "a", "deep": root / "study" / "week1" / "deep", "b": root / "b"}
    for age, (name, folder) in enumerate(folders.items()):
        folder.mkdir(parents=True)
        (folder / RESULT_FILE).write_text(json.dumps(record | {"wall_s": float(age + 1)}))
        stamp = 1_700_000_000 + 100 * [2, 3, 1][age]  # "deep" newest, then "a", then "b"
        os.utime(folder / RESULT_FILE, (stamp, stamp))
    (root / "unfinished" / ".resume").mkdir(parents=True)  # a run without training.json is not listed
    (root / "cut").mkdir()
    (root / "cut" / RESULT_FILE).write_text('{"recipe": "pr-m')  # written halfway
    (root / "edited").mkdir()
    (root / "edited" / RESULT_FILE).write_text(json.dumps({k: v for k, v in record.items() if k != "losses"}))
    with caplog.at_level("WARNING", logger="scoring.training.trainer"):
        runs = list_runs(root)
    left_out = sorted((r.name, r.getMessage()) for r in caplog.records)
    assert left_out == [
        ("scoring.training.trainer", f"left out {root / 'cut'}: its training.json cannot be read "
                                     "(JSONDecodeError: Unterminated string starting at: line 1 column 12 (char 11))"),
        ("scoring.training.trainer", f"left out {root / 'edited'}: its training.json cannot be read "
                                     "(KeyError: 'losses')")]
    assert [r.out_dir for r in runs] == [folders["deep"], folders["a"], folders["b"]]
    assert [r.wall_s for r in runs] == [2.0, 1.0, 3.0]
    assert all(isinstance(r, TrainResult) and r.recipe == "pr-mcs" for r in runs)
    assert list_runs(str(root))[0].out_dir == folders["deep"]  # a string root too
    assert list_runs(tmp_path / "nothing-here") == []
    (tmp_path / "a-file").write_text("x")
    assert list_runs(tmp_path / "a-file") == []


class _Done:
    def __init__(self, returncode, stdout):
        self.returncode, self.stdout = returncode, stdout


@pytest.mark.parametrize("outcome, expected", [
    (_Done(0, "0123abcd\n"), "0123abcd"),
    (_Done(0, "  \n"), None),            # git printed nothing
    (_Done(128, "0123abcd\n"), None),    # not a repository (as on a Space)
    (OSError("no git"), None),           # git is not installed
    (subprocess.TimeoutExpired("git", 10), None),
])
def test_git_commit_is_the_checkouts_head_or_none(monkeypatch, outcome, expected):
    calls = []

    def fake_run(args, **kwargs):
        calls.append((args, kwargs))
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    monkeypatch.setattr(trainer.subprocess, "run", fake_run)
    assert trainer._git_commit() == expected
    (args, kwargs), = calls
    assert args == ["git", "rev-parse", "HEAD"]
    assert kwargs == {"cwd": trainer.Path(trainer.__file__).parent, "capture_output": True, "text": True,
                      "timeout": 10}


def test_the_record_names_the_commit_the_code_was_at(finished):
    record = json.loads((finished.out_dir / RESULT_FILE).read_text())
    assert record["git_commit"] == trainer._git_commit()
    if record["git_commit"] is not None:  # a checkout: the real HEAD, as git prints it
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=trainer.Path(trainer.__file__).parent,
                              capture_output=True, text=True).stdout.strip()
        assert record["git_commit"] == head and len(head) == 40


def test_the_record_says_what_ran_on_what_data_and_for_how_long(tmp_path):
    """training.json, field by field: what a reader needs to reproduce or cost a run. (Its own
    run, not the module's: mutation testing maps a module fixture's run to the first test only.)
    The run stores its weights in half precision (`options.save_dtype`)."""
    import calendar
    import time

    import torch
    from safetensors.torch import load_file

    from scoring.training.recipes import RECIPES
    from scoring.training.data import image_key, world_set

    finished = train(load_config("pr-mcs-tiny", out=str(tmp_path / "run"), options={"save_dtype": "float16"}))
    weights = {k: v for f in finished.out_dir.rglob("*.safetensors") for k, v in load_file(str(f)).items()}
    assert weights and {v.dtype for v in weights.values() if v.is_floating_point()} == {torch.float16}
    record = json.loads((finished.out_dir / RESULT_FILE).read_text())
    assert set(record) == {
        "recipe", "metric", "backbone_kind", "summary", "config", "data", "git_commit", "device", "precision",
        "torch", "steps", "stopped_early_at", "wall_s", "before", "after", "selected_step", "history", "losses",
        "warnings", "lineage", "finished_at", "budget"}
    assert (record["recipe"], record["metric"], record["backbone_kind"]) == ("pr-mcs", "PR-MCS", "st-text")
    assert record["summary"] == RECIPES["pr-mcs"].summary
    assert record["config"] == load_config("pr-mcs-tiny", out=str(finished.out_dir),
                                           options={"save_dtype": "float16"}).to_dict()
    data = record["data"]
    rows = world_set("prmcs", {"scenes": 12, "split": "train", "size": 32, "languages": ["en", "de"]})[0]
    assert data["rows"] == len(rows) and data["train_rows"] + data["heldout_rows"] == len(rows)
    assert 0.2 * len(rows) < data["heldout_rows"] < 0.4 * len(rows)  # heldout_fraction 0.3, by image
    assert data["evaluated_rows"] == data["heldout_rows"]  # fewer than max_heldout (400)
    assert 1 <= data["heldout_images"] < len({image_key(r) for r in rows})
    assert len(data["hash"]) == 64 and data["world"]["scenes"] == 12
    assert record["budget"] == data["train_rows"]  # pr-mcs counts its budget in training rows
    assert (record["device"], record["precision"], record["torch"]) == ("cpu", "fp32", torch.__version__)
    assert record["steps"] == 6 and record["selected_step"] == 6 and record["stopped_early_at"] is None
    assert [step for step, _ in record["losses"]] == [1, 2, 3, 4, 5, 6] and record["history"] == []
    assert record["before"].keys() == record["after"].keys() and "drop_mean" in record["after"]
    assert record["lineage"] == [] and record["warnings"] == []
    finished_at = calendar.timegm(time.strptime(record["finished_at"], "%Y-%m-%dT%H:%M:%SZ"))
    assert 0 <= time.time() - finished_at < 600 and 0 < record["wall_s"] < 600
    assert not (finished.out_dir / ".resume").exists()  # the snapshot goes once the run is done


def test_a_run_tells_its_progress_and_logs_what_it_did(tmp_path):
    import re

    told, said = [], []
    result = train(load_config("pr-mcs-tiny", out=str(tmp_path / "run")), progress=lambda f, m: told.append((f, m)),
                   log=said.append)
    record = json.loads((result.out_dir / RESULT_FILE).read_text())
    held, train_rows = record["data"]["heldout_rows"], record["data"]["train_rows"]
    assert told[:3] == [(0.0, "loading data"), (0.0, "preparing"), (0.0, f"evaluating before on {held} held-out rows")]
    steps = told[3:9]
    assert [f for f, _ in steps] == pytest.approx([k / 6 for k in range(1, 7)])
    for k, (_, message) in enumerate(steps, start=1):
        loss = dict(record["losses"])[k]
        assert re.fullmatch(rf"pr-mcs step {k}/6 loss {loss:.4f} \d+:\d\d elapsed, ETA \d+:\d\d", message), message
    assert told[9] == (1.0, f"evaluating after on {held} held-out rows")
    wall = int(record["wall_s"])
    assert told[10] == (1.0, f"pr-mcs done in {wall // 60}:{wall % 60:02d}") and len(told) == 11
    assert said[0] == f"pr-mcs: {train_rows} training rows, {held} held-out rows ({record['data']['heldout_images']} images) on cpu"
    assert said[1] == "before: " + ", ".join(f"{k} {v:.4f}" for k, v in record["before"].items())
    assert said[2:8] == [m for _, m in steps]  # 6 steps: every one is logged (at most 20 lines a run)
    assert said[8] == "after: " + ", ".join(f"{k} {v:.4f}" for k, v in record["after"].items()) and len(said) == 9


def test_a_run_past_its_time_limit_stops_and_says_where(tmp_path):
    said = []
    result = train(load_config("pr-mcs-tiny", out=str(tmp_path / "run"), time_limit_s=1e-6), log=said.append)
    record = json.loads((result.out_dir / RESULT_FILE).read_text())
    # the "before" evaluation alone outlasts the limit: no step is taken
    assert record["stopped_early_at"] == 0 and record["losses"] == [] and record["selected_step"] == 0
    assert "time limit of 1e-06 s reached at step 0/6: stopping early" in said
    assert record["steps"] == 6  # what was planned


def test_a_long_run_logs_about_twenty_step_lines(tmp_path):
    said = []
    train(load_config("pr-mcs-tiny", out=str(tmp_path / "run"), max_steps=41, heldout_fraction=0.1), log=said.append)
    logged = [int(line.split()[2].split("/")[0]) for line in said if line.startswith("pr-mcs step ")]
    assert logged == [1, *range(2, 41, 2), 41]  # the first, every 41 // 20 = 2nd, and the last
    assert said[-2].endswith("ETA 0:00")  # the last step has nothing left to do


def test_lineage_of_a_hand_written_record_without_config_or_data(tmp_path):
    from scoring.training.trainer import lineage

    (tmp_path / RESULT_FILE).write_text(json.dumps({"recipe": "pac-s", "losses": [[1, 0.5], [2, 0.4]],
                                                    "wall_s": 3.5, "device": "cpu"}))
    assert lineage(str(tmp_path)) == [{
        "folder": str(tmp_path), "recipe": "pac-s", "base": None,
        "data": {"source": None, "hash": None, "rows": None}, "lr": None, "steps": 2, "wall_s": 3.5,
        "device": "cpu", "git_commit": None, "finished_at": None}]


def test_lineage_follows_the_bases_of_records_kept_before_the_lineage_with_every_field(tmp_path):
    """Records written before `lineage` was kept: the chain is followed through each config's
    `base`, oldest first, and every field is read from its own record."""
    from scoring.training.trainer import lineage

    first, second = tmp_path / "first", tmp_path / "second"

    def write(folder, base, lr, commit, finished):
        folder.mkdir()
        (folder / RESULT_FILE).write_text(json.dumps({
            "recipe": "caplens-r", "config": {"base": base, "optimizer": {"lr": lr}},
            "data": {"source": "world", "hash": f"h-{folder.name}", "rows": 40, "heldout_rows": 9},
            "losses": [[1, 0.9], [2, 0.8], [3, 0.7]], "wall_s": 12.5, "device": "NVIDIA H100 80GB HBM3",
            "git_commit": commit, "finished_at": finished}), encoding="utf-8")

    write(first, "world-mcs", 1e-4, "a" * 40, "2026-11-01T10:00:00Z")
    write(second, str(first), 5e-5, "b" * 40, "2026-11-02T10:00:00Z")

    def entry(folder, base, lr, commit, finished):
        return {"folder": str(folder), "recipe": "caplens-r", "base": base,
                "data": {"source": "world", "hash": f"h-{folder.name}", "rows": 40}, "lr": lr, "steps": 3,
                "wall_s": 12.5, "device": "NVIDIA H100 80GB HBM3", "git_commit": commit, "finished_at": finished}

    assert lineage(str(second)) == [entry(first, "world-mcs", 1e-4, "a" * 40, "2026-11-01T10:00:00Z"),
                                    entry(second, str(first), 5e-5, "b" * 40, "2026-11-02T10:00:00Z")]
    assert lineage("world-mcs") == [] and lineage(None) == [] and lineage("") == []


def test_lineage_of_a_registry_reference_reads_the_shipped_checkpoints_record_and_its_steps():
    """A shipped world model continued (`base = "world:caplens-r-cross"`): the lineage follows the
    reference to the checkpoint on disk, and counts its steps, not the losses its shipped copy keeps."""
    from scoring.registry import load_registry
    from scoring.training.trainer import lineage

    folder = load_registry("world").backbones["caplens-r-cross"].path
    record = json.loads((folder / RESULT_FILE).read_text(encoding="utf-8"))
    assert len(record["losses"]) < record["steps"]  # a shipped copy: every n-th loss
    *_, last = lineage("world:caplens-r-cross")
    assert last["folder"] == str(folder) and last["steps"] == (record["stopped_early_at"] or record["steps"])
    assert last["lr"] == record["config"]["optimizer"]["lr"] and last["finished_at"] == record["finished_at"]
    assert lineage("world:no-such-backbone") == [] and lineage("no-such-profile:clip") == []
    assert lineage("world:mclip-text") == []  # trained by `caplens world train`, not by a recipe
