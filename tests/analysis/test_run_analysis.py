"""The analyses from published files end to end (`scoring.analysis.run`, behind both
`caplens analyze` and the app's "Analyze from files"), with the tiny profile's real metrics on
inputs small enough that the expected numbers follow from the captions by hand."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from scoring.analysis import run
from scoring.api import get_scorer

from tests.benchmark_files import write_pascal50s


@pytest.fixture(scope="module")
def scorer():
    return get_scorer("tiny")


def test_rating_correlation_follows_the_human_order(scorer, flickr8k_json):
    # BLEU-1 against the image's references: "a dog is running" 2/4 = 0.5 (rated 4 and 3),
    # "a cat sleeps" 1/3 (rated 1), "kids playing" 1/2 x brevity exp(1 - 3/2) = 0.30 (rated 2).
    # Pairs: 4 concordant, 1 discordant (cat vs kids), 1 tied in BLEU only:
    # tau_b = (4 - 1) / sqrt(6 * 5).
    measured = run.rating_correlation(scorer, flickr8k_json, ["BLEU-1"], dataset="flickr8k-expert", n_boot=0,
                                      with_images=False)
    scores = measured.scores.set_index("candidate")["BLEU-1"]
    assert scores["a dog is running"].tolist() == pytest.approx([0.5, 0.5], abs=1e-6)
    assert scores["a cat sleeps"] == pytest.approx(1 / 3, abs=1e-6)
    assert scores["kids playing"] == pytest.approx(0.5 * math.exp(1 - 3 / 2), abs=1e-6)
    row = measured.table.set_index("metric").loc["BLEU-1"]
    assert row["n"] == 4
    assert row["kendall_b"] == pytest.approx(3 / math.sqrt(30))
    assert list(measured.table[["collection", "lang"]].iloc[0]) == ["Flickr8k-Expert", "en"]
    assert measured.summary() == "4 rated captions of flickr8k-expert."


def test_image_metrics_need_the_images(scorer, flickr8k_json):
    without = run.rating_correlation(scorer, flickr8k_json, ["BLEU-1", "CLIP-S"], dataset="flickr8k-expert",
                                     n_boot=0, with_images=False)
    assert without.table.set_index("metric")["n"].to_dict() == {"BLEU-1": 4, "CLIP-S": 0}
    assert without.unscored() == ["CLIP-S"]
    assert without.summary() == ("4 rated captions of flickr8k-expert. "
                                 "No scores for CLIP-S (image metrics need the images).")
    folder = flickr8k_json.parent / "Flicker8k_Dataset"
    folder.mkdir()
    Image.new("RGB", (32, 32), (150, 90, 40)).save(folder / "1000_aa.jpg")
    Image.new("RGB", (32, 32), (30, 160, 40)).save(folder / "2000_bb.jpg")
    with_images = run.rating_correlation(scorer, flickr8k_json, ["CLIP-S"], dataset="flickr8k-expert", n_boot=0,
                                         image_root=flickr8k_json.parent)
    assert with_images.table.set_index("metric").loc["CLIP-S", "n"] == 4
    assert with_images.scores["CLIP-S"].notna().all()


def test_length_buckets_add_the_combined_metric(scorer, flickr8k_json):
    measured = run.rating_length_buckets(scorer, flickr8k_json, ["BLEU-1"], dataset="flickr8k-expert",
                                         combine=("BLEU-1", "ROUGE-L"), threshold=3, with_images=False)
    assert set(measured.table["metric"]) == {"BLEU-1", "BLEU-1<3|ROUGE-L"}
    # every caption is shorter than 20 tokens: one bucket holding all four ratings
    assert measured.table.groupby("metric")["n"].sum().to_dict() == {"BLEU-1": 4, "BLEU-1<3|ROUGE-L": 4}


def test_pascal50s_averages_the_accuracy_over_draws_of_references(scorer, tmp_path):
    """Five of the references are drawn per pair, five times, and the accuracies averaged (the
    published protocol; an audit found one draw): the table is the mean of each draw's table."""
    from scoring.analysis.datasets import draw_seed
    from scoring.analysis.pairwise import pascal50s_table
    from scoring.analysis.pipeline import pair_scores

    words = ["a", "man", "horse", "dogs", "play", "bus", "red", "street", "rides", "two", "walks", "person"]
    rng = np.random.default_rng(0)
    pairs = [(f"img{k}.jpg", " ".join(rng.choice(words, 3)), " ".join(rng.choice(words, 3))) for k in range(12)]
    references = [[" ".join(rng.choice(words, 4)) for _ in range(9)] for _ in pairs]
    winners = [list(rng.choice([1, 2], 9)) for _ in pairs]  # one reference per judgement: 9 each
    folder = write_pascal50s(tmp_path / "pascal", pairs, [1, 2, 3, 4] * 3, winners, references)
    measured = run.pascal50s(scorer, folder, ["BLEU-1"], with_images=False, draws=3).table.set_index("metric")
    loaded = run._images(run.load_pascal50s(folder), False)
    tables = [pascal50s_table(pair_scores(scorer, loaded, ["BLEU-1"], ("caption_a", "caption_b"), ("_a", "_b"),
                                          n_references=5, seed=draw_seed(0, d)), ["BLEU-1"]).set_index("metric")
              for d in range(3)]
    assert tables[0].loc["BLEU-1", "mean"] != tables[1].loc["BLEU-1", "mean"] or \
        tables[0].loc["BLEU-1", "mean"] != tables[2].loc["BLEU-1", "mean"]  # the draws differ
    for column in ("HC", "HI", "MM", "mean"):
        assert measured.loc["BLEU-1", column] == pytest.approx(np.mean([t.loc["BLEU-1", column] for t in tables]))


