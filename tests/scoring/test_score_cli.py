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
    assert all(re.fullmatch(r"[\w-]+: \d+\.\d{4}( \(.+\))?", line) for line in lines)
    per_item = json.loads((root / "per_item.json").read_text())
    assert set(per_item["items"]) == {"cat1", "dog2", "car3"}
    assert set(per_item["items"]["cat1"]) == {"CLIP-S", "RefCLIP-S", "PAC-S"}
    values = [per_item["items"][k]["CLIP-S"] for k in ("cat1", "dog2", "car3")]
    assert float(lines[0].split(" ")[1]) == pytest.approx(sum(values) / 3, abs=5e-5)
    # the Score tab's notes, by the same rule: here the clipped cosines (the tiny models' zeros)
    zeros = sum(v == 0.0 for v in values)
    assert zeros and lines[0].endswith(f"({zeros} of 3 score(s) are 0: a negative cosine is clipped to 0)")
    assert per_item["metrics"]["CLIP-S"]["note"] == f"{zeros} of 3 score(s) are 0: a negative cosine is clipped to 0"


def test_without_references_only_reference_free_metrics_run(inputs, capsys):
    root, images = inputs
    code, out, _ = _run(capsys, root / "cands.json", images, "--profile", "tiny", "--metrics", "CLIP-S,UMIC-C,MCS", "--lang", "de")
    assert code == 0 and [l.split(":")[0] for l in out.strip().splitlines()] == ["CLIP-S", "MCS", "UMIC-C"]
    # German captions: the English-only metrics say so on their line, as the Score tab does
    clip_line = out.strip().splitlines()[0]
    assert "made for en: 3 of 3 caption(s) are in de" in clip_line
    assert "made for" not in out.strip().splitlines()[1]  # MCS reads German
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


@pytest.mark.java
def test_cider_says_where_its_document_frequencies_come_from_and_when_they_mean_nothing(inputs, capsys, java):
    """As in the app's Score tab: three images give CIDEr-D real IDFs and the line says from
    what; one image alone makes every IDF 0, and the line says the 0 means nothing."""
    from scoring.api import ScoreItem, get_scorer

    root, images = inputs
    code, out, err = _run(capsys, root / "cands.json", images, "--profile", "tiny", "--references", root / "refs.json",
                          "--metrics", "cider", "--out", root / "three.json")
    assert code == 0, err
    assert out.strip().endswith("(document frequencies from this batch: 3 reference set(s))")
    three = json.loads((root / "three.json").read_text())["metrics"]["CIDEr"]
    # The IDF counted once here is the one CIDEr-D counts from the same items itself.
    cands, refs = json.loads((root / "cands.json").read_text()), json.loads((root / "refs.json").read_text())
    alone = get_scorer("tiny").score([ScoreItem(image=None, candidate=cands[k], references=refs[k]) for k in cands],
                                     ["CIDEr"])["CIDEr"]
    assert three["aggregate"] == pytest.approx(alone.aggregate) and three["aggregate"] > 0
    (root / "one.json").write_text(json.dumps({"cat1": "a cat on a mat"}))
    (root / "one_refs.json").write_text(json.dumps({"cat1": ["a cat sitting on a mat"]}))
    code, out, err = _run(capsys, root / "one.json", images, "--profile", "tiny", "--references", root / "one_refs.json",
                          "--metrics", "cider", "--out", root / "one_out.json")
    assert code == 0, err
    assert out.startswith("CIDEr: 0.0000 (not meaningful: document frequencies from the references of one image")
    assert json.loads((root / "one_out.json").read_text())["metrics"]["CIDEr"]["note"].startswith("not meaningful")


