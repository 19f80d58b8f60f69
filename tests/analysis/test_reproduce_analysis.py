"""`caplens analyze reproduce`: protocols against hand computations, the published-values table,
the published-checkpoint rule, and the world benchmark end to end (offline, world profile)."""
from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from scoring.analysis.benchmark_names import PUBLISHED_BENCHMARKS
from scoring.analysis.correlation import kendall_tau
from scoring.analysis.pairwise import foil_accuracy, pascal50s_accuracy
from scoring.analysis.published import read_published
from scoring.analysis.reproduce import (
    FOIL_COEFFICIENTS, PASCAL_COEFFICIENTS, foil_protocol, pascal_protocol, published_checkpoints, rating_protocol,
    verdict,
)


# -- protocols against hand computations ------------------------------------------------------
def test_kendall_variants_by_hand():
    # pairs (i<j) of x=[1,1,2,2,3], y=[1,2,2,3,3]: 6 concordant, 0 discordant, 2 tied in x, 2 in y.
    # tau_b = 6 / sqrt((10-2)(10-2)) = 0.75; tau_c = 2*6 / (5^2 * (3-1)/3) = 0.72 (3 levels each).
    measures = {m.coefficient: m for m in rating_protocol([1, 1, 2, 2, 3], [1, 2, 2, 3, 3],
                                                          ("kendall_b", "kendall_c"), n_boot=0)}
    assert measures["kendall_b"].value == pytest.approx(75.0)
    assert measures["kendall_c"].value == pytest.approx(72.0)
    assert measures["kendall_b"].n == 5
    # an item the metric could not score is left out: the same five items plus one NaN
    again = rating_protocol([1, 1, 2, 2, 3, np.nan], [1, 2, 2, 3, 3, 1], ("kendall_c",), n_boot=0)[0]
    assert again.value == pytest.approx(72.0) and again.n == 5


def test_rating_intervals_resample_whole_images():
    """Flickr8k-Expert rates each caption three times, with one metric score per caption: a row
    bootstrap treated the three as independent (an audit: 9.1 points wide where resampling
    captions gives 15.0). With `clusters` the interval equals a hand-rolled image bootstrap, is
    wider than the row one, and the point and n stay the rows'."""
    from scoring.analysis.correlation import kendall_tau

    rng = np.random.default_rng(3)
    image = np.repeat(np.arange(60), 2)  # 60 images, 2 captions each, 3 ratings per caption
    caption_score = rng.normal(size=image.size) + 0.5 * rng.normal(size=60)[image]
    x, groups = np.repeat(caption_score, 3), np.repeat(image, 3).astype(str)
    y = np.round(np.repeat(caption_score, 3) + rng.normal(size=x.size))
    rows = rating_protocol(x, y, ("kendall_c",), n_boot=400)[0]
    whole = rating_protocol(x, y, ("kendall_c",), clusters=groups, n_boot=400)[0]
    assert whole.value == rows.value and whole.n == rows.n == x.size
    labels = np.unique(groups)
    members = [np.flatnonzero(groups == g) for g in labels]
    draws = np.random.default_rng(0).integers(0, labels.size, size=(400, labels.size))
    by_hand = [100 * kendall_tau(x[idx], y[idx], "c") for idx in (np.concatenate([members[c] for c in d])
                                                                  for d in draws)]
    low, high = np.percentile(by_hand, [2.5, 97.5])
    assert (whole.low, whole.high) == pytest.approx((low, high))
    assert whole.high - whole.low > 1.2 * (rows.high - rows.low)


def test_a_rating_benchmark_resamples_its_images():
    """`reproduce` correlates a rating set (one row per judgment) with its images as clusters."""
    from scoring.analysis.reproduce import _measures, benchmark

    rng = np.random.default_rng(4)
    items = [f"item{k}" for k in range(40)]
    table = pd.DataFrame({"item_id": np.repeat(items, 3), "image_id": np.repeat([f"im{k // 2}" for k in range(40)], 3),
                          "human": rng.integers(1, 5, 120).astype(float)})
    wide = pd.DataFrame({"CLIP-S": rng.random(40)}, index=items)
    spec = benchmark("flickr8k-expert")
    measured = _measures(spec, table, wide, "CLIP-S", 200, 0)
    expected = rating_protocol(np.repeat(wide["CLIP-S"].to_numpy(), 3), table["human"], spec.coefficients,
                               clusters=table["image_id"].to_numpy(), n_boot=200)
    assert measured == expected and measured[0].n == 120


