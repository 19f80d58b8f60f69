"""Analyze from files (Analyze tab): what the tab adds to `scoring.analysis.run` (tested in
tests/analysis/test_run_analysis.py): uploads copied or unzipped into a folder, bad uploads as
a status line and the CSV download (the whole flow in a real browser:
test_app_analyze_files_browser.py)."""
from __future__ import annotations

import io
import json
import os
import re
import tempfile
import zipfile

import pandas as pd
import pytest
from PIL import Image

from app.tabs import analyze_files
from tests.benchmark_files import write_pascal50s

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


@pytest.fixture
def flickr8k_upload(tmp_path):
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


@pytest.fixture
def pascal_files(tmp_path):
    """pair_pascal.mat and consensus_pascal.mat as two uploads, three judgements per pair."""
    pairs = [("img0.jpg", "a man rides a horse", "a person"), ("img1.jpg", "two dogs", "two dogs playing in a park"),
             ("img2.jpg", "a red bus", "bus bus")]
    references = [["a man rides a horse on a beach"] * 3, ["two dogs playing in a park"] * 3,
                  ["a red bus on the street"] * 3]
    folder = write_pascal50s(tmp_path / "pascal", pairs, [1, 3, 4], [[1, 1, 2], [2, 2, 2], [1, 1, 1]], references)
    return [str(folder / "pair_pascal.mat"), str(folder / "consensus_pascal.mat")]


def test_images_zip_is_unpacked_for_the_image_metrics(flickr8k_upload):
    path, images = flickr8k_upload
    without = analyze_files.correlation_from_files(PROFILE, "flickr8k-expert", [str(path)], None, ["BLEU-1", "CLIP-S"])
    assert without.table.set_index("metric")["n"].to_dict() == {"BLEU-1": 5, "CLIP-S": 0}
    assert without.message == ("5 rated captions of flickr8k-expert. "
                               "No scores for CLIP-S (image metrics need the images).")
    with_images = analyze_files.correlation_from_files(PROFILE, "flickr8k-expert", [str(path)], [str(images)],
                                                       ["CLIP-S"])
    assert with_images.table.set_index("metric").loc["CLIP-S", "n"] == 5
    assert with_images.message == "5 rated captions of flickr8k-expert."
    assert with_images.figure is not None


def test_two_files_and_their_zip_are_the_same_upload(pascal_files, tmp_path):
    separate = analyze_files.pascal50s_from_files(PROFILE, pascal_files, None, ["BLEU-1"])
    zipped = _zip(tmp_path / "pascal.zip", {os.path.basename(name): open(name, "rb").read() for name in pascal_files})
    together = analyze_files.pascal50s_from_files(PROFILE, [str(zipped)], None, ["BLEU-1"])
    pd.testing.assert_frame_equal(together.table, separate.table)
    row = separate.table.set_index("metric").loc["BLEU-1"]
    assert (row["HC"], row["HM"], row["MM"], row["n"]) == (1.0, 1.0, 1.0, 3)


def test_bad_files_give_a_clear_status(tmp_path, flickr8k_upload):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    status, table, figure, download = analyze_files.run_safely(
        analyze_files.correlation_from_files, "correlation", PROFILE, "flickr8k-expert", [str(broken)], None, ["BLEU-4"])
    assert status.startswith("Could not analyze:") and "JSON" in status.upper()
    assert table is None and download is None

    status, *_ = analyze_files.run_safely(analyze_files.pascal50s_from_files, "pascal50s", PROFILE,
                                          [str(broken)], None, ["BLEU-4"])
    assert status.startswith("Could not analyze:")

    not_zip = tmp_path / "images.zip"
    not_zip.write_text("plain text")
    path, _ = flickr8k_upload
    status, *_ = analyze_files.run_safely(analyze_files.correlation_from_files, "correlation", PROFILE,
                                          "flickr8k-expert", [str(path)], [str(not_zip)], ["BLEU-4"])
    assert status.startswith("Could not analyze:")

    status, *_ = analyze_files.run_safely(analyze_files.foil_from_files, "foil", PROFILE, None, None, ["BLEU-4"])
    assert status == "Could not analyze: Upload the FOIL annotation file (foilv1.0_test_2017.json)."

    status, *_ = analyze_files.run_safely(analyze_files.specificity_from_files, "specificity", PROFILE,
                                          [str(path)], None, [])
    assert status == "Could not analyze: Choose at least one metric."

    status, *_ = analyze_files.run_safely(analyze_files.retrieval_from_files, "retrieval", PROFILE, [str(path)], None,
                                          "CLIP-S")
    assert status == "Could not analyze: Upload a zip of the COCO images the meta file names."


def test_zip_members_cannot_escape_the_upload_folder(tmp_path):
    evil = _zip(tmp_path / "evil.zip", {"../../outside.txt": b"x"})
    status, *_ = analyze_files.run_safely(analyze_files.pascal50s_from_files, "pascal50s", PROFILE,
                                          [str(evil)], None, ["BLEU-4"])
    assert "evil.zip: refuses the member '../../outside.txt': its path leaves the archive's folder" in status
    assert not (tmp_path.parent / "outside.txt").exists()


