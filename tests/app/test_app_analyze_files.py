"""Analyse-from-files handlers (Analyze tab) on small files in the published formats, tiny
profile: each table equals what the library functions give on the same inputs, and a bad
upload becomes a clear status line instead of an exception."""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from app.tabs import analyze_files

PROFILE = "tiny"


def _png(colour) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (40, 32), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def _zip(path, members: dict[str, bytes]):
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _scorer():
    from app import engine

    return engine.get_scorer(PROFILE)


@pytest.fixture
def flickr8k_json(tmp_path):
    """CLIPScore download.py layout (flickr8k.json) with its images zipped as published."""
    data = {
        "1000_aa": {"image_id": "1000_aa", "image_path": "Flicker8k_Dataset/1000_aa.jpg",
                    "ground_truth": ["a dog runs", "a brown dog on the grass"],
                    "human_judgement": [
                        {"caption": "a dog is running on the grass", "rating": 4.0, "image_id": "1000_aa"},
                        {"caption": "a cat sleeps", "rating": 1.0, "image_id": "1000_aa"},
                        {"caption": "a brown dog", "rating": 3.0, "image_id": "1000_aa"}]},
        "2000_bb": {"image_id": "2000_bb", "image_path": "Flicker8k_Dataset/2000_bb.jpg",
                    "ground_truth": ["two kids play outside"],
                    "human_judgement": [{"caption": "kids playing outside", "rating": 3.5},
                                        {"caption": "a red car", "rating": 1.5}]},
    }
    path = tmp_path / "flickr8k.json"
    path.write_text(json.dumps(data))
    images = _zip(tmp_path / "images.zip", {"Flicker8k_Dataset/1000_aa.jpg": _png((150, 90, 40)),
                                            "Flicker8k_Dataset/2000_bb.jpg": _png((30, 160, 40))})
    return path, images


def _cell(strings):
    cell = np.empty((1, len(strings)), dtype=object)
    for index, text in enumerate(strings):
        cell[0, index] = text
    return cell


@pytest.fixture
def pascal_files(tmp_path):
    """pair_pascal.mat and consensus_pascal.mat, three judgements per pair."""
    from scipy.io import savemat

    folder = tmp_path / "pascal"
    folder.mkdir()
    pairs = [("img0.jpg", "a man rides a horse", "a person"), ("img1.jpg", "two dogs", "two dogs playing in a park"),
             ("img2.jpg", "a red bus", "bus bus")]
    entries = np.empty((1, len(pairs)), dtype=object)
    for index, pair in enumerate(pairs):
        entries[0, index] = _cell(pair)
    savemat(folder / "pair_pascal.mat", {"new_input": entries, "category": np.array([[1, 3, 4]])})
    winners = [[1, 1, 2], [2, 2, 2], [1, 1, 1]]
    triplets = np.empty((1, 9), dtype=[("A", "O"), ("B", "O"), ("C", "O"), ("D", "O")])
    references = ["a man rides a horse on a beach", "two dogs playing in a park", "a red bus on the street"]
    for index, (pair, wins) in enumerate(zip(pairs, winners)):
        for judge, winner in enumerate(wins):
            triplets[0, index * 3 + judge] = (references[index], pair[1], pair[2], np.array([[float(winner)]]))
    savemat(folder / "consensus_pascal.mat", {"triplets": triplets})
    return [str(folder / "pair_pascal.mat"), str(folder / "consensus_pascal.mat")]


