"""The library calls behind the researcher tabs (Analyze, Failure cases, Data, saving from the
Perturbation lab) on the seeded collection, acting as logged-in accounts, tiny scorer."""
from __future__ import annotations

import csv
import re
import os
import io
import json
import zipfile

import pytest
from scipy.stats import rankdata

from annotation.people.acting import acting
from annotation.people.auth_sessions import log_in
from annotation.scores.collection_analysis import analyse_collection, collection_failure_cases, collection_scores_for
from annotation.transfer.transfers import export_download, finetune_download, import_upload
from scoring.analysis.report import ANY, UNMOVED, CorrelationFilters, correlation_cells, filter_cases, robustness_cells
from scoring.api import get_scorer

METRICS = ["CLIP-S", "BLEU-1", "MCS"]


@pytest.fixture(scope="module")
def researcher(server):
    return log_in(*server.researcher, None).account.id


@pytest.fixture(scope="module")
def table(server, researcher):
    return collection_scores_for(researcher, server.collection, get_scorer(server.ctx.profile), METRICS)


def test_collection_table_joins_human_scores_and_real_metric_scores(server, table):
    from scoring.api import ScoreItem, get_scorer

    originals = table[table["kind"] == "candidate"].set_index("candidate")
    assert originals.loc["a red square on a white table", "human"] == pytest.approx(0.85)
    assert set(table[table["kind"] == "perturbed"]["op"]) == {"repetition", "removal", "masking", "jumble"}
    # what the summary's language notes read: each metric's languages and whether it counts words
    assert table.attrs["metric_languages"]["CLIP-S"] == {"languages": ("en",), "one_word": ()}
    assert table.attrs["metric_languages"]["BLEU-1"] == {"languages": ("en",), "one_word": ("ja", "zh", "th")}
    row = table.iloc[0]
    direct = get_scorer(server.ctx.profile).score(
        [ScoreItem(image=row["image_file"], candidate=row["candidate"], references=row["references"].split("\n"),
                   lang=row["lang"])], ["CLIP-S", "BLEU-1"])
    assert row["CLIP-S"] == pytest.approx(direct["CLIP-S"].values[0], abs=1e-6)
    assert row["BLEU-1"] == pytest.approx(direct["BLEU-1"].values[0], abs=1e-6)


def test_annotators_cannot_read_collection_scores(server):
    annotator = log_in(*server.annotator, None).account.id
    scorer = get_scorer(server.ctx.profile)
    with pytest.raises(PermissionError):
        collection_scores_for(annotator, server.collection, scorer, METRICS)
    with pytest.raises(PermissionError, match="Log in"):
        collection_scores_for(None, server.collection, scorer, METRICS)


def test_correlation_and_robustness_report(server, researcher, table):
    report = analyse_collection(researcher, server.collection, get_scorer(server.ctx.profile), METRICS, CorrelationFilters(n_boot=50))
    shown = correlation_cells(report.correlations)
    assert set(shown["metric"]) <= set(METRICS) and (shown["n"] == 3).all()
    assert shown["Kendall τc"].str.match(r"^-?\d\.\d{3} \[").all()
    assert re.fullmatch(r"7 captions, [3-7] with human ratings\.", report.summary)  # other tests rate too
    formatted = robustness_cells(report.robustness)
    assert {"Original", "Repetition", "Removal", "Masking", "Jumble", "Average"} <= set(formatted.columns)
    clip = report.robustness[report.robustness["metric"] == "CLIP-S"].iloc[0]
    original = table[table["candidate"] == "a red square on a white table"]["CLIP-S"].iloc[0]
    assert clip["original"] == pytest.approx(original)