def test_download_is_the_table_as_csv(pascal_files, tmp_path, monkeypatch):
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio-cache"))
    status, table, _, download = analyze_files.run_safely(analyze_files.pascal50s_from_files, "pascal50s", PROFILE,
                                                          pascal_files, None, ["BLEU-1"])
    assert status == "3 pairs, accuracy averaged over 5 draw(s) of 5 references."
    pd.testing.assert_frame_equal(pd.read_csv(download), table, check_dtype=False)
    # Written where Gradio serves it without copying, and its cache sweep removes it.
    assert os.path.dirname(os.path.dirname(download)) == str(tmp_path / "gradio-cache")


def test_a_zip_bomb_is_refused_and_no_upload_folder_is_left_behind(pascal_files, flickr8k_upload, tmp_path,
                                                                    monkeypatch):
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio-cache"))
    (tmp_path / "bomb").mkdir()
    bomb = tmp_path / "bomb" / "images.zip"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("Flicker8k_Dataset/1000_aa.jpg", b"\0" * (32 << 20))
    path, images = flickr8k_upload
    status, table, _, download = analyze_files.run_safely(
        analyze_files.correlation_from_files, "correlation", PROFILE, "flickr8k-expert", [str(path)], [str(bomb)],
        ["BLEU-1"])
    assert status.startswith("Could not analyze: images.zip: member 'Flicker8k_Dataset/1000_aa.jpg' unpacks")
    assert "zip bomb" in status and table is None and download is None
    assert list(system_tmp.iterdir()) == []
    zipped = _zip(tmp_path / "pascal.zip", {os.path.basename(name): open(name, "rb").read() for name in pascal_files})
    for files, images_upload in (([str(zipped)], [str(images)]), (pascal_files, [str(images)])):
        status, *_ = analyze_files.run_safely(analyze_files.pascal50s_from_files, "pascal50s", PROFILE, files,
                                              images_upload, ["BLEU-1"])
        assert status == "3 pairs, accuracy averaged over 5 draw(s) of 5 references."
        assert list(system_tmp.iterdir()) == []  # the unpacked uploads and images are gone
    status, *_ = analyze_files.run_safely(analyze_files.pascal50s_from_files, "pascal50s", PROFILE, [str(zipped)],
                                          [str(images)], ["NO-SUCH-METRIC"])
    assert status.startswith("Could not analyze:")
    assert list(system_tmp.iterdir()) == []  # ... also when the measure fails


ABSOLUTE_PATH = re.compile(r"(?<![\w:/.])/(?:[\w.+-]+/)+[\w.+-]+")


def test_status_lines_never_name_a_server_path(tmp_path, flickr8k_upload):
    """Bad uploads and the measures' own messages reach the status box without the folders
    the server unpacked them into (only the names the files themselves use)."""
    path, _ = flickr8k_upload
    half = _zip(tmp_path / "half.zip", {"Flicker8k_Dataset/1000_aa.jpg": _png((150, 90, 40))})
    not_coco_sm = tmp_path / "google.json"
    not_coco_sm.write_text(json.dumps({"en": ["a caption, not an image entry"]}))
    statuses = [
        analyze_files.run_safely(analyze_files.correlation_from_files, "correlation", PROFILE, "flickr8k-expert",
                                 [str(path)], [str(half)], ["CLIP-S"])[0],
        analyze_files.run_safely(analyze_files.length_from_files, "length", PROFILE, "flickr8k-expert",
                                 [str(path)], [str(half)], ["CLIP-S"])[0],
        analyze_files.run_safely(analyze_files.retrieval_from_files, "retrieval", PROFILE, [str(not_coco_sm)],
                                 [str(half)], "CLIP-S")[0],
        analyze_files.run_safely(analyze_files.correlation_from_files, "correlation", PROFILE, "flickr8k-expert",
                                 [str(tmp_path / "gone.json")], None, ["BLEU-1"])[0],
        analyze_files.run_safely(lambda: analyze_files.Outcome(pd.DataFrame({"n": [1]}), None,
                                                              f"CLIP-S: unavailable: no checkpoint in {tmp_path}/clip."),
                                 "measure")[0],
    ]
    assert statuses[0] == statuses[1] == "Could not analyze: image not found: Flicker8k_Dataset/2000_bb.jpg"
    assert statuses[2] == ("Could not analyze: google.json: not a COCO-SM meta file: language 'en' must list "
                           "objects with 'filename' and 'captions'")
    assert statuses[3] == "Could not analyze: flickr8k-expert: no such file or directory: gone.json"
    assert statuses[4] == "CLIP-S: unavailable: no checkpoint in clip."
    for status in statuses:
        assert not ABSOLUTE_PATH.search(status) and str(tmp_path) not in status and "/tmp" not in status, status