@pytest.fixture
def foil_json(tmp_path):
    data = {
        "images": [{"id": 5, "file_name": "COCO_val2014_000000000005.jpg"}],
        "annotations": [
            {"id": 11, "image_id": 5, "caption": "A dog on a sofa.", "foil": False, "foil_id": 1},
            {"id": 12, "image_id": 5, "caption": "A dog lying on a couch.", "foil": False, "foil_id": 2},
            {"id": 11, "image_id": 5, "caption": "A cat on a sofa.", "foil": True,
             "target_word": "dog", "foil_word": "cat", "foil_id": 3},
            {"id": 12, "image_id": 5, "caption": "A dog lying on a bus.", "foil": True,
             "target_word": "couch", "foil_word": "bus", "foil_id": 4},
        ],
    }
    path = tmp_path / "foilv1.0_test_2017.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def coco_sm(tmp_path):
    data = {
        "en": [{"filename": "a.png", "captions": ["a brown dog", "a dog outside"]},
               {"filename": "b.png", "captions": ["a green field"]}, {"filename": "c.png", "captions": ["blue sky"]}],
        "de": [{"filename": "a.png", "captions": ["ein brauner Hund", "ein Hund draußen"]},
               {"filename": "b.png", "captions": ["ein grünes Feld"]}, {"filename": "c.png", "captions": ["blauer Himmel"]}],
    }
    meta = tmp_path / "google.json"
    meta.write_text(json.dumps(data, ensure_ascii=False))
    images = _zip(tmp_path / "coco.zip", {"a.png": _png((150, 90, 40)), "b.png": _png((30, 160, 40)),
                                          "c.png": _png((40, 60, 200))})
    return meta, images


def test_correlation_matches_library(flickr8k_json):
    from scoring.analysis.correlation import correlation_table
    from scoring.analysis.pipeline import load_rating_set, score_table

    path, images = flickr8k_json
    metrics = ["BLEU-4", "CLIP-S"]
    outcome = analyze_files.correlation_from_files(PROFILE, "flickr8k-expert", [str(path)], [str(images)], metrics)
    root = analyze_files.image_folder([str(images)])
    scored = score_table(_scorer(), load_rating_set("flickr8k-expert", path), metrics, image_root=root)
    expected = correlation_table(scored.drop(columns=["references"]), metrics, group_by=["collection", "lang"],
                                 n_boot=200, seed=0)
    pd.testing.assert_frame_equal(outcome.table, expected)
    assert set(outcome.table["metric"]) == set(metrics) and outcome.table["n"].eq(5).all()
    assert outcome.figure is not None and "5 rated captions" in outcome.message


def test_length_buckets_with_combined_metric(flickr8k_json):
    from scoring.analysis.pipeline import length_analysis, load_rating_set, score_table

    path, images = flickr8k_json
    outcome = analyze_files.length_from_files(PROFILE, "flickr8k-expert", [str(path)], [str(images)], ["BLEU-4"],
                                              "CLIP-S", "SPECS", threshold=4)
    root = analyze_files.image_folder([str(images)])
    scored = score_table(_scorer(), load_rating_set("flickr8k-expert", path), ["BLEU-4", "CLIP-S", "SPECS"],
                         image_root=root)
    expected = length_analysis(scored.drop(columns=["references"]), ["BLEU-4"], combine=("CLIP-S", "SPECS"), threshold=4)
    pd.testing.assert_frame_equal(outcome.table, expected)
    assert "CLIP-S<4|SPECS" in set(outcome.table["metric"])
    assert outcome.figure is not None


def test_pascal50s_matches_library(pascal_files, tmp_path):
    from scoring.analysis.datasets import load_pascal50s
    from scoring.analysis.pairwise import pascal50s_table
    from scoring.analysis.pipeline import pair_scores

    metrics = ["BLEU-1", "CIDEr"]
    outcome = analyze_files.pascal50s_from_files(PROFILE, pascal_files, None, metrics)
    folder = analyze_files.gather_upload(pascal_files, "pascal")
    scores = pair_scores(_scorer(), load_pascal50s(folder), metrics, ("caption_a", "caption_b"), ("_a", "_b"),
                         n_references=5, seed=0)
    pd.testing.assert_frame_equal(outcome.table, pascal50s_table(scores, metrics, seed=0))
    assert list(outcome.table.columns) == ["metric", "HC", "HI", "HM", "MM", "mean", "n"]
    # the same two files zipped give the same table
    zipped = _zip(tmp_path / "pascal.zip", {name.rsplit("/", 1)[-1]: open(name, "rb").read() for name in pascal_files})
    again = analyze_files.pascal50s_from_files(PROFILE, [str(zipped)], None, metrics)
    pd.testing.assert_frame_equal(again.table, outcome.table)