def test_pascal50s_counts_a_pair_right_when_the_metric_prefers_the_humans_choice(scorer, tmp_path):
    # BLEU-1 against the reference: A wins pair 0 (5/5 x brevity 0.55 vs 1/2 x 0.05), B wins
    # pair 1 (the reference itself), A wins pair 2 (a red bus vs bus bus) - as the humans did.
    pairs = [("img0.jpg", "a man rides a horse", "a person"), ("img1.jpg", "two dogs", "two dogs playing in a park"),
             ("img2.jpg", "a red bus", "bus bus")]
    references = [["a man rides a horse on a beach"] * 3, ["two dogs playing in a park"] * 3,
                  ["a red bus on the street"] * 3]
    folder = write_pascal50s(tmp_path / "pascal", pairs, [1, 3, 4], [[1, 1, 2], [2, 2, 2], [1, 1, 1]], references)
    measured = run.pascal50s(scorer, folder, ["BLEU-1"], with_images=False)
    row = measured.table.set_index("metric").loc["BLEU-1"]
    assert (row["HC"], row["HM"], row["MM"], row["n"]) == (1.0, 1.0, 1.0, 3)
    assert math.isnan(row["HI"])  # no human-incorrect pair
    assert measured.summary() == "3 pairs, accuracy averaged over 5 draw(s) of 5 references."


def test_foil_prefers_the_correct_caption(scorer, foil_json):
    # "A dog on a sofa." shares 4 of 5 words with the reference "A dog lying on a couch.",
    # the foil "A cat on a sofa." 3; the pair of image 7 has no reference, so BLEU skips it.
    measured = run.foil(scorer, foil_json, ["BLEU-1", "CLIP-S"], n_references=1, with_images=False)
    table = measured.table.set_index("metric")
    assert table.loc["BLEU-1", "accuracy"] == 1.0 and table.loc["BLEU-1", "n"] == 1
    assert table.loc["CLIP-S", "n"] == 0
    assert measured.summary() == "2 pairs. No scores for CLIP-S (image metrics need the images)."


def test_specificity_rewards_the_true_next_detail(scorer, tmp_path):
    # Each caption is its own reference, so adding its next true detail unit always raises
    # ROUGE-L (longer common subsequence, precision still 1): SR_pos = 1. The units of the
    # first caption: "A dog" | "runs on the grass." | "It has a red collar." | "The sky is blue."
    captions = ["A dog runs on the grass. It has a red collar. The sky is blue.",
                "A man rides a bike. He wears a helmet. A car is parked nearby."]
    path = tmp_path / "captions.csv"
    pd.DataFrame({"candidate": captions, "image_id": ["1", "2"], "lang": ["en", "en"],
                  "references": captions}).to_csv(path, index=False)
    measured = run.specificity(scorer, path, ["ROUGE-L"])
    row = measured.table.iloc[0]
    assert (row["lang"], row["metric"]) == ("en", "ROUGE-L")
    assert row["sr_pos"] == 1.0
    assert (row["n_pos"], row["n_neg"]) == (6, 6)  # three extensions per four-unit caption
    assert measured.summary() == "6 triplets."


def test_coco_sm_retrieval_keeps_its_matrices(scorer, coco_sm_meta):
    Image.new("RGB", (32, 32), (10, 200, 10)).save(coco_sm_meta.parent / "a.jpg")
    Image.new("RGB", (32, 32), (200, 10, 200)).save(coco_sm_meta.parent / "b.jpg")
    measured = run.coco_sm_retrieval(scorer, coco_sm_meta, "CLIP-S", image_root=coco_sm_meta.parent)
    assert {lang: matrix.shape for lang, matrix in measured.similarities.items()} == {"en": (3, 2), "de": (3, 2)}
    assert measured.text_to_image.tolist() == [0, 0, 1]
    assert measured.table.set_index("lang").loc["en", "NDCG@20"] == pytest.approx(1.0)
    assert measured.summary() == "3 texts, 2 images, 2 languages."