def test_pascal_accuracy_with_ties_by_hand():
    categories = ["HC", "HC", "HI", "MM"]
    votes_a, votes_b = [3, 1, 2, 0], [1, 3, 2, 5]
    # pair 1: humans prefer A, metric too -> 1; pair 2: humans prefer B, metric tie -> 0.5;
    # pair 3: humans tie (coin) and metric tie -> 0.5 whatever the coin; pair 4: B and B -> 1.
    score_a, score_b = [0.9, 0.5, 0.3, 0.2], [0.1, 0.5, 0.3, 0.8]
    measures = {m.coefficient: m for m in pascal_protocol(categories, votes_a, votes_b, score_a, score_b, n_boot=0)}
    assert measures["pascal_hc"].value == pytest.approx(75.0)
    assert measures["pascal_hi"].value == pytest.approx(50.0)
    assert math.isnan(measures["pascal_hm"].value) and measures["pascal_hm"].n == 0
    assert measures["pascal_mm"].value == pytest.approx(100.0)
    assert measures["pascal_mean"].value == pytest.approx(75.0)  # (75 + 50 + 100) / 3 categories present
    direct = pascal50s_accuracy(categories, votes_a, votes_b, score_a, score_b)
    assert measures["pascal_mean"].value == pytest.approx(100 * direct["mean"])


def test_pascal_accuracy_is_averaged_over_the_draws_of_references():
    """The published Pascal-50S protocol averages over 5 draws of references (an audit: one draw
    was reported). Two pairs, three draws: pair 1 right, tied, wrong -> 0.5; pair 2 right in all
    -> 1; mean 75. A pair missing a score in any draw is left out."""
    categories, votes_a, votes_b = ["HC", "HC"], [3, 3], [1, 1]  # humans prefer A in both
    score_a = [[0.9, 0.8], [0.5, 0.7], [0.1, 0.6]]
    score_b = [[0.1, 0.2], [0.5, 0.3], [0.9, 0.1]]
    measures = {m.coefficient: m for m in pascal_protocol(categories, votes_a, votes_b, score_a, score_b, n_boot=0)}
    assert measures["pascal_hc"].value == pytest.approx(75.0) and measures["pascal_hc"].n == 2
    score_a[2][1] = np.nan
    measures = {m.coefficient: m for m in pascal_protocol(categories, votes_a, votes_b, score_a, score_b, n_boot=0)}
    assert measures["pascal_hc"].value == pytest.approx(50.0) and measures["pascal_hc"].n == 1


def test_pascal_human_tie_follows_the_seeded_coin():
    # one tied vote, the metric prefers A: right exactly when the coin (seeded) picks A
    for seed in range(4):
        coin_a = np.random.default_rng(seed).random(1)[0] < 0.5
        value = pascal_protocol(["HC"], [2], [2], [0.9], [0.1], n_boot=0, seed=seed)[0].value
        assert value == (100.0 if coin_a else 0.0)


def test_foil_accuracy_by_hand():
    correct, foil = [0.9, 0.5, 0.2, np.nan], [0.1, 0.5, 0.3, 0.4]
    measure = foil_protocol(correct, foil, "foil_1ref", n_boot=200)
    assert measure.value == pytest.approx(50.0)  # (1 + 0.5 + 0) / 3, the NaN pair left out
    assert measure.n == 3 and measure.low <= 50.0 <= measure.high
    assert measure.value == pytest.approx(100 * foil_accuracy(correct, foil))


def test_verdict_within_a_tenth_of_a_point():
    assert verdict(55.84, 55.8, True) == "✓"
    assert verdict(55.9, 55.8, True) == "✓"
    assert verdict(56.0, 55.8, True) == "✗"
    assert verdict(55.8, 55.8, False) == ""
    assert verdict(55.8, None, True) == ""