def test_foil_without_images_reports_image_metrics_unavailable(foil_json):
    from scoring.analysis.datasets import load_foil
    from scoring.analysis.pairwise import foil_table
    from scoring.analysis.pipeline import pair_scores

    metrics = ["BLEU-4", "CLIP-S"]
    outcome = analyze_files.foil_from_files(PROFILE, [str(foil_json)], None, metrics, n_references=1)
    pairs = load_foil(foil_json).drop(columns=["image_path"])
    expected = foil_table(pair_scores(_scorer(), pairs, metrics, ("correct", "foil"), ("_correct", "_foil"),
                                      n_references=1, seed=0), metrics)
    pd.testing.assert_frame_equal(outcome.table, expected)
    assert outcome.table.set_index("metric").loc["BLEU-4", "n"] == 2
    assert outcome.message == "2 pairs. No scores for CLIP-S (image metrics need the images zip)."


def test_specificity_matches_library(tmp_path):
    from scoring.analysis.pipeline import triplet_scores
    from scoring.analysis.specificity import specificity_table

    path = tmp_path / "captions.csv"
    pd.DataFrame({"candidate": ["A dog runs on the grass. It has a red collar. The sky is blue.",
                                "A man rides a bike. He wears a helmet. A car is parked nearby."],
                  "image_id": ["1", "2"], "lang": ["en", "en"],
                  "references": ["a dog runs on the grass|the dog has a red collar",
                                 "a man rides a bike|a man with a helmet on a bike"]}).to_csv(path, index=False)
    outcome = analyze_files.specificity_from_files(PROFILE, [str(path)], None, ["BLEU-4"])
    triplets = triplet_scores(_scorer(), pd.read_csv(path), ["BLEU-4"], seed=0)
    pd.testing.assert_frame_equal(outcome.table, specificity_table(triplets, group_by=["lang", "metric"]))
    assert list(outcome.table.columns) == ["lang", "metric", "sr_pos", "sr_neg", "specificity", "n_pos", "n_neg"]
    assert outcome.table["n_pos"].iloc[0] > 0


def test_retrieval_matches_library(coco_sm):
    from scoring.analysis.datasets import load_coco_sm
    from scoring.analysis.pipeline import retrieval_similarities
    from scoring.analysis.retrieval import retrieval_table

    meta, images = coco_sm
    outcome = analyze_files.retrieval_from_files(PROFILE, [str(meta)], [str(images)], "CLIP-S")
    root = analyze_files.image_folder([str(images)])
    arrays, text_to_image = retrieval_similarities(_scorer(), load_coco_sm(meta), "CLIP-S", image_root=root)
    pd.testing.assert_frame_equal(outcome.table, retrieval_table(arrays, text_to_image, reference_lang="en"))
    assert list(outcome.table["lang"]) == ["en", "de"]
    assert outcome.table.set_index("lang").loc["en", "NDCG@20"] == pytest.approx(1.0)


def test_bad_files_give_a_clear_status(tmp_path, flickr8k_json):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    status, table, figure, download = analyze_files.run_safely(
        analyze_files.correlation_from_files, "correlation", PROFILE, "flickr8k-expert", [str(broken)], None, ["BLEU-4"])
    assert status.startswith("Could not analyse:") and "JSON" in status.upper()
    assert table is None and download is None

    status, *_ = analyze_files.run_safely(analyze_files.pascal50s_from_files, "pascal50s", PROFILE,
                                          [str(broken)], None, ["BLEU-4"])
    assert status.startswith("Could not analyse:")

    not_zip = tmp_path / "images.zip"
    not_zip.write_text("plain text")
    path, _ = flickr8k_json
    status, *_ = analyze_files.run_safely(analyze_files.correlation_from_files, "correlation", PROFILE,
                                          "flickr8k-expert", [str(path)], [str(not_zip)], ["BLEU-4"])
    assert status.startswith("Could not analyse:")

    status, *_ = analyze_files.run_safely(analyze_files.foil_from_files, "foil", PROFILE, None, None, ["BLEU-4"])
    assert status == "Could not analyse: Upload the FOIL annotation file (foilv1.0_test_2017.json)."

    status, *_ = analyze_files.run_safely(analyze_files.specificity_from_files, "specificity", PROFILE,
                                          [str(path)], None, [])
    assert status == "Could not analyse: Choose at least one metric."


