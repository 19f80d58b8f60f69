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
    (folder / RESULT_FILE).write_text(json.dumps(record))
    assert read_result(folder).warnings == ["few ratings"]
    del record["warnings"]  # written before warnings were kept
    (folder / RESULT_FILE).write_text(json.dumps(record))
    assert read_result(folder).warnings == []


def test_list_runs_finds_finished_runs_at_any_depth_newest_first(tmp_path, finished):
    root = tmp_path / "runs"
    record = json.loads((finished.out_dir / RESULT_FILE).read_text())
    folders = {"a": root / "a", "deep": root / "study" / "week1" / "deep", "b": root / "b"}
    for age, (name, folder) in enumerate(folders.items()):
        folder.mkdir(parents=True)
        (folder / RESULT_FILE).write_text(json.dumps(record | {"wall_s": float(age + 1)}))
        stamp = 1_700_000_000 + 100 * [2, 3, 1][age]  # "deep" newest, then "a", then "b"
        os.utime(folder / RESULT_FILE, (stamp, stamp))
    (root / "unfinished" / ".resume").mkdir(parents=True)  # a run without training.json is not listed
    runs = list_runs(root)
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