@pytest.mark.parametrize("problem,message", [
    ("missing-image", "no image for id 'ghost'"),
    ("bad-json", "not valid JSON"),
    ("ids-mismatch", "do not match the candidates"),
    ("unknown-metric", "unknown metric 'BLEURT'"),
    ("no-image-dir", "IMAGE_DIR is not a folder"),
    ("wrong-shape", "expected {\"image_id\": \"caption\""),
    ("empty-caption", "empty.json row 2: empty caption"),  # scored as 0 before, where the app refuses it
    ("not-an-image", "text.json row 1: text.png: not an image (or a format Pillow cannot read)."),
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
    elif problem == "empty-caption":
        cands = root / "empty.json"
        cands.write_text(json.dumps({"cat1": "a cat", "dog2": "  "}))
    elif problem == "not-an-image":
        (images / "text.png").write_text("plain text")
        cands = root / "text.json"
        cands.write_text(json.dumps({"text": "a caption"}))
    argv = [cands, image_dir, "--profile", "tiny", *extra] + (["--references", refs] if refs else [])
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err


def _image_folder(tmp_path, make_image, count: int, first_seed: int, caption: str, name: str):
    """`count` small images in tmp_path/many and their candidates file tmp_path/NAME."""
    folder = tmp_path / "many"
    folder.mkdir()
    candidates = {}
    for i in range(count):
        make_image(first_seed + i, size=(32, 32)).save(folder / f"im{i}.png")
        candidates[f"im{i}"] = f"{caption} {i}"
    (tmp_path / name).write_text(json.dumps(candidates))
    return folder


def test_long_runs_show_a_progress_bar(tmp_path, tiny_dir, make_image, capsys):
    folder = _image_folder(tmp_path, make_image, 40, 100, "caption number", "many.json")
    code, out, err = _run(capsys, tmp_path / "many.json", folder, "--profile", "tiny", "--metrics", "CLIP-S,PAC-S")
    assert code == 0 and len(out.strip().splitlines()) == 2
    assert "loading models" in err and "80/80" in err and "\r" in err  # tqdm's bar on stderr: 40 captions x 2 metrics


def test_batch_size_gives_the_same_scores_and_a_bar_per_batch(tmp_path, tiny_dir, make_image, capsys):
    folder = _image_folder(tmp_path, make_image, 7, 200, "a picture number", "c.json")
    outputs = {}
    for size in (2, 100):
        code, out, err = _run(capsys, tmp_path / "c.json", folder, "--profile", "tiny", "--metrics", "CLIP-S,MCS",
                              "--batch-size", size, "--out", tmp_path / f"b{size}.json")
        assert code == 0, err
        outputs[size] = (out, json.loads((tmp_path / f"b{size}.json").read_text())["items"])
        assert "14/14" in err
    assert outputs[2][0] == outputs[100][0]
    for key, values in outputs[100][1].items():
        assert outputs[2][1][key] == pytest.approx(values, abs=1e-5)
    code, _, err = _run(capsys, tmp_path / "c.json", folder, "--profile", "tiny", "--batch-size", 0)
    assert code == 2 and "--batch-size must be at least 1" in err


def test_device_is_honoured(inputs, capsys):
    root, images = inputs
    code, out, err = _run(capsys, root / "cands.json", images, "--profile", "tiny", "--metrics", "CLIP-S",
                          "--device", "no-such-device")
    assert code == 2 and "unknown device 'no-such-device'" in err  # the option reaches the scorer
    code, out, err = _run(capsys, root / "cands.json", images, "--profile", "tiny", "--metrics", "CLIP-S",
                          "--device", "cpu", "--quiet")
    assert code == 0 and out.startswith("CLIP-S: ") and err == ""


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_a_device_the_machine_lacks_is_said_before_any_profile_is_tried(inputs, capsys):
    """Without --profile the hub and world profiles are tried on the device; `--device cuda` on a
    CPU machine failed both, and the first line blamed the network ("offline: ... run once with a
    network connection")."""
    root, images = inputs
    code, out, err = _run(capsys, root / "cands.json", images, "--metrics", "CLIP-S", "--device", "cuda")
    assert code == 2 and "offline" not in err and "network" not in err
    assert "device 'cuda' requested but CUDA is not available here" in err


@pytest.mark.parametrize("kind", ["csv", "jsonl", "coco"])
def test_rows_in_csv_jsonl_and_coco_give_the_json_pair_scores(inputs, capsys, kind):
    root, images = inputs
    candidates = json.loads((root / "cands.json").read_text())
    references = json.loads((root / "refs.json").read_text())
    files = {"cat1": "cat1.png", "dog2": "dog2.jpg", "car3": "car3.png"}
    extra = []
    if kind == "csv":
        import csv

        path = root / "rows.csv"
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["id", "image", "candidate", "references"])
            for key, caption in candidates.items():
                writer.writerow([key, files[key], caption, json.dumps(references[key])])
    elif kind == "jsonl":
        path = root / "rows.jsonl"
        path.write_text("\n".join(json.dumps({"id": k, "image": files[k], "candidate": c, "references": references[k]})
                                  for k, c in candidates.items()))
    else:
        ids = {"cat1": 1, "dog2": 2, "car3": 3}
        path = root / "results.json"
        path.write_text(json.dumps([{"image_id": ids[k], "caption": c} for k, c in candidates.items()]))
        annotations = {"images": [{"id": ids[k], "file_name": files[k]} for k in ids] + [{"id": 9, "file_name": "x.png"}],
                       "annotations": [{"image_id": ids[k], "caption": r} for k in ids for r in references[k]]}
        (root / "captions.json").write_text(json.dumps(annotations))
        extra = ["--references", root / "captions.json"]
    metrics = ["--profile", "tiny", "--metrics", "CLIP-S,RefCLIP-S", "--quiet"]
    code, expected, err = _run(capsys, root / "cands.json", images, "--references", root / "refs.json", *metrics)
    assert code == 0, err
    code, out, err = _run(capsys, path, images, *extra, *metrics)
    assert code == 0, err
    assert out == expected and "RefCLIP-S: " in out



def test_without_a_profile_it_falls_back_to_world_with_the_serve_message(inputs, capsys, monkeypatch):
    from app.engine import choose_profile as serve_choice

    root, images = inputs
    monkeypatch.delenv("CAPLENS_PROFILE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the hub checkpoints cannot be fetched
    code, out, err = _run(capsys, root / "cands.json", images, "--metrics", "CLIP-S", "--quiet",
                          "--out", root / "fallback.json")
    assert code == 0, err
    assert json.loads((root / "fallback.json").read_text())["profile"] == "world"
    assert "caplens score: offline: using the world models: the hub checkpoints could not be loaded" in err
    assert "--profile NAME or the CAPLENS_PROFILE environment variable" in err
    assert "ConnectError" not in err and "LocalEntryNotFound" not in err
    served = serve_choice(None)
    assert served.profile == "world" and served.banner.startswith("**offline: using the world models**")
    # `caplens serve` prints the very words `caplens score` printed
    assert f"caplens score: {served.console}" in err


def test_what_the_models_left_alive_is_frozen_before_the_first_batch(inputs, capsys, monkeypatch):
    """A full garbage collection walks every tracked object (0.19 s in a scoring process on 2
    cores): the loaded models are frozen out of it once, after loading and before any batch."""
    import scoring.api

    events = []
    real_score = scoring.api.Scorer.score
    monkeypatch.setattr(scoring.api, "freeze_long_lived_objects", lambda: events.append("freeze"))
    monkeypatch.setattr(scoring.api.Scorer, "score",
                        lambda self, *args, **kwargs: events.append("score") or real_score(self, *args, **kwargs))
    root, images = inputs
    code, _, err = _run(capsys, root / "cands.json", images, "--profile", "tiny", "--metrics", "clip-s",
                        "--batch-size", "2")
    assert code == 0, err
    assert events == ["freeze", "score", "score"]


def test_each_caption_is_scored_in_its_detected_language_unless_one_is_given(tmp_path, tiny_dir, make_image, capsys,
                                                                              monkeypatch):
    """As the app: without --lang each caption's language is detected, said on stderr and kept
    in --out; a row's own lang column wins; a code no language has is refused with its row."""
    from scoring.api import Scorer

    scored, real_score = [], Scorer.score
    monkeypatch.setattr(Scorer, "score", lambda self, items, *a, **k: scored.append([i.lang for i in items])
                        or real_score(self, items, *a, **k))
    folder = tmp_path / "images"
    folder.mkdir()
    rows = [("a", "a brown dog runs across the green field", None), ("b", "ein brauner Hund läuft über die grüne Wiese", None),
            ("c", "un chien brun court dans le champ vert", None), ("d", "a brown dog runs across the field", "fr")]
    lines = ["image,candidate,lang"]
    for i, (name, caption, lang) in enumerate(rows):
        make_image(i).save(folder / f"{name}.png")
        lines.append(f"{name}.png,{caption},{lang or ''}")
    (tmp_path / "rows.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, err = _run(capsys, tmp_path / "rows.csv", folder, "--profile", "tiny", "--metrics", "MCS",
                          "--out", tmp_path / "auto.json")
    assert code == 0, err
    assert "caplens score: languages detected: fr 2, en 1, de 1 (--lang CODE sets one for rows without a lang column)" in err
    auto = json.loads((tmp_path / "auto.json").read_text())
    assert list(auto["languages"].values()) == ["en", "de", "fr", "fr"]
    assert scored[-1] == ["en", "de", "fr", "fr"]  # what the metrics were given

    code, out, err = _run(capsys, tmp_path / "rows.csv", folder, "--profile", "tiny", "--metrics", "MCS", "--lang", "DE",
                          "--out", tmp_path / "de.json", "--quiet")
    assert code == 0 and "languages detected" not in err
    assert list(json.loads((tmp_path / "de.json").read_text())["languages"].values()) == ["de", "de", "de", "fr"]
    assert scored[-1] == ["de", "de", "de", "fr"]
    code, _, err = _run(capsys, tmp_path / "rows.csv", folder, "--profile", "tiny", "--lang", "xx")
    assert code == 2 and "caplens score: error: unknown language code 'xx': give a two-letter ISO 639-1 code" in err
    (tmp_path / "typo.csv").write_text("image,candidate,lang\na.png,a dog,english\n", encoding="utf-8")
    code, _, err = _run(capsys, tmp_path / "typo.csv", folder, "--profile", "tiny")
    assert code == 2 and "caplens score: error: typo.csv row 1: unknown language code 'english'" in err


def test_a_missing_image_names_what_was_looked_for(tmp_path):
    """A bare id is looked up with each image extension; a file name as it is ("missing.png.jpg"
    in the message read as if the tool had mangled the name)."""
    from scoring.cli import find_image

    (tmp_path / "cat1.JPG").write_bytes(b"x")
    assert find_image(tmp_path, "cat1") == tmp_path / "cat1.JPG"
    with pytest.raises(FileNotFoundError, match=r"'ghost' .*\(tried ghost and ghost\.jpg/\.png/…\)"):
        find_image(tmp_path, "ghost")
    with pytest.raises(FileNotFoundError, match=r"'ghost\.png' .*\(no file of that name there\)$"):
        find_image(tmp_path, "ghost.png")