def test_no_metric_or_only_unavailable_ones_is_refused(scorer, foil_json):
    with pytest.raises(ValueError, match="Choose at least one metric"):
        run.foil(scorer, foil_json, [])
    table = pd.DataFrame({"human": [1.0, 2.0, 3.0], "M": [0.1, 0.2, 0.3]})
    with pytest.raises(ValueError, match="No chosen metric could be scored. M: unavailable: no checkpoint."):
        run.correlate(table, ["M"], unavailable={"M": "no checkpoint"})
    assert run.correlate(table, ["M"], n_boot=0).loc[0, "kendall_b"] == pytest.approx(1.0)


def test_caption_files_say_what_is_wrong(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        run.read_captions(tmp_path / "missing.csv")
    with pytest.raises(ValueError, match="a folder, not a CSV file"):
        run.read_captions(tmp_path)
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ValueError, match="the file is empty"):
        run.read_captions(tmp_path / "empty.csv")
    (tmp_path / "x.csv").write_text("text\na dog\n")
    with pytest.raises(ValueError, match="needs a 'candidate'"):
        run.read_captions(tmp_path / "x.csv")


def test_rating_set_loader_names_the_problem(tmp_path):
    from scoring.analysis.pipeline import load_rating_set

    with pytest.raises(LookupError, match="unknown rating set 'flickr30k'"):
        load_rating_set("flickr30k", tmp_path)
    with pytest.raises(FileNotFoundError, match="capeval1k: no such file"):
        load_rating_set("capeval1k", tmp_path / "missing.json")
    # Another file given for a set: the loader's reason, then what the set reads (a new user had
    # only "not valid JSON" for a CSV given as Flickr8k-Expert).
    (tmp_path / "sheet.csv").write_text("foo,bar\n1,2\n")
    with pytest.raises(ValueError) as refused:
        load_rating_set("flickr8k-expert", tmp_path / "sheet.csv")
    assert str(refused.value).startswith(f"{tmp_path / 'sheet.csv'}: not valid JSON (")
    assert str(refused.value).endswith("). flickr8k-expert reads flickr8k.json / crowdflower_flickr8k.json from "
                                       "CLIPScore's download.py, or the folder of the Flickr8k text release "
                                       "(Flickr8k.token.txt with ExpertAnnotations.txt or CrowdFlowerAnnotations.txt)")


def test_every_rating_set_says_what_files_it_reads():
    from scoring.analysis.datasets import LOADERS, rating_set_files

    assert rating_set_files("longcap-arena-testa-rel").startswith("the hub's data/dci_val.")
    assert all(rating_set_files(name) for name in LOADERS)


def test_length_analysis_counts_words_when_no_token_column():
    from scoring.analysis.length import length_bucket_table
    from scoring.analysis.pipeline import length_analysis

    table = pd.DataFrame({"candidate": ["a b", "a b c", "a " * 30, "a " * 45],
                          "human": [1.0, 2.0, 3.0, 4.0], "M": [0.1, 0.3, 0.2, 0.4]})
    result = length_analysis(table, ["M"], edges=[0, 20, 100])
    expected = length_bucket_table(table.assign(n_tokens=[2, 3, 30, 45]), ["M"], edges=[0, 20, 100])
    pd.testing.assert_frame_equal(result, expected)
    assert "n_tokens" not in table.columns  # the caller's table is left as it was


def test_a_rating_table_without_image_paths_finds_its_images_by_imgid(scorer, tmp_path):
    """CapEval1k names each image by `imgid` alone: with the images given, that file name finds
    it; a name that leads outside the images' folder finds nothing."""
    images = tmp_path / "images"
    images.mkdir()
    Image.new("RGB", (32, 32), (150, 90, 40)).save(images / "a.png")
    Image.new("RGB", (32, 32), (30, 160, 40)).save(images / "b.png")
    Image.new("RGB", (32, 32), (30, 30, 200)).save(tmp_path / "outside.png")
    table = tmp_path / "capeval.csv"
    table.write_text("imgid,caption,score\na.png,a brown square,4\nb.png,a green square,2\na.png,a dog,1\n"
                     "../outside.png,a blue square,3\n", encoding="utf-8")
    measured = run.rating_correlation(scorer, table, ["CLIP-S"], dataset="capeval1k", n_boot=0, image_root=images)
    scored = measured.scores.set_index("candidate")["CLIP-S"]
    assert scored[["a brown square", "a green square", "a dog"]].notna().all()
    assert math.isnan(scored["a blue square"])  # ../outside.png is not among the images given
    assert measured.table.set_index("metric").loc["CLIP-S", "n"] == 3
