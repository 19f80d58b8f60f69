"""Score-now paths: captions perturbed by scoring.perturb.ops and scored by the tiny profile."""
import json

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from app.cli import main
from scoring.analysis.datasets import load_pascal50s
from scoring.analysis.pipeline import pair_scores, perturbation_scores, triplet_scores
from scoring.analysis.robustness import robustness_table
from scoring.analysis.specificity import specificity_table
from scoring.api import get_scorer


@pytest.fixture
def captions_csv(tmp_path):
    Image.new("RGB", (32, 32), (200, 30, 30)).save(tmp_path / "red.png")
    Image.new("RGB", (32, 32), (30, 30, 200)).save(tmp_path / "blue.png")
    rows = [
        dict(image="red.png", image_id="red", lang="en", candidate="a man in a red shirt rides a bike on the road",
             references=json.dumps(["a man rides a bike", "a cyclist on a road"])),
        dict(image="blue.png", image_id="blue", lang="en", candidate="two dogs play with a ball in the green park",
             references=json.dumps(["dogs playing in a park"])),
        dict(image="red.png", image_id="red", lang="de", candidate="ein Mann in einem roten Hemd fährt Fahrrad",
             references=json.dumps(["ein Mann fährt Fahrrad"])),
        dict(image="blue.png", image_id="blue", lang="de", candidate="zwei Hunde spielen mit einem Ball im Park",
             references=json.dumps(["Hunde spielen im Park"])),
    ]
    path = tmp_path / "captions.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_perturbation_scores_feed_table7(captions_csv):
    captions = pd.read_csv(captions_csv)
    scores = perturbation_scores(get_scorer("tiny"), captions, ["BLEU-2", "BLEU-4", "MCS"],
                                 image_root=captions_csv.parent)
    assert set(scores["op"]) == {"original", "repetition", "removal", "masking", "jumble", "substitution"}
    assert len(scores) == 3 * 4 * 6
    # the original caption scores BLEU-2 against its own references; removal must not raise it on average
    table = robustness_table(scores).set_index(["lang", "metric"])
    assert table.loc[("en", "BLEU-2"), "removal_change"] < 0
    # No English candidate shares a 4-gram with its references: BLEU-4 is the toolkit's smoothing
    # (under 5.6e-4), and a change in % off it is undefined, not a number.
    assert table.loc[("en", "BLEU-4"), "original"] < 5.6e-4
    assert np.isnan(table.loc[("en", "BLEU-4"), "removal_change"])
    assert table.loc[("en", "MCS"), "n_original"] == 2


def test_triplets_and_pairs_are_scored(captions_csv, pascal_dir):
    captions = pd.read_csv(captions_csv)
    triplets = triplet_scores(get_scorer("tiny"), captions, ["ROUGE-L"], image_root=captions_csv.parent)
    assert set(triplets["kind"]) == {"pos", "neg"}
    rates = specificity_table(triplets, group_by=["lang", "metric"])
    assert set(rates["lang"]) == {"en", "de"} and rates["n_pos"].min() > 0
    pairs = pair_scores(get_scorer("tiny"), load_pascal50s(pascal_dir), ["BLEU-1"], ("caption_a", "caption_b"),
                        ("_a", "_b"), n_references=2)
    assert pairs["references"].map(len).tolist() == [2, 2, 2]
    assert pairs[["BLEU-1_a", "BLEU-1_b"]].notna().all().all()


def test_cli_scores_captions_now(captions_csv, tmp_path, capsys):
    assert main(["analyze", "robustness", "--captions", str(captions_csv), "--metrics", "BLEU-1", "--profile", "tiny",
                 "--image-root", str(captions_csv.parent), "--ops", "removal", "jumble",
                 "--save-scores", str(tmp_path / "long.csv")]) == 0
    printed = capsys.readouterr().out
    assert "Removal" in printed and "Jumble" in printed
    assert set(pd.read_csv(tmp_path / "long.csv")["op"]) == {"original", "removal", "jumble"}
    assert main(["analyze", "robustness", "--captions", str(captions_csv), "--metrics", "SPICE", "--profile", "tiny",
                 "--image-root", str(captions_csv.parent), "--ops", "removal"]) == 2
    captured = capsys.readouterr()
    assert "SPICE: unavailable:" in captured.out and "no numeric scores" in captured.err


def test_coco_sm_retrieval_embeds_now(coco_sm_meta, tmp_path):
    Image.new("RGB", (32, 32), (10, 200, 10)).save(coco_sm_meta.parent / "a.jpg")
    Image.new("RGB", (32, 32), (200, 10, 200)).save(coco_sm_meta.parent / "b.jpg")
    out = tmp_path / "ret.csv"
    assert main(["analyze", "retrieval", "--coco-sm", str(coco_sm_meta), "--image-root", str(coco_sm_meta.parent),
                 "--profile", "tiny", "--metric", "MCS", "--save-similarities", str(tmp_path / "s.npz"),
                 "--out", str(out)]) == 0
    table = pd.read_csv(out).set_index("lang")
    assert table.loc["en", "NDCG@20"] == pytest.approx(1.0) and 0 < table.loc["de", "NDCG@20"] <= 1.0
    assert table.loc["en", "R@5"] == 1.0  # two images only
    assert main(["analyze", "retrieval", "--coco-sm", str(coco_sm_meta), "--image-root", str(coco_sm_meta.parent),
                 "--profile", "tiny", "--metric", "BLEU-4"]) == 2
