"""Researcher tabs (Analyze, Failure cases, Data) on the seeded collection, tiny scorer."""
from __future__ import annotations

import csv
import os
import io
import json
import zipfile

import pytest

from app.collection_scores import collection_table
from app.tabs import analyze, data, failures
from app.tabs.annotate import login

METRICS = ["CLIP-S", "BLEU-1", "MCS"]


@pytest.fixture(scope="module")
def researcher(server):
    state, message = login(*server.researcher)
    assert state is not None, message
    return state


@pytest.fixture(scope="module")
def table(server, researcher):
    return collection_table(server.ctx.profile, researcher, server.collection, METRICS)


def test_collection_table_joins_human_scores_and_real_metric_scores(server, table):
    from scoring.api import ScoreItem, get_scorer

    originals = table[table["kind"] == "candidate"].set_index("candidate")
    assert originals.loc["a red square on a white table", "human"] == pytest.approx(0.85)
    assert set(table[table["kind"] == "perturbed"]["op"]) == {"repetition", "removal", "masking", "jumble"}
    row = table.iloc[0]
    direct = get_scorer(server.ctx.profile).score(
        [ScoreItem(image=row["image_file"], candidate=row["candidate"], references=row["references"].split("\n"),
                   lang=row["lang"])], ["CLIP-S", "BLEU-1"])
    assert row["CLIP-S"] == pytest.approx(direct["CLIP-S"].values[0], abs=1e-6)
    assert row["BLEU-1"] == pytest.approx(direct["BLEU-1"].values[0], abs=1e-6)


def test_annotators_cannot_read_collection_scores(server):
    state, _ = login(*server.annotator)
    with pytest.raises(PermissionError):
        collection_table(server.ctx.profile, state, server.collection, METRICS)
    with pytest.raises(PermissionError, match="Log in"):
        collection_table(server.ctx.profile, None, server.collection, METRICS)


def test_correlation_and_robustness_views(table):
    shown, numeric = analyze.correlation_view(table, METRICS, n_boot=50)
    assert set(shown["metric"]) <= set(METRICS) and (shown["n"] == 3).all()
    assert shown["Kendall τc"].str.match(r"^-?\d\.\d{3} \[").all()
    formatted, robust = analyze.robustness_view(table, METRICS)
    assert {"Original", "Repetition", "Removal", "Masking", "Jumble", "Average"} <= set(formatted.columns)
    clip = robust[robust["metric"] == "CLIP-S"].iloc[0]
    original = table[table["candidate"] == "a red square on a white table"]["CLIP-S"].iloc[0]
    assert clip["original"] == pytest.approx(original)


def test_failure_cases_rank_disagreement_and_unmoved_perturbations(table):
    cases = failures.disagreements(table, ["BLEU-1", "CLIP-S"])
    assert set(cases["metric"]) <= {"BLEU-1", "CLIP-S"}
    gaps = cases["rank gap"].abs().tolist()
    assert gaps == sorted(gaps, reverse=True)
    moved = failures.unmoved(table, ["CLIP-S"])
    assert len(moved) == 4 and set(moved["op"]) == {"repetition", "removal", "masking", "jumble"}
    changes = moved["change %"].tolist()
    assert changes == sorted(changes, reverse=True)
    picked = failures.filter_rows(moved, "CLIP-S", failures.ANY, "masking")
    assert list(picked["op"]) == ["masking"]


def test_export_ratings_and_build_a_finetuning_set(server, researcher):
    path, summary = data.export_download(researcher, "ratings", "csv", server.collection)
    rows = list(csv.DictReader(open(path, encoding="utf-8")))
    assert summary["rows"] == len(rows) >= 6
    assert server.xss in {row["caption"] for row in rows}
    bundle, manifest = data.finetune_download(researcher, "prmcs", "jsonl", server.collection, 0)
    assert manifest["rows"] == 4
    with zipfile.ZipFile(bundle) as archive:
        assert "manifest.json" in archive.namelist()


def _bundle(tmp_path, rows, name):
    image = io.BytesIO()
    from PIL import Image

    Image.new("RGB", (16, 16), (10, 120, 200)).save(image, format="PNG")
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("blue.png", image.getvalue())
        archive.writestr("manifest.jsonl", "\n".join(json.dumps(r) for r in rows))
    return path


def test_import_is_all_or_nothing_and_annotators_cannot_import(server, researcher, tmp_path):
    from annotation.captions import list_collections
    from app.tabs.annotate import _db, acting_user

    good = [{"image": "blue.png", "caption": "a blue square"}, {"image": "blue.png", "caption": "a blue tile"}]
    bad = good + [{"image": "blue.png"}, {"image": "missing.png", "caption": "nothing"}]
    with pytest.raises(ValueError, match="nothing written") as rejected:
        data.import_upload(researcher, str(_bundle(tmp_path, bad, "bad.zip")), "imported-bad", "auto")
    assert "line 3: caption text is empty" in str(rejected.value) and "line 4" in str(rejected.value)
    report = data.import_upload(researcher, str(_bundle(tmp_path, good, "good.zip")), "imported-good", "auto")
    assert report["collection"] == "imported-good" and report["counts"]["captions"] == 2
    with _db() as session:
        names = {c.name for c in list_collections(session, acting_user(session, researcher))}
    assert "imported-good" in names and "imported-bad" not in names
    annotator, _ = login(*server.annotator)
    with pytest.raises(PermissionError):
        data.import_upload(annotator, str(_bundle(tmp_path, good, "again.zip")), "imported-by-annotator", "auto")


def test_pick_an_image_from_a_collection(server, researcher):
    from app.tabs.score import collection_images

    images = collection_images(researcher, server.collection)
    assert len(images) == 3
    texts = {c for entry in images.values() for c in entry["captions"]}
    assert {"a red square on a white table", server.xss, "a green field"} <= texts
    assert all(entry["references"] == ["a photo of a square"] for entry in images.values())
    assert all(os.path.isfile(entry["file"]) for entry in images.values())


def test_perturbation_lab_saves_original_critical_objects_and_perturbations(server, researcher, image_file):
    from annotation.captions import get_caption
    from annotation.tasks import critical_objects
    from app.tabs.annotate import _db
    from app.tabs.perturb import run_perturbations, save_to_collection
    from app.tabs.score import load_images

    images, _ = load_images([str(image_file)])
    text = "a man in a white shirt rides a brown horse"
    critical = ["white shirt", "brown horse"]
    perturbations = run_perturbations(text, "all", 0.4, 1, "en", critical)
    message = save_to_collection(researcher, images[0], text, "en", perturbations, "lab-saved", critical)
    parent_id = int(message.split("caption ")[1].split()[0])
    with _db() as session:
        assert get_caption(session, parent_id).text == text
        assert critical_objects(session, parent_id) == critical
        children = [c for c in get_caption(session, parent_id).image.captions if c.parent_id == parent_id]
        assert sorted(c.perturbation_op for c in children) == sorted(p.op for p in perturbations if not p.noop)
    annotator, _ = login(*server.annotator)
    with pytest.raises(PermissionError):
        save_to_collection(annotator, images[0], text, "en", perturbations, "lab-saved", None)
