"""One reader of the CLIPScore / PAC-S JSON format (scoring.clipscore_json), and the three
places that read the format (score rows, analysis tables, imports) agreeing on the same files."""
from __future__ import annotations

import json

import pytest

from annotation.transfer.import_sources import clipscore_rows
from scoring.analysis.datasets import load_candidates_json
from scoring.clipscore_json import clipscore_entries, is_candidates, is_references, references_of
from scoring.corpus.manifest import read_score_rows

CANDIDATES = {"img1": "a dog on grass", "img2": "a cat", "img3": "two birds"}
REFERENCES = {"img1": ["a puppy", "a hound on a lawn"], "img2": "a kitten", "img3": []}
EXPECTED = [("img1", "a dog on grass", ["a puppy", "a hound on a lawn"]), ("img2", "a cat", ["a kitten"]),
            ("img3", "two birds", [])]


def test_entries_references_and_the_shape_tests():
    entries, extra = clipscore_entries({"a": "x", "b": 3, "c": "z"}, {"a": "r", "c": ["s", 4], "d": ["q"]})
    assert [(e.image_id, e.candidate, e.references, e.problem) for e in entries] == [
        ("a", "x", ["r"], None),
        ("b", None, [], "the candidate must be a string"),
        ("c", "z", [], "references must be a list of strings"),
    ]
    assert extra == ["d"]
    assert references_of("one") == ["one"] and references_of(["a", "b"]) == ["a", "b"]
    with pytest.raises(ValueError, match="list of strings"):
        references_of(7)
    assert is_candidates({"a": "x"}) and not is_candidates({}) and not is_candidates({"a": ["x"]})
    assert is_references({"a": ["x"], "b": "y"}) and not is_references({"a": "x"}) and not is_references([["x"]])
    with pytest.raises(ValueError, match='c.json: expected {"image_id": "caption"'):
        clipscore_entries(["a"], name="c.json")
    with pytest.raises(ValueError, match='r.json: expected {"image_id": \\["reference"'):
        clipscore_entries({"a": "x"}, ["r"], references_name="r.json")


def test_score_rows_analysis_tables_and_imports_read_the_same_files_alike(tmp_path):
    candidates, references = tmp_path / "c.json", tmp_path / "r.json"
    candidates.write_text(json.dumps(CANDIDATES))
    references.write_text(json.dumps(REFERENCES))
    images = tmp_path / "images"
    images.mkdir()
    for image_id in CANDIDATES:
        (images / f"{image_id}.png").write_bytes(b"not read here")

    score_rows = read_score_rows([candidates, references])
    assert [(r.image, r.candidate, r.references) for r in score_rows] == EXPECTED
    table = load_candidates_json(candidates, references)
    assert list(zip(table["image_id"], table["candidate"], table["references"])) == EXPECTED
    imported = clipscore_rows(candidates, references, images, "model-x")
    assert [(row["image_id"], row["caption"], row["references"]) for _, row in imported] == EXPECTED
    assert [row["image"] for _, row in imported] == ["img1.png", "img2.png", "img3.png"]


def test_a_candidate_that_is_not_a_string_is_refused_by_each_reader(tmp_path):
    candidates = tmp_path / "c.json"
    candidates.write_text(json.dumps({"img1": "a dog", "img2": ["not", "a caption"]}))
    (tmp_path / "img1.png").write_bytes(b"x")
    (tmp_path / "img2.png").write_bytes(b"x")
    with pytest.raises(ValueError, match="c.json: no candidates"):  # strings and a list: read as references
        read_score_rows([candidates])
    with pytest.raises(ValueError, match="image 'img2': the candidate must be a string"):
        load_candidates_json(candidates)
    rows = clipscore_rows(candidates, None, tmp_path, None)
    assert rows[1] == ("candidate 'img2'", "the candidate must be a string")
    assert rows[0][1]["caption"] == "a dog" and rows[0][1]["references"] == []


def test_score_rows_refuse_references_of_ids_no_candidate_has_and_bad_references(tmp_path):
    """`caplens score` and the Score tab score what they are given: a references file must name
    exactly the candidates' ids, and each id's references must be strings."""
    candidates, references = tmp_path / "c.json", tmp_path / "r.json"
    candidates.write_text(json.dumps(CANDIDATES))
    references.write_text(json.dumps({**REFERENCES, "img9": ["a stray reference"]}))
    with pytest.raises(ValueError) as extra:
        read_score_rows([candidates, references])
    assert str(extra.value) == ("ids of r.json do not match the candidates: "
                                "1 reference id(s) not among the candidates, e.g. ['img9']")
    references.write_text(json.dumps({"img1": ["a puppy"], "img2": ["a kitten", 3], "img3": []}))
    with pytest.raises(ValueError) as bad:
        read_score_rows([references, candidates])  # either order
    assert str(bad.value) == "r.json: references of 'img2' must be a list of strings"
