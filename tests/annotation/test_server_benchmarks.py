"""Reproducing published benchmarks kept on the server (issue 26, the Analyze tab's offer): a
researcher's list holds what lies in <data dir>/benchmarks plus the world, the run writes its
results beside its scores, and nothing outside that folder can be named."""
from __future__ import annotations

import shutil

import pytest

from annotation.scores import server_benchmarks
from scoring.analysis.datasets import load_foil
from scoring.analysis.pairwise import foil_accuracy
from scoring.corpus.run import current_scores
from scoring.world.benchmark import write_world_benchmark


def test_a_researcher_reproduces_the_foil_files_an_admin_put_on_the_server(engine, accounts, data_dir, tmp_path):
    rita, ann = accounts["rita"].id, accounts["ann"].id
    with pytest.raises(PermissionError, match="needs role researcher or admin"):
        server_benchmarks.server_benchmarks(ann)
    assert server_benchmarks.server_benchmarks(rita) == ["world"]

    write_world_benchmark(tmp_path / "made", scenes=2, annotators=3, size=48)
    shutil.copytree(tmp_path / "made" / "foil", data_dir / "benchmarks" / "foil")  # FOIL's published layout
    assert server_benchmarks.server_benchmarks(rita) == ["foil", "world"]
    with pytest.raises(PermissionError):
        server_benchmarks.reproduce_on_server(ann, "foil", "world", ["CLIP-S"], n_boot=0)
    for name in ("polaris", "../../etc", "/etc/passwd"):
        with pytest.raises(LookupError, match="not in the server's benchmark folder"):
            server_benchmarks.reproduce_on_server(rita, name, "world", ["CLIP-S"], n_boot=0)

    done = server_benchmarks.reproduce_on_server(rita, "foil", "world", ["CLIP-S"], n_boot=0)
    out = data_dir / "reproduce" / "foil"
    assert (out / "results.csv").is_file() and (out / "results.md").is_file()
    assert str(data_dir) not in done.summary and done.summary.startswith("foil: ")
    foils = load_foil(data_dir / "benchmarks" / "foil" / "foilv1.0_test_2017.json")
    stored = {(r.id, r.metric): r.score for r in current_scores(out / "scores").itertuples()}
    for setting in ("1ref", "4ref"):
        direct = foil_accuracy([stored[(f"{i}:correct:{setting}", "CLIP-S")] for i in foils["pair_id"]],
                               [stored[(f"{i}:foil:{setting}", "CLIP-S")] for i in foils["pair_id"]])
        row = done.table[done.table.coefficient == f"foil_{setting}"]
        assert row["ours"].item() == f"{100 * direct:.1f}" and row["benchmark"].item() == "foil"
        assert row["±0.1"].item() == ""  # world checkpoints: no ✓/✗ against the paper


def test_the_world_runs_from_the_app_and_one_run_at_a_time(engine, accounts, data_dir, monkeypatch):
    rita = accounts["rita"].id
    monkeypatch.setattr(server_benchmarks, "WORLD_SCENES", 2)
    done = server_benchmarks.reproduce_on_server(rita, "world", None, ["BLEU-4"], n_boot=0)
    assert [r.benchmark for r in done.results] == ["world-ratings", "world-pascal", "world-foil"]
    assert set(done.table["benchmark"]) == {"world-ratings", "world-pascal", "world-foil"}
    assert all((data_dir / "reproduce" / "world" / name / "results.csv").is_file() for name in set(done.table["benchmark"]))
    monkeypatch.setattr(server_benchmarks, "_running", {"world"})
    with pytest.raises(ValueError, match="being reproduced already"):
        server_benchmarks.reproduce_on_server(rita, "world", None, ["BLEU-4"], n_boot=0)
