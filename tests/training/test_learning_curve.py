"""A learning curve: one run per rating budget, the full run last, in learning_curve.json."""
def test_learning_curve_has_one_point_per_rating_budget(tmp_path, monkeypatch):
    import dataclasses
    import json

    import pytest

    from scoring.tiny import ensure_tiny_checkpoints
    from scoring.training import load_config, train

    ensure_tiny_checkpoints()
    config = load_config("caplens-r-tiny", out=str(tmp_path / "run"),
                         options={"languages": ["en"], "learning_curve": [30, 90, 100000], "learning_curve_steps": 2})
    result = train(config)
    curve = json.loads((tmp_path / "run" / "learning_curve.json").read_text(encoding="utf-8"))
    full = json.loads((tmp_path / "run" / "training.json").read_text(encoding="utf-8"))["budget"]
    assert curve["unit"] == "ratings"
    from scoring.training import read_learning_curve

    assert read_learning_curve(tmp_path / "run") == curve and read_learning_curve(str(tmp_path / "run")) == curve
    assert read_learning_curve(tmp_path / "a run without a curve") is None
    budgets = [p["budget"] for p in curve["points"]]
    # 30 and 90 ratings (whole images, so a point may hold a few more), then the full run;
    # 100000 exceeds the set and is the full run itself.
    assert [p["asked"] for p in curve["points"]] == [30, 90, None]
    assert 30 <= budgets[0] < 90 <= budgets[1] < budgets[2] == full
    assert all(p["steps"] == 2 for p in curve["points"][:2]) and "tau_c" in curve["points"][0]
    assert curve["points"][-1]["tau_c"] == result.after["tau_c"]
    record = json.loads((tmp_path / "run" / "training.json").read_text(encoding="utf-8"))
    assert curve["points"][-1]["steps"] == record["steps"] and curve["points"][-1]["budget"] == record["budget"]
    # Asked again (a resumed curve), with the set's own size as a budget too: finished points are
    # read back, not retrained, and a budget equal to the whole set is the full run itself.
    from scoring.training import trainer

    monkeypatch.setattr(trainer, "train", lambda *a, **k: pytest.fail("trained a point that was already there"))
    again = trainer.learning_curve(dataclasses.replace(
        config, options=config.options | {"learning_curve": [30, 90, full]}), record)
    assert again == curve["points"]


def test_a_cancelled_curve_point_resumes_where_it_stopped_and_each_point_is_logged(tmp_path):
    """Points live in OUT/curve/<budget>/ and train on the run's options with their budget (not
    the curve's own options, or a point would draw a curve of its own); their lines go to the
    run's log; cancelling inside a point leaves it resumable, and asking again resumes it."""
    import json

    import pytest

    from scoring.tiny import ensure_tiny_checkpoints
    from scoring.training import Cancelled, load_config, train
    from scoring.training.trainer import learning_curve

    ensure_tiny_checkpoints()
    config = load_config("caplens-r-tiny", out=str(tmp_path / "run"), max_steps=3,
                         options={"languages": ["en"], "learning_curve": [30], "learning_curve_steps": 3})
    full = json.loads((train(load_config("caplens-r-tiny", out=str(tmp_path / "run"), max_steps=3,
                                         options={"languages": ["en"]})).out_dir / "training.json").read_text())
    cancel, said, log = _cancelled_at("caplens-r step 2/3")

    with pytest.raises(Cancelled):
        learning_curve(config, full, log=log, cancel=cancel)
    point = tmp_path / "run" / "curve" / "30"
    assert (point / ".resume" / "snapshot.pt").is_file() and not (point / "training.json").exists()
    assert any(line.startswith("caplens-r: ") for line in said)  # the point's own log lines
    cancel.clear()
    said.clear()
    points = learning_curve(config, full, log=log, cancel=cancel)
    assert "resumed at step 2/3" in said
    record = json.loads((point / "training.json").read_text())
    assert record["config"]["options"] == {"languages": ["en"], "budget": 30}
    assert record["steps"] == 3 and [p["asked"] for p in points] == [30, None]


def test_train_hands_its_log_and_cancel_to_the_learning_curve(tmp_path):
    """A curve asked through `train` (as the CLI and the Train tab ask it) reports its points'
    lines in the caller's log and stops when the caller cancels inside a point."""
    import pytest

    from scoring.tiny import ensure_tiny_checkpoints
    from scoring.training import Cancelled, load_config, train

    ensure_tiny_checkpoints()
    # The full run takes 2 steps and the curve's point 3, so "step 2/3" is said only inside the point.
    config = load_config("caplens-r-tiny", out=str(tmp_path / "run"), max_steps=2,
                         options={"languages": ["en"], "learning_curve": [30], "learning_curve_steps": 3})
    cancel, said, log = _cancelled_at("caplens-r step 2/3")

    with pytest.raises(Cancelled):
        train(config, log=log, cancel=cancel)
    point = tmp_path / "run" / "curve" / "30"
    assert (tmp_path / "run" / "training.json").is_file()  # the full run finished before the curve
    assert (point / ".resume" / "snapshot.pt").is_file() and not (point / "training.json").exists()
    assert any(line.startswith("caplens-r step 1/3") for line in said)


def _cancelled_at(line_start):
    """A log that sets its cancel event on the first line starting with `line_start`."""
    import threading

    cancel, said = threading.Event(), []

    def log(line):
        said.append(line)
        if line.startswith(line_start):
            cancel.set()

    return cancel, said, log


def test_curve_points_count_the_steps_a_time_limit_let_a_run_take(tmp_path):
    """A point stopped by `time_limit_s` at step 3 of 40 took 3 steps, and a run stopped before
    its first step (stopped_early_at 0) took none: not the 40 planned."""
    import json

    from scoring.training import trainer
    from scoring.training.config import TrainConfig

    config = TrainConfig(recipe="caplens-r", data="unused", out=str(tmp_path), max_steps=40,
                         options={"learning_curve": [10]})
    point = tmp_path / "curve" / "10"
    point.mkdir(parents=True)
    (point / trainer.RESULT_FILE).write_text(json.dumps(
        {"budget": 10, "steps": 40, "stopped_early_at": 3, "after": {"tau_c": 0.1}}), encoding="utf-8")
    full = {"budget": 50, "steps": 40, "stopped_early_at": 0, "after": {"tau_c": 0.2}}
    points = trainer.learning_curve(config, full)
    assert [(p["budget"], p["steps"]) for p in points] == [(10, 3), (50, 0)]
    assert trainer.steps_taken(full) == 0 and trainer.steps_taken({"steps": 40, "stopped_early_at": None}) == 40
