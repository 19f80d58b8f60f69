"""`caplens finetune` runs a preset to the end and `caplens finetune list` shows the run."""
from app.cli import main
from scoring.api import metric_names
from scoring.registry import data_dir


def test_finetune_runs_a_tiny_preset_and_lists_it(capsys, tmp_path, monkeypatch):
    # its own data directory: registering writes a metric version there
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path))
    out = data_dir() / "runs" / "cli-umic-tiny"
    assert main(["finetune", "umic", "--config", "umic-tiny", "--out", str(out), "--register"]) == 0
    printed = capsys.readouterr().out
    assert "umic -> UMIC (blip-itm)" in printed and "pairwise_accuracy" in printed
    assert (out / "training.json").is_file() and (out / "config.json").is_file()
    registered = [name for name in metric_names("tiny") if name.startswith("UMIC@")]
    assert len(registered) == 1 and f"registered as {registered[0]}" in printed
    assert main(["finetune", "list"]) == 0
    assert str(out) in capsys.readouterr().out


def test_a_tiny_preset_stays_in_the_scratch_space_until_registered_on_purpose(capsys, tmp_path, monkeypatch):
    """The Train tab's rule (issue 25): a smoke/tiny run adds no metric version to everyone's lists."""
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path))
    before = metric_names("tiny")
    assert main(["finetune", "umic", "--config", "umic-tiny"]) == 0
    printed = capsys.readouterr().out
    assert "kept in your scratch space, not registered (preset umic-tiny is a smoke run)" in printed
    assert metric_names("tiny") == before and "registered as" not in printed
    (run,) = (data_dir() / "runs" / "scratch" / "local-cli").iterdir()  # the CLI's own scratch folder
    assert run.name.startswith("umic-") and (run / "training.json").is_file()
    assert f"caplens finetune register --out {run}" in printed
    assert main(["finetune", "register", "--out", str(run)]) == 0
    registered = [name for name in metric_names("tiny") if name not in before]
    assert len(registered) == 1 and registered[0].startswith("UMIC@")
    assert f"registered as {registered[0]}" in capsys.readouterr().out


def test_finetune_refuses_a_config_of_another_recipe(capsys):
    assert main(["finetune", "specs", "--config", "umic-tiny"]) != 0
    assert "is for recipe umic" in capsys.readouterr().err