def test_failure_cases_rank_disagreement_and_unmoved_perturbations(server, researcher):
    scorer = get_scorer(server.ctx.profile)
    cases = collection_failure_cases(researcher, server.collection, scorer, ["BLEU-1", "CLIP-S"],
                                     "metric and humans disagree")
    assert set(cases["metric"]) == {"BLEU-1", "CLIP-S"}
    for metric in ("BLEU-1", "CLIP-S"):  # one row per rated caption and metric: the 3 seeded, at least
        ids = cases.loc[cases["metric"] == metric, "caption_id"].tolist()
        assert len(ids) == len(set(ids)) and set(server.caption_ids.values()) <= set(ids)
    # rank gap = percentile rank of the metric minus that of the humans, among the captions of
    # one language (ties share their mean rank), recomputed here with scipy
    for _, group in cases.groupby(["metric", "lang"]):
        expected = (rankdata(group["metric score"].astype(float)) - rankdata(group["human"].astype(float))) / len(group)
        assert group["rank gap"].astype(float).tolist() == pytest.approx(expected.tolist())
    gaps = cases["rank gap"].abs().tolist()
    assert gaps == sorted(gaps, reverse=True)
    moved = collection_failure_cases(researcher, server.collection, scorer, ["CLIP-S"], UNMOVED)
    assert len(moved) == 4 and set(moved["op"]) == {"repetition", "removal", "masking", "jumble"}
    changes = moved["change %"].abs().tolist()
    assert changes == sorted(changes)  # barely moved: the smallest absolute change first
    picked = filter_cases(moved, "CLIP-S", ANY, "masking", 200)
    assert list(picked["op"]) == ["masking"]


def test_export_ratings_and_build_a_finetuning_set(server, researcher, tmp_path):
    path, summary = export_download(researcher, "ratings", "csv", server.collection, tmp_path)
    rows = list(csv.DictReader(open(path, encoding="utf-8")))
    assert summary["rows"] == len(rows) >= 6
    assert summary["path"] == "ratings.csv"  # the download's name, not a server path
    assert server.xss in {row["caption"] for row in rows}
    bundle, manifest = finetune_download(researcher, "prmcs", "jsonl", server.collection, 0, tmp_path)
    assert manifest["rows"] == 4
    with zipfile.ZipFile(bundle) as archive:
        assert "manifest.json" in archive.namelist()
    hf, _ = export_download(researcher, "captions", "hf", server.collection, tmp_path)
    with zipfile.ZipFile(hf) as archive:
        assert "dataset_info.json" in archive.namelist()
    # Only the downloads are left in the folder: the working files (the set's folder, the
    # dataset's folder and its Parquet shards) are gone.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["captions.zip", "prmcs-set.zip", "ratings.csv"]


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

    good = [{"image": "blue.png", "caption": "a blue square"}, {"image": "blue.png", "caption": "a blue tile"}]
    bad = good + [{"image": "blue.png"}, {"image": "missing.png", "caption": "nothing"}]
    with pytest.raises(ValueError, match="nothing written") as rejected:
        import_upload(researcher, str(_bundle(tmp_path, bad, "bad.zip")), "imported-bad", "auto")
    assert "line 3: caption text is empty" in str(rejected.value) and "line 4" in str(rejected.value)
    report = import_upload(researcher, str(_bundle(tmp_path, good, "good.zip")), "imported-good", "auto")
    assert report["collection"] == "imported-good" and report["counts"]["captions"] == 2
    with acting(researcher) as (session, user):
        names = {c.name for c in list_collections(session, user)}
    assert "imported-good" in names and "imported-bad" not in names
    annotator = log_in(*server.annotator, None).account.id
    with pytest.raises(PermissionError):
        import_upload(annotator, str(_bundle(tmp_path, good, "again.zip")), "imported-by-annotator", "auto")


def test_pick_an_image_from_a_collection(server, researcher):
    from annotation.lab import collection_images

    images = collection_images(researcher, server.collection)
    assert len(images) == 3
    texts = {c for entry in images.values() for c in entry["captions"]}
    assert {"a red square on a white table", server.xss, "a green field"} <= texts
    assert all(entry["references"] == ["a photo of a square"] for entry in images.values())
    assert {entry["language"] for entry in images.values()} == {"en"}
    assert all(os.path.isfile(entry["file"]) for entry in images.values())


