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
