"""Small files in the published formats of the public human-judgment sets, written per test."""
from __future__ import annotations

import csv
import json

import pytest

from tests.benchmark_files import write_pascal50s


@pytest.fixture
def flickr8k_json(tmp_path):
    """CLIPScore download.py layout; one NaN rating that loaders must skip."""
    data = {
        "1000_aa": {
            "image_id": "1000_aa",
            "image_path": "Flicker8k_Dataset/1000_aa.jpg",
            "ground_truth": ["a dog  runs", "a brown dog"],
            "human_judgement": [
                {"caption": "a dog is running", "rating": 4.0, "image_id": "1000_aa"},
                {"caption": "a dog is running", "rating": 3.0, "image_id": "1000_aa"},
                {"caption": "a cat sleeps", "rating": 1.0, "image_id": "1000_aa"},
                {"caption": "a cat sleeps", "rating": float("nan"), "image_id": "1000_aa"},
            ],
        },
        "2000_bb": {
            "image_id": "2000_bb",
            "image_path": "Flicker8k_Dataset/2000_bb.jpg",
            "ground_truth": ["two kids play"],
            "human_judgement": [{"caption": "kids  playing", "rating": 2.0}],
        },
    }
    path = tmp_path / "flickr8k.json"
    # json.dumps writes NaN as the bare token NaN, as Python's json does for the real file.
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def flickr8k_raw(tmp_path):
    """Flickr8k text release: token file, ExpertAnnotations.txt, CrowdFlowerAnnotations.txt."""
    folder = tmp_path / "Flickr8k_text"
    folder.mkdir()
    (folder / "Flickr8k.token.txt").write_text(
        "1000_aa.jpg#0\tA dog runs .\n1000_aa.jpg#1\tA brown dog .\n"
        "2000_bb.jpg#0\tTwo kids play .\n2000_bb.jpg#1\tChildren outside .\n"
    )
    (folder / "ExpertAnnotations.txt").write_text(
        # a caption of another image (kept, 3 rows) and the image's own reference (skipped)
        "1000_aa.jpg\t2000_bb.jpg#0\t1\t1\t2\n1000_aa.jpg\t1000_aa.jpg#1\t4\t4\t4\n"
        "2000_bb.jpg\t1000_aa.jpg#0\t2\t1\t1\n"
    )
    (folder / "CrowdFlowerAnnotations.txt").write_text(
        "1000_aa.jpg\t1000_aa.jpg#1\t1.0\t3\t0\n2000_bb.jpg\t1000_aa.jpg#0\t0.25\t1\t3\n"
    )
    return folder


@pytest.fixture
def composite_dir(tmp_path):
    """Composite AMT result files: ';'-separated with Input./Answer. columns and junk tail lines."""
    folder = tmp_path / "composite"
    folder.mkdir()
    header = ["HITId", "Input.image_url", "Input.text1", "Input.text2", "Input.text3",
              "Answer.Q1Answer", "Answer.Q2Answer", "Answer.Q3Answer"]
    with open(folder / "8k_correctness.csv", "w", newline="") as handle:
        writer = csv.writer(handle, delimiter=";")
        writer.writerow(header)
        writer.writerow(["h1", "http://x.org/flickr8k/1000_aa.jpg", "a dog runs", "a cat", "grass", "5", "1", "2"])
        writer.writerow(["h2", "http://x.org/flickr8k/2000_bb.jpg", "kids play", "a car", "", "4", "2", ""])
        writer.writerow(["", "", "", "", "", "", "", ""])
        writer.writerow(["summary", "", "", "", "", "", "", ""])
    return folder


@pytest.fixture
def capeval_json(tmp_path):
    records = [
        {"imgid": "000000060623", "caption": "a woman sitting at a table", "score": 4.2,
         "fluency": 5.0, "relevance": 4.0, "descriptiveness": 3.6, "model": "AoANet"},
        {"imgid": "000000386164", "caption": "knives on a board", "score": 2.8,
         "fluency": 3.0, "relevance": 3.0, "descriptiveness": 2.4, "model": "BUTD"},
    ]
    path = tmp_path / "capeval1k.json"
    path.write_text(json.dumps(records))
    return path


@pytest.fixture
def m_capeval_csv(tmp_path):
    path = tmp_path / "m_capeval1k.csv"
    path.write_text(
        "image_id,lang,caption,score\n"
        "1,en,a dog runs,4\n1,de,ein Hund rennt,4\n1,ja,犬が走る,4\n2,en,a cat,2\n2,de,eine Katze,2\n2,ja,猫,2\n"
    )
    return path


@pytest.fixture
def pascal_dir(tmp_path):
    """pair_pascal.mat / consensus_pascal.mat in pyCIDErConsensus/, 3 judgements per pair.

    Pair 0 (HC): A wins 2-1.  Pair 1 (HM): B wins 3-0.  Pair 2 (MM): A wins 3-0.
    """
    pairs = [("img0.jpg", "a man rides", "a person on a horse"),
             ("img1.jpg", "two dogs", "a dog and a dog playing"),
             ("img2.jpg", "a red bus", "bus bus")]
    references = [[f"reference {index}-{judge}" for judge in range(3)] for index in range(3)]
    write_pascal50s(tmp_path / "pascal" / "pyCIDErConsensus", pairs, [1, 3, 4], [[1, 1, 2], [2, 2, 2], [1, 1, 1]],
                    references)
    return tmp_path / "pascal"


@pytest.fixture
def foil_json(tmp_path):
    data = {
        "images": [{"id": 5, "file_name": "COCO_val2014_000000000005.jpg"}],
        "annotations": [
            {"id": 11, "image_id": 5, "caption": "A dog on a sofa.", "foil": False,
             "target_word": "ORIG", "foil_word": "ORIG", "foil_id": 1},
            {"id": 12, "image_id": 5, "caption": "A dog lying on a couch.", "foil": False,
             "target_word": "ORIG", "foil_word": "ORIG", "foil_id": 2},
            {"id": 11, "image_id": 5, "caption": "A cat on a sofa.", "foil": True,
             "target_word": "dog", "foil_word": "cat", "foil_id": 3},
            # no original with this id: reconstructed from the words
            {"id": 99, "image_id": 7, "caption": "A bus near a tree.", "foil": True,
             "target_word": "car", "foil_word": "bus", "foil_id": 4},
        ],
    }
    path = tmp_path / "foilv1.0_test_2017.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def coco_sm_meta(tmp_path):
    data = {
        "en": [{"filename": "a.jpg", "captions": ["a dog", "a brown dog"]}, {"filename": "b.jpg", "captions": ["a cat"]}],
        "de": [{"filename": "a.jpg", "captions": ["ein Hund", "ein brauner Hund"]}, {"filename": "b.jpg", "captions": ["eine Katze"]}],
    }
    meta = tmp_path / "meta"
    meta.mkdir()
    path = meta / "google.json"
    path.write_text(json.dumps(data, ensure_ascii=False))
    (meta / "id_mapping.json").write_text(json.dumps({"image2text": {"0": [0, 1], "1": [2]}, "text2image": {"0": 0, "1": 0, "2": 1}}))
    return path
