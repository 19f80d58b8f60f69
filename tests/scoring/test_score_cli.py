"""`caplens score`: JSON formats of the CLIPScore / PAC-S command lines, output, errors."""
from __future__ import annotations

import json
import re

import pytest

from app.cli import main


@pytest.fixture
def inputs(tmp_path, tiny_dir, make_image):
    folder = tmp_path / "images"
    folder.mkdir()
    for i, name in enumerate(["cat1", "dog2", "car3"]):
        make_image(i).save(folder / f"{name}.png" if i != 1 else folder / f"{name}.jpg")
    candidates = {"cat1": "a cat on a mat", "dog2": "a dog on the grass", "car3": "a red car"}
    references = {"cat1": ["a cat sitting on a mat"], "dog2": ["a dog", "dog on grass"], "car3": ["a red car parked"]}
    (tmp_path / "cands.json").write_text(json.dumps(candidates))
    (tmp_path / "refs.json").write_text(json.dumps(references))
    return tmp_path, folder


def _run(capsys, *argv):
    code = main(["score", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_prints_one_line_per_requested_metric(inputs, capsys):
    root, images = inputs
    code, out, err = _run(capsys, root / "cands.json", images, "--profile", "tiny", "--metrics", "clip-s,REFCLIP-S,pac-s",
                          "--references", root / "refs.json", "--out", root / "per_item.json")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["CLIP-S", "RefCLIP-S", "PAC-S"]
    assert all(re.fullmatch(r"[\w-]+: \d+\.\d{4}", line) for line in lines)
    per_item = json.loads((root / "per_item.json").read_text())
    assert set(per_item["items"]) == {"cat1", "dog2", "car3"}
    assert set(per_item["items"]["cat1"]) == {"CLIP-S", "RefCLIP-S", "PAC-S"}
    values = [per_item["items"][k]["CLIP-S"] for k in ("cat1", "dog2", "car3")]
    assert float(lines[0].split(": ")[1]) == pytest.approx(sum(values) / 3, abs=5e-5)


def test_without_references_only_reference_free_metrics_run(inputs, capsys):
    root, images = inputs
    code, out, _ = _run(capsys, root / "cands.json", images, "--profile", "tiny", "--metrics", "CLIP-S,UMIC-C,MCS", "--lang", "de")
    assert code == 0 and [l.split(":")[0] for l in out.strip().splitlines()] == ["CLIP-S", "MCS", "UMIC-C"]
    code, out, err = _run(capsys, root / "cands.json", images, "--profile", "tiny", "--metrics", "BLEU-4")
    assert code == 2 and "need references" in err


@pytest.mark.java
def test_ngram_names_and_unavailable_lines(inputs, capsys, java):
    root, images = inputs
    code, out, _ = _run(capsys, root / "cands.json", images, "--profile", "tiny", "--references", root / "refs.json",
                        "--metrics", "bleu-1,bleu-4,rouge-l,cider,spice")
    assert code == 0
    names = [l.split(":")[0] for l in out.strip().splitlines()]
    assert names == ["BLEU-1", "BLEU-4", "ROUGE-L", "CIDEr", "SPICE"]


@pytest.mark.parametrize("problem,message", [
    ("missing-image", "no image for id 'ghost'"),
    ("bad-json", "not valid JSON"),
    ("ids-mismatch", "do not match the candidates"),
    ("unknown-metric", "unknown metric 'BLEURT'"),
    ("no-image-dir", "IMAGE_DIR is not a folder"),
    ("wrong-shape", "expected {\"image_id\": \"caption\""),
])
def test_bad_inputs_give_one_error_line_and_exit_2(inputs, capsys, problem, message):
    root, images = inputs
    cands, refs, image_dir, extra = root / "cands.json", None, images, []
    if problem == "missing-image":
        cands = root / "ghost.json"
        cands.write_text(json.dumps({"ghost": "a ghost"}))
    elif problem == "bad-json":
        cands = root / "broken.json"
        cands.write_text("{not json")
    elif problem == "ids-mismatch":
        refs = root / "refs2.json"
        refs.write_text(json.dumps({"cat1": ["x"], "dog2": ["y"], "zebra": ["z"]}))
    elif problem == "unknown-metric":
        extra = ["--metrics", "clip-s,BLEURT"]
    elif problem == "no-image-dir":
        image_dir = root / "nowhere"
    elif problem == "wrong-shape":
        cands = root / "list.json"
        cands.write_text(json.dumps(["a", "b"]))
    argv = [cands, image_dir, "--profile", "tiny", *extra] + (["--references", refs] if refs else [])
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err


def test_long_runs_show_a_progress_bar(tmp_path, tiny_dir, make_image, capsys):
    folder = tmp_path / "many"
    folder.mkdir()
    candidates = {}
    for i in range(40):
        make_image(100 + i, size=(32, 32)).save(folder / f"im{i}.png")
        candidates[f"im{i}"] = f"caption number {i}"
    (tmp_path / "many.json").write_text(json.dumps(candidates))
    code, out, err = _run(capsys, tmp_path / "many.json", folder, "--profile", "tiny", "--metrics", "CLIP-S,PAC-S")
    assert code == 0 and len(out.strip().splitlines()) == 2
    assert "metric" in err and "\r" in err  # tqdm's bar on stderr