# -- published values --------------------------------------------------------------------------
def test_published_table_has_one_sourced_row_per_key():
    rows = read_published()
    keys = [row.key for row in rows]
    assert len(keys) == len(set(keys))
    assert all(row.source.strip() and row.table.strip() for row in rows)
    known = set(PUBLISHED_BENCHMARKS)
    coefficients = {"kendall_b", "kendall_c", *PASCAL_COEFFICIENTS, *FOIL_COEFFICIENTS}
    assert {row.benchmark for row in rows} <= known
    assert {row.coefficient for row in rows} <= coefficients
    by_key = {row.key: row.value for row in rows}
    assert by_key[("PAC-S", "flickr8k-expert", "kendall_c")] == 54.3  # PAC-S CVPR 2023, Flickr8k table
    assert by_key[("RefPAC-S", "pascal-50s", "pascal_mean")] == 84.8


def test_a_repeated_or_unsourced_row_is_refused(tmp_path):
    row = 'metric = "CLIP-S"\nbenchmark = "foil"\ncoefficient = "foil_1ref"\nvalue = 87.2\ntable = "FOIL"\n'
    path = tmp_path / "values.toml"
    path.write_text(f'[[value]]\n{row}source = "a paper"\n\n[[value]]\n{row}source = "another paper"\n')
    with pytest.raises(ValueError, match="value 2 repeats CLIP-S / foil / foil_1ref"):
        read_published(path)
    path.write_text(f"[[value]]\n{row}")
    with pytest.raises(ValueError, match="value 1 lacks source"):
        read_published(path)


# -- published checkpoints ------------------------------------------------------------------------
def test_only_published_checkpoints_are_compared(tmp_path, monkeypatch):
    from scoring.registry import load_registry

    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path))
    hub = load_registry("hub", overrides=[])
    assert published_checkpoints(hub, "CLIP-S") == (True, "")
    assert published_checkpoints(hub, "BLEU-4") == (True, "")  # no checkpoint
    ok, why = published_checkpoints(hub, "PAC-S")  # the PAC-S file is not downloaded here
    assert not ok and "clip_ViT-B-32.pth is not at" in why
    checkpoint = tmp_path / "checkpoints" / "pacs" / "clip_ViT-B-32.pth"
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_bytes(b"weights")
    assert published_checkpoints(load_registry("hub", overrides=[]), "RefPAC-S")[0]
    assert not published_checkpoints(hub, "MCS")[0]  # not a backbone of any paper's table here
    world = load_registry("world", overrides=[])
    ok, why = published_checkpoints(world, "CLIP-S")
    assert not ok and "not a published checkpoint" in why