def test_perturbation_lab_saves_original_critical_objects_and_perturbations(server, researcher, image_file):
    from annotation.lab import save_perturbations
    from annotation.captions import get_caption
    from annotation.studies.tasks import critical_objects
    from app.perturb_lab import perturb_caption

    text = "a man in a white shirt rides a brown horse"
    critical = ["white shirt", "brown horse"]
    perturbations = perturb_caption(text, "all", 0.4, 1, "en", critical)
    message = save_perturbations(researcher, image_file.read_bytes(), "red.png", text, "en", perturbations,
                                 "lab-saved", critical)
    parent_id = int(message.split("caption ")[1].split()[0])
    with acting(researcher) as (session, _):
        assert get_caption(session, parent_id).text == text
        assert critical_objects(session, parent_id) == critical
        children = [c for c in get_caption(session, parent_id).image.captions if c.parent_id == parent_id]
        assert sorted(c.perturbation_op for c in children) == sorted(p.op for p in perturbations if not p.noop)
    with pytest.raises(PermissionError):
        save_perturbations(log_in(*server.annotator, None).account.id, image_file.read_bytes(), "red.png", text, "en",
                           perturbations, "lab-saved", None)


def test_annotate_queue_screens_as_a_fresh_annotator(server):
    from annotation.studies import queue_screens as qs
    from annotation.people.accounts import create_user
    from annotation.database import database_session
    from annotation.studies.tasks import CRITICAL_INSTRUCTIONS

    with database_session() as session:
        create_user(session, "queue-tester", "annotator", "queue-tester-password")
    me = log_in("queue-tester", "queue-tester-password", None).account.id
    first = qs.rating_screen(me, server.collection)
    assert first.caption_id is not None and first.progress.startswith("You rated 0 of 7 items")
    second = qs.rate_and_next(me, server.collection, first.caption_id, 0.8, None, 0.4)
    assert second.message == f"Saved rating of caption {first.caption_id}."
    assert second.caption_id not in (None, first.caption_id) and second.progress.startswith("You rated 1 of 7")
    again = qs.rating_screen(me, server.collection, first.caption_id)  # going back shows my values
    assert (again.values["overall"], again.values["relevance"], again.values["fluency"]) == (0.8, 0.4, None)
    third = qs.skip_rating(me, server.collection, second.caption_id)
    assert third.message == f"Skipped caption {second.caption_id}."
    assert third.caption_id not in (first.caption_id, second.caption_id)
    assert qs.rating_screen(me, server.collection).caption_id == third.caption_id  # the skipped one stays away
    with pytest.raises(PermissionError, match="Log in first"):
        qs.rating_screen(None, server.collection)
    with pytest.raises(ValueError, match="No caption loaded"):
        qs.rate_and_next(me, server.collection, None, 0.5)

    critical = qs.critical_screen(me, server.collection)
    assert critical.instructions == CRITICAL_INSTRUCTIONS and critical.caption_id is not None
    with pytest.raises(ValueError, match="not a word of the caption"):
        qs.mark_and_next(me, server.collection, critical.caption_id, "unicorn")
    with pytest.raises(ValueError, match="outside the caption"):
        qs.mark_and_next(me, server.collection, critical.caption_id, ["0:9999"])
    word, span = critical.words[-1]  # clicked words come as "start:end" character spans
    assert qs.mark_and_next(me, server.collection, critical.caption_id, [span]).message == "Saved."

    with database_session() as session:  # blind overlap: transcreation offers captions one has rated
        from annotation.people.accounts import get_user
        from annotation.studies.tasks import own_rating, submit_rating

        tester = get_user(session, "queue-tester")
        if own_rating(session, tester, server.caption_ids["a green field"]) is None:
            submit_rating(session, tester, server.caption_ids["a green field"], 0.6)
    task = qs.transcreation_screen(me, server.collection, "de")
    assert task.caption_id is not None and task.references == ["a photo of a square"]
    assert 0.0 <= task.source_score <= 1.0
    after = qs.transcreate_and_next(me, server.collection, "de", task.caption_id, "ein Satz")
    assert after.message.startswith("Saved.") and after.caption_id != task.caption_id