def test_without_images_reference_metrics_still_correlate(flickr8k_json):
    path, _ = flickr8k_json
    outcome = analyze_files.correlation_from_files(PROFILE, "flickr8k-expert", [str(path)], None, ["BLEU-1", "CLIP-S"])
    counts = outcome.table.set_index("metric")["n"]
    assert counts["BLEU-1"] == 5 and counts["CLIP-S"] == 0
    assert outcome.message == ("5 rated captions of flickr8k-expert. "
                               "No scores for CLIP-S (image metrics need the images zip).")


def test_zip_members_cannot_escape_the_upload_folder(tmp_path):
    evil = _zip(tmp_path / "evil.zip", {"../../outside.txt": b"x"})
    status, *_ = analyze_files.run_safely(analyze_files.pascal50s_from_files, "pascal50s", PROFILE,
                                          [str(evil)], None, ["BLEU-4"])
    assert "unsafe path" in status
    assert not (tmp_path.parent / "outside.txt").exists()


def test_download_is_the_table_as_csv(pascal_files):
    status, table, _, download = analyze_files.run_safely(analyze_files.pascal50s_from_files, "pascal50s", PROFILE,
                                                          pascal_files, None, ["BLEU-1"])
    assert status == "3 pairs."
    pd.testing.assert_frame_equal(pd.read_csv(download), table, check_dtype=False)


def test_rating_set_loader_names_the_problem(tmp_path):
    from scoring.analysis.pipeline import load_rating_set

    with pytest.raises(LookupError, match="unknown rating set 'flickr30k'"):
        load_rating_set("flickr30k", tmp_path)
    with pytest.raises(FileNotFoundError, match="capeval1k: no such file"):
        load_rating_set("capeval1k", tmp_path / "missing.json")


def test_length_analysis_counts_words_when_no_token_column():
    from scoring.analysis.length import length_bucket_table
    from scoring.analysis.pipeline import length_analysis

    table = pd.DataFrame({"candidate": ["a b", "a b c", "a " * 30, "a " * 45],
                          "human": [1.0, 2.0, 3.0, 4.0], "M": [0.1, 0.3, 0.2, 0.4]})
    result = length_analysis(table, ["M"], edges=[0, 20, 100])
    expected = length_bucket_table(table.assign(n_tokens=[2, 3, 30, 45]), ["M"], edges=[0, 20, 100])
    pd.testing.assert_frame_equal(result, expected)
    assert "n_tokens" not in table.columns  # the caller's table is left as it was


CHROMIUM = "/usr/bin/chromium"


@pytest.mark.browser
@pytest.mark.skipif(not __import__("os").path.exists(CHROMIUM), reason="Debian chromium not installed")
def test_browser_pascal50s_upload_shows_the_table(server, pascal_files, artifacts):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(server.url)
            page.get_by_role("tab", name="Analyze").click()
            page.locator("#analyze-files").get_by_text("Analyse from files").first.click()
            page.get_by_role("tab", name="Pascal-50S").click()
            page.locator("#files-pascal50s-upload input[type=file]").set_input_files(pascal_files)
            page.wait_for_selector("#files-pascal50s-upload td.filename[aria-label='consensus_pascal.mat']")
            page.locator("#files-pascal50s-button").click()
            page.wait_for_function(
                "() => document.querySelector('#files-pascal50s-status textarea')?.value.includes('3 pairs')")
            table = page.locator("#files-pascal50s-table").inner_text()
            assert "BLEU-1" in table and "HC" in table and "MM" in table
            page.screenshot(path=str(artifacts / "analyze-from-files.png"), full_page=True)
        finally:
            browser.close()