# -- the world benchmark through the whole path --------------------------------------------------
def test_reproduce_world_equals_the_analysis_functions(tmp_path):
    """`reproduce` on the world's three sets (world profile, two image metrics, three scenes):
    its numbers equal kendall_tau / pascal50s_accuracy / foil_accuracy called on the scores
    the corpus runner wrote, joined to the loaders' tables by hand."""
    from scoring.analysis.datasets import load_foil, load_pascal50s, load_polos_csv
    from scoring.analysis.reproduce import reproduce
    from scoring.corpus.run import current_scores
    from scoring.world.benchmark import write_world_benchmark

    counts = write_world_benchmark(tmp_path / "data", scenes=3, annotators=3, size=48)
    metrics = ["CLIP-S", "RefCLIP-S"]

    def stored(out):
        scores = current_scores(out / "scores")
        return {(row.id, row.metric): row.score for row in scores.itertuples()}

    ratings = reproduce("world-ratings", tmp_path / "data" / "ratings", out=tmp_path / "r", metrics=metrics,
                        profile="world", n_boot=50)
    assert ratings.items == counts["world-ratings"] and not ratings.unavailable
    table = load_polos_csv(tmp_path / "data" / "ratings" / "world_test.csv", "World")
    values = stored(tmp_path / "r")
    for metric in metrics:
        x = [values[(item, metric)] for item in table["item_id"]]
        for variant in ("b", "c"):
            row = ratings.table[(ratings.table.metric == metric) & (ratings.table.coefficient == f"kendall_{variant}")]
            assert row["ours"].item() == pytest.approx(100 * kendall_tau(x, table["human"], variant))
            assert row["verdict"].item() == "" and row["low"].item() <= row["ours"].item() <= row["high"].item()

    pascal = reproduce("world-pascal", tmp_path / "data" / "pascal", out=tmp_path / "p", metrics=metrics,
                       profile="world", n_boot=0)
    pairs = load_pascal50s(tmp_path / "data" / "pascal")
    values = stored(tmp_path / "p")
    draws = ["5ref", "5ref-d1", "5ref-d2", "5ref-d3", "5ref-d4"]  # five draws of five references each
    values |= stored(tmp_path / "p" / "draws")  # only reference metrics are scored on the later draws
    assert all((f"{pairs['pair_id'][0]}:caption_a:{d}", "RefCLIP-S") in values for d in draws)
    assert (f"{pairs['pair_id'][0]}:caption_a:5ref-d1", "CLIP-S") not in values
    for metric in metrics:
        per_draw = [pascal50s_accuracy(pairs["category"], pairs["votes_a"], pairs["votes_b"],
                                       [values[(f"{i}:caption_a:{d}", metric)] for i in pairs["pair_id"]],
                                       [values[(f"{i}:caption_b:{d}", metric)] for i in pairs["pair_id"]])["mean"]
                    for d in (draws if metric == "RefCLIP-S" else draws[:1])]
        row = pascal.table[(pascal.table.metric == metric) & (pascal.table.coefficient == "pascal_mean")]
        assert row["ours"].item() == pytest.approx(100 * np.mean(per_draw))

    foil = reproduce("world-foil", tmp_path / "data" / "foil", out=tmp_path / "f", metrics=metrics, profile="world",
                     n_boot=0)
    foils = load_foil(tmp_path / "data" / "foil" / "foilv1.0_test_2017.json")
    values = stored(tmp_path / "f")
    for metric in metrics:
        for setting in ("1ref", "4ref"):
            direct = foil_accuracy([values[(f"{i}:correct:{setting}", metric)] for i in foils["pair_id"]],
                                   [values[(f"{i}:foil:{setting}", metric)] for i in foils["pair_id"]])
            row = foil.table[(foil.table.metric == metric) & (foil.table.coefficient == f"foil_{setting}")]
            assert row["ours"].item() == pytest.approx(100 * direct)
    # a second run resumes: nothing is scored again, the numbers are the same
    again = reproduce("world-foil", tmp_path / "data" / "foil", out=tmp_path / "f", metrics=metrics, profile="world",
                      n_boot=0)
    assert again.table["ours"].tolist() == foil.table["ours"].tolist()


def test_cli_needs_a_dataset_path(capsys):
    from app.cli import main

    assert main(["analyze", "reproduce", "polaris"]) == 2
    assert "polaris needs --dataset-path" in capsys.readouterr().err


def test_fetch_offline_says_why(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CAPLENS_DATA_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "app.cli", "analyze", "fetch", "polaris", "--dest", str(tmp_path / "p")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2
    assert "cannot download polaris from the Hugging Face hub (yuwd/Polaris)" in done.stderr
    assert "Traceback" not in done.stderr


def test_all_finds_each_benchmark_under_a_folder(tmp_path):
    from scoring.analysis.reproduce import find_benchmarks

    (tmp_path / "data_en" / "polaris").mkdir(parents=True)
    (tmp_path / "data_en" / "polaris" / "polaris_test.csv").write_text("mt,refs,score,imgid\n")
    (tmp_path / "foil").mkdir()
    (tmp_path / "foil" / "foilv1.0_test_2017.json").write_text("{}")
    found = find_benchmarks(tmp_path)
    assert found == {"foil": tmp_path / "foil" / "foilv1.0_test_2017.json",
                     "polaris": tmp_path / "data_en" / "polaris" / "polaris_test.csv"}
