"""Imports are all or nothing in every format; exports and fine-tuning sets carry everything."""
from __future__ import annotations

import csv
import json
import zipfile

import pytest
from sqlalchemy import func, select

from annotation.captions import add_caption, get_collection
from annotation.image_store import add_image
from annotation.people.accounts import create_user
from annotation.transfer.exporters import export_table, ratings_table
from annotation.transfer.finetune_sets import build_finetune_set
from annotation.transfer.importers import ImportRejected, import_file, import_rows
from annotation.perturbations import perturb_collection
from annotation.scores.score_store import cache_metric_scores
from db.models import Base, Caption, CriticalAnnotation, Image, Rating, User
from db.session import get_engine, session_scope, upgrade

COLORS = [(255, 0, 0), (0, 0, 255), (0, 160, 0), (250, 250, 0)]


def _row_counts(session) -> dict:
    return {name: session.execute(select(func.count()).select_from(table)).scalar()
            for name, table in Base.metadata.tables.items()}


@pytest.fixture
def image_files(tmp_path, make_png):
    folder = tmp_path / "src"
    folder.mkdir()
    for i, color in enumerate(COLORS):
        (folder / f"img{i}.png").write_bytes(make_png(color, (10 + i, 8)))
    (folder / "notes.png").write_text("this is not an image")
    return folder


def _rows():
    return [
        {"image": "img0.png", "image_id": "i0", "caption": "a red square on a white table", "caption_id": "c0",
         "model": "blip", "references": ["a red square", "red block on a table"], "annotator": "x1", "score": 0.8,
         "fluency": 1, "critical_objects": ["red square", "white table"]},
        {"image": "img0.png", "caption": "a red square on a white table", "caption_id": "c0", "annotator": "x2",
         "score": 0.6},
        {"image": "img1.png", "caption": "a blue blue square", "caption_id": "p1", "kind": "perturbed",
         "parent_id": "c1", "op": "repetition", "perturbation": {"p": 0.4, "seed": 3}},
        {"image": "img1.png", "image_id": "i1", "caption": "a blue square", "caption_id": "c1", "model": "git",
         "references": ["a blue square"], "annotator": "x1", "score": 0.4},
        {"image": "img2.png", "caption": "ein grünes Quadrat", "language": "de", "caption_id": "c2"},
        {"image": "img3.png", "caption": "a yellow square", "kind": "reference"},
    ]


def _check_imported(session, report):
    # the row of kind "reference" counts as a reference, beside the three of the references columns
    assert report.counts["captions"] == 4 and report.counts["references"] == 4
    assert report.counts["ratings"] == 3 and report.counts["images_new"] == 4
    assert report.counts["annotators_created"] == 2 and report.counts["critical_annotations"] == 1
    perturbed = session.scalar(select(Caption).where(Caption.kind == "perturbed"))
    assert perturbed.parent.text == "a blue square" and perturbed.perturbation == {"p": 0.4, "seed": 3,
                                                                                   "op": "repetition"}
    marking = session.scalar(select(CriticalAnnotation))
    assert marking.critical_objects == ["red square", "white table"]
    # "a red square on a white table": the phrases' character spans are stored with them
    assert marking.spans == {"critical_objects": [[2, 12], [18, 29]], "backgrounds": [], "relationships": []}
    x1 = session.scalar(select(User).where(User.name == "x1"))
    assert x1.role == "annotator" and x1.password_hash is None
    assert {i.original_filename for i in session.scalars(select(Image))} == {f"img{i}.png" for i in range(4)}
    col = get_collection(session, report.collection)
    assert len(col.captions) == 8


def test_jsonl_import(engine, accounts, image_files):
    path = image_files / "set.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in _rows()), encoding="utf-8")
    with session_scope(engine) as s:
        report = import_file(s, accounts["rita"], path, collection="j")
        _check_imported(s, report)
    with session_scope(engine) as s, pytest.raises(ValueError) as again:
        import_file(s, accounts["rita"], path, collection="j")
    assert str(again.value) == (f"{path}: this exact file was already imported into 'j' (import #{report.import_id}); "
                                "nothing was added again. To add its rows a second time, import it from the command "
                                "line with `caplens db import --allow-reimport`.")


def test_an_images_references_are_added_once_whatever_the_rows_language(engine, accounts, image_files):
    """A later file (or a later row) naming references the image has already adds none: a German
    row repeating the English references had stored German-labelled copies of them (a trial).
    A new reference text is added, in the row's language."""
    first = image_files / "en.jsonl"
    first.write_text(json.dumps({"image": "img0.png", "caption": "a red square", "references": ["a red block"]}) + "\n")
    second = image_files / "de.jsonl"
    second.write_text("\n".join(json.dumps(r) for r in [
        {"image": "img0.png", "caption": "ein rotes Quadrat", "lang": "de", "references": ["a red block"]},
        {"image": "img0.png", "caption": "ein roter Block", "lang": "de", "references": ["ein roter Block", "a red block"]},
    ]) + "\n")
    with session_scope(engine) as s:
        import_file(s, accounts["rita"], first, collection="refs")
        report = import_file(s, accounts["rita"], second, collection="refs")
        stored = sorted((t, lang) for t, lang in s.execute(select(Caption.text, Caption.language)
                                                           .where(Caption.kind == "reference")))
    assert report.counts["references"] == 1
    assert stored == [("a red block", "en"), ("ein roter Block", "de")]


def _write_csv(path, rows):
    columns = sorted({k for r in rows for k in r})
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v
                             for k, v in row.items()})


def test_parsed_rows_import_all_or_nothing(engine, accounts, image_files):
    with session_scope(engine) as s:
        _check_imported(s, import_rows(s, accounts["rita"], _rows(), collection="r", base_dir=image_files))
    with session_scope(engine) as s, pytest.raises(ImportRejected, match="row 2: caption text is empty"):
        import_rows(s, accounts["rita"], [_rows()[0], {"image": "img0.png", "caption": ""}], collection="r2",
                    base_dir=image_files)
    with session_scope(engine, read_only=True) as s, pytest.raises(LookupError):
        get_collection(s, "r2")


def test_csv_import(engine, accounts, image_files):
    path = image_files / "set.csv"
    _write_csv(path, _rows())
    with session_scope(engine) as s:
        _check_imported(s, import_file(s, accounts["root"], path))


def test_zip_import_reads_members_not_paths(engine, accounts, image_files, tmp_path):
    path = tmp_path / "bundle.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for i in range(4):
            archive.write(image_files / f"img{i}.png", f"bundle/pics/img{i}.png")
        rows = [{**r, "image": "pics/" + r["image"]} for r in _rows()]
        archive.writestr("bundle/manifest.jsonl", "\n".join(json.dumps(r) for r in rows))
    with session_scope(engine) as s:
        _check_imported(s, import_file(s, accounts["rita"], path, collection="z"))
    bad = tmp_path / "escape.zip"
    with zipfile.ZipFile(bad, "w") as archive:
        archive.write(image_files / "img0.png", "img0.png")
        archive.writestr("manifest.jsonl", "\n".join(json.dumps({"image": ref, "caption": "x"})
                                                     for ref in ("../../etc/passwd", "../img0.png")))
    # Refused by name: '../img0.png' is not quietly read as the member img0.png.
    with session_scope(engine) as s, pytest.raises(ImportRejected) as rejected:
        import_file(s, accounts["rita"], bad)
    assert [line.strip() for line in str(rejected.value).splitlines()[1:]] == [
        "line 1: image path '../../etc/passwd' must be relative to the manifest's folder, without '..'",
        "line 2: image path '../img0.png' must be relative to the manifest's folder, without '..'"]
    evil_member = tmp_path / "evil-member.zip"
    with zipfile.ZipFile(evil_member, "w") as archive:
        archive.writestr("manifest.jsonl", json.dumps({"image": "a.png", "caption": "x"}))
        archive.writestr("../a.png", b"x")
    with session_scope(engine) as s, pytest.raises(ValueError, match="leaves the archive's folder"):
        import_file(s, accounts["rita"], evil_member)


def test_clipscore_json_import(engine, accounts, image_files, tmp_path):
    candidates = tmp_path / "candidates.json"
    references = tmp_path / "refs.json"
    candidates.write_text(json.dumps({"img0": "a red thing", "img1": "a blue thing"}))
    references.write_text(json.dumps({"img0": ["a red square", "red box"], "img1": ["a blue square"]}))
    with session_scope(engine) as s:
        report = import_file(s, accounts["rita"], candidates, references=references, image_dir=image_files,
                             source_model="my-model", collection="cs")
        assert report.format == "clipscore"
        assert (report.counts["captions"], report.counts["references"]) == (2, 3)
        caption = s.scalar(select(Caption).where(Caption.text == "a red thing"))
        assert caption.source_model == "my-model" and caption.image.external_id == "img0"
    references.write_text(json.dumps({"img0": ["a"], "img9": ["b"]}))
    candidates.write_text(json.dumps({"img0": "x", "missing": "y", "img1": 5}))
    with session_scope(engine) as s, pytest.raises(ImportRejected) as rejected:
        import_file(s, accounts["rita"], candidates, references=references, image_dir=image_files, collection="cs2")
    assert len(rejected.value.errors) == 3
    assert any("'missing'" in e and "no image" in e for e in rejected.value.errors)
    assert any("'img9'" in e for e in rejected.value.errors)


def test_bad_rows_reject_the_whole_import_and_name_every_row(engine, accounts, image_files):
    rows = _rows() + [
        {"image": "notes.png", "caption": "fine text"},
        {"image": "../secret.png", "caption": "escape"},
        {"image": "img0.png", "caption": "   "},
        {"image": "img0.png", "caption": "rated", "annotator": "x1", "score": 1.5},
        {"image": "img0.png", "caption": "orphan", "kind": "perturbed", "parent_id": "nope", "op": "removal"},
        {"image": "img0.png", "caption": "a red square on a white table", "caption_id": "c0", "annotator": "x1",
         "score": 0.1},
    ]
    path = image_files / "bad.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n[1, 2]\n{broken\n")
    with session_scope(engine) as s:
        before = _row_counts(s)
    with session_scope(engine) as s, pytest.raises(ImportRejected) as rejected:
        import_file(s, accounts["rita"], path, collection="bad")
    errors = rejected.value.errors
    for line, why in [(7, "not an image"), (8, "relative"), (9, "empty"), (10, "between 0 and 1"),
                      (11, "'nope' is not in the file or the database"), (12, "rates caption 'c0' twice"),
                      (13, "not a JSON object"), (14, "not valid JSON")]:
        assert any(e.startswith(f"line {line}:") and why in e for e in errors), (line, why, errors)
    assert not any(e.startswith(f"line {n}:") for n in range(1, 7) for e in errors)
    with session_scope(engine) as s:
        assert _row_counts(s) == before


@pytest.fixture
def filled(engine, accounts, image_files):
    path = image_files / "set.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in _rows()), encoding="utf-8")
    with session_scope(engine) as s:
        import_file(s, accounts["rita"], path, collection="f")
        c0 = s.scalar(select(Caption).where(Caption.external_id == "c0"))
        cache_metric_scores(s, "CLIP-S", "fp1", {c0.id: 0.77})
        add_caption(s, accounts["rita"], c0.image, "a red square", source_model="blip",
                    collection=get_collection(s, "f"))
    return "f"


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet", "hf"])
def test_ratings_export_joins_captions_images_and_scores(engine, accounts, filled, tmp_path, fmt):
    out = tmp_path / ("ratings" if fmt == "hf" else f"ratings.{fmt}")
    with session_scope(engine, read_only=True) as s:
        summary = export_table(s, accounts["rita"], "ratings", out, fmt, get_collection(s, filled))
    assert summary["rows"] == 3
    if fmt == "csv":
        rows = list(csv.DictReader(out.open(encoding="utf-8")))
        scores = [r["score:CLIP-S@fp1"] for r in rows]
        assert json.loads(rows[0]["references"]) == ["a red square", "red block on a table"]
    elif fmt == "jsonl":
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        scores = [r["score:CLIP-S@fp1"] for r in rows]
    elif fmt == "parquet":
        import pandas as pd

        rows = pd.read_parquet(out).to_dict("records")
        scores = [r["score:CLIP-S@fp1"] for r in rows]
    else:
        import datasets

        dataset = datasets.load_from_disk(str(out))
        rows = list(dataset)
        scores = [r["score:CLIP-S@fp1"] for r in rows]
        assert rows[0]["image"].size == (10, 8)  # decoded PIL image
    assert sorted(str(r["annotator"]) for r in rows) == ["x1", "x1", "x2"]
    assert [float(v) for v in scores if v not in ("", None) and v == v] == [0.77, 0.77]
    assert {str(r["caption"]) for r in rows} == {"a red square on a white table", "a blue square"}
    assert all(len(str(r["image_sha256"])) == 64 for r in rows)


def test_finetune_sets_have_rows_images_and_manifests(engine, accounts, filled, tmp_path):
    with session_scope(engine, read_only=True) as s:
        col = get_collection(s, filled)
        prmcs = build_finetune_set(s, accounts["rita"], "prmcs", tmp_path / "prmcs", collection=col)
        umic = build_finetune_set(s, accounts["rita"], "umic", tmp_path / "umic", collection=col, seed=1)
        pacs = build_finetune_set(s, accounts["rita"], "pacs", tmp_path / "pacs", collection=col)
        human = build_finetune_set(s, accounts["rita"], "human", tmp_path / "human", collection=col, fmt="csv")
        with pytest.raises(ValueError, match="not empty"):
            build_finetune_set(s, accounts["rita"], "prmcs", tmp_path / "prmcs")
    triplets = [json.loads(line) for line in (tmp_path / "prmcs" / "data.jsonl").read_text().splitlines()]
    assert len(triplets) == prmcs["rows"] == 1
    t = triplets[0]
    assert (t["original"], t["perturbed"], t["language"], t["operation"], t["p"], t["seed"]) == (
        "a blue square", "a blue blue square", "en", "repetition", 0.4, 3)
    with session_scope(engine, read_only=True) as s:
        parent = s.scalar(select(Caption).where(Caption.external_id == "c1"))
        child = s.scalar(select(Caption).where(Caption.external_id == "p1"))
        assert (t["original_caption_id"], t["perturbed_caption_id"], t["import_id"]) == (
            parent.id, child.id, child.import_id)
    assert (tmp_path / "prmcs" / t["image"]).is_file()
    assert prmcs["operations"] == {"repetition": 1} and prmcs["provenance"]["collection"] == "f"
    assert json.loads((tmp_path / "prmcs" / "manifest.json").read_text()) == prmcs
    groups = [json.loads(line) for line in (tmp_path / "umic" / "data.jsonl").read_text().splitlines()]
    assert all(len(g["negatives"]) == 4 and g["positive"] not in g["negatives"] for g in groups)
    assert umic["rows"] == len(groups) == 7  # every English caption; German has no other German image
    assert sum(umic["negative_kinds"].values()) == 4 * len(groups)
    assert {"keyword-substitution", "random", "repeat-remove", "permutation"} <= set(umic["negative_kinds"])
    assert umic["hard_negatives"].startswith("none")
    assert all(g["negative_kinds"][1] == "random" for g in groups)
    pairs = [json.loads(line) for line in (tmp_path / "pacs" / "data.jsonl").read_text().splitlines()]
    red = [p for p in pairs if p["caption"] in ("a red square", "red block on a table")]
    assert pacs["rows"] == 4 and all(p["generated_by"] == "blip" for p in red)
    rows = list(csv.DictReader((tmp_path / "human" / "data.csv").open()))
    by_text = {r["candidate"]: r for r in rows}
    assert float(by_text["a red square on a white table"]["human_score"]) == pytest.approx(0.7)
    assert json.loads(by_text["a red square on a white table"]["ratings"]) == {"x1": 0.8, "x2": 0.6}
    assert human["rows"] == 2 and human["ratings"] == 3


def test_the_human_set_keeps_a_transcreations_score_until_it_has_ratings_of_its_own(engine, accounts, filled, tmp_path):
    """A transcreation is written to keep its source's score (M-CapEval1k): the human-rated set has
    it, in its language, at that score, saying where the score came from, until it is rated
    itself; then its own mean counts."""
    from annotation.studies.tasks import submit_rating, submit_transcreation

    with session_scope(engine) as s:
        source = s.scalar(select(Caption).where(Caption.text == "a red square on a white table"))
        made = submit_transcreation(s, accounts["ann"], source.id, "de", "ein rotes Quadrat auf einem weißen Tisch")
        source_id, made_id = source.id, made.result_caption_id
        human = build_finetune_set(s, accounts["rita"], "human", tmp_path / "kept", collection=get_collection(s, filled))
    rows = {r["candidate"]: r for r in map(json.loads, (tmp_path / "kept" / "data.jsonl").read_text().splitlines())}
    kept = rows["ein rotes Quadrat auf einem weißen Tisch"]
    assert (kept["human_score"], kept["n_ratings"], kept["ratings"], kept["language"], kept["kind"]) == (
        0.7, 0, {}, "de", "transcreated")
    assert kept["score_from"] == f"transcreation by ann of caption {source_id}" and kept["parent_caption_id"] == source_id
    assert rows["a red square on a white table"]["score_from"] == "ratings"
    assert (human["rows"], human["ratings"], human["transcreations"]) == (3, 3, 1)
    with session_scope(engine) as s:
        submit_rating(s, accounts["bea"], made_id, 0.4)
        build_finetune_set(s, accounts["rita"], "human", tmp_path / "rated", collection=get_collection(s, filled))
    rows = [json.loads(line) for line in (tmp_path / "rated" / "data.jsonl").read_text().splitlines()]
    rated = [r for r in rows if r["caption_id"] == made_id]
    assert len(rated) == 1 and (rated[0]["human_score"], rated[0]["n_ratings"], rated[0]["score_from"]) == (
        0.4, 1, "ratings")


def test_specs_triplets_from_detail_units(engine, accounts, filled, tmp_path):
    with session_scope(engine) as s:
        images = list(s.scalars(select(Image).order_by(Image.id)))
        for image, text in [(images[0], "A man in a white shirt is playing golf on a green field, and a dog sleeps"),
                            (images[1], "A small cat sits on a sofa, while a woman reads a book near the window")]:
            add_caption(s, accounts["rita"], image, text, kind="reference")
        manifest = build_finetune_set(s, accounts["rita"], "specs", tmp_path / "specs", seed=0)
        by_id = {c.id: c.text for c in s.scalars(select(Caption))}
    rows = [json.loads(line) for line in (tmp_path / "specs" / "data.jsonl").read_text().splitlines()]
    assert manifest["rows"] == len(rows) > 0 and manifest["languages_without_other_images"] == ["de"]
    for row in rows:
        assert row["positive"].startswith(row["base"]) and row["negative"].startswith(row["base"])
        assert len(row["positive"]) > len(row["base"]) and row["negative"] != row["positive"]
        assert row["caption"].startswith(row["positive"]) and row["caption"] in by_id.values()


def test_perturbing_a_collection_feeds_the_prmcs_set(engine, accounts, filled, tmp_path):
    with session_scope(engine) as s:
        col = get_collection(s, filled)
        first = perturb_collection(s, accounts["rita"], col, seed=5)
        again = perturb_collection(s, accounts["rita"], col, seed=5)
        with pytest.raises(PermissionError):
            perturb_collection(s, accounts["ann"], col)
        # "permutation" is jumble's alias: the jumbled captions are already there, none is added.
        alias = perturb_collection(s, accounts["rita"], col, ["permutation"], seed=5)
        assert set(alias.stored) == {"jumble"} and alias.stored["jumble"] == 0 and alias.already_present > 0
        manifest = build_finetune_set(s, accounts["rita"], "prmcs", tmp_path / "p", collection=col)
    made = sum(first.stored.values())
    assert made > 0 and sum(again.stored.values()) == 0 and again.already_present == made
    assert manifest["rows"] == made + 1  # plus the imported repetition
    triplets = [json.loads(line) for line in (tmp_path / "p" / "data.jsonl").read_text().splitlines()]
    substituted = [t for t in triplets if t["operation"] == "substitution" and t["original"].startswith("a red square on")]
    # the marked critical objects (red square, white table) are what substitution swapped
    assert substituted and substituted[0]["perturbed"] == "a white table on a red square"


def test_a_pacs_pair_takes_its_generated_caption_in_the_captions_language(engine, accounts, image_files, tmp_path):
    """PAC-S pairs a human caption with a model caption of the same image as T'; a German
    reference was paired with the English model caption (generated captions were grouped by
    image only)."""
    path = image_files / "pacs.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in [
        {"image": "img0.png", "caption": "a red square", "kind": "reference"},
        {"image": "img0.png", "caption": "ein rotes Quadrat", "kind": "reference", "language": "de"},
        {"image": "img0.png", "caption": "a red box on a table", "model": "blip"},
    ]), encoding="utf-8")
    with session_scope(engine) as s:
        import_file(s, accounts["rita"], path, collection="p")
    with session_scope(engine, read_only=True) as s:
        build_finetune_set(s, accounts["rita"], "pacs", tmp_path / "pacs", collection=get_collection(s, "p"))
    pairs = {p["caption"]: p for p in map(json.loads, (tmp_path / "pacs" / "data.jsonl").read_text().splitlines())}
    assert pairs["a red square"]["generated_caption"] == "a red box on a table"
    assert pairs["ein rotes Quadrat"]["generated_caption"] is None


def test_an_image_imported_into_two_collections_lists_its_references_once(engine, accounts, image_files, tmp_path):
    """Each import stores its collection's copy of the references; the ratings export, the
    `human` set and the rating screen (reference_texts) listed every copy."""
    from annotation.studies.tasks import reference_texts

    for name, text in (("A", "a red square on a table"), ("B", "a red block")):
        path = image_files / f"{name}.jsonl"
        path.write_text(json.dumps({"image": "img0.png", "caption": text, "annotator": "ann", "score": 0.5,
                                    "references": ["a red square", "red block on a table"]}))
        with session_scope(engine) as s:
            import_file(s, accounts["rita"], path, collection=name)
    expected = ["a red square", "red block on a table"]
    with session_scope(engine, read_only=True) as s:
        col = get_collection(s, "A")
        (row,) = list(ratings_table(s, accounts["rita"], col))
        assert row["references"] == expected
        assert reference_texts(s, s.scalar(select(Image.id)), "en") == expected
        build_finetune_set(s, accounts["rita"], "human", tmp_path / "human", collection=col)
    (human,) = map(json.loads, (tmp_path / "human" / "data.jsonl").read_text().splitlines())
    assert human["references"] == expected


def _collection_contents(session, name):
    """What a round trip must keep of a collection: its captions and their ratings."""
    from db.models import Rating

    col = get_collection(session, name)
    captions = {(c.text, c.language, c.kind, c.external_id, c.perturbation_op, c.parent.text if c.parent else None,
                 c.image.sha256) for c in col.captions}
    assert len(captions) == len(col.captions)  # nothing stored twice
    ratings = sorted((c.text, r.annotator.name, r.overall, r.fluency, r.relevance, r.descriptiveness)
                     for c in col.captions for r in session.scalars(select(Rating).where(Rating.caption_id == c.id)))
    return captions, ratings


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_ratings_and_captions_exports_import_again(engine, accounts, image_files, fmt):
    """An export names each image as `sha256:<hex>` (how an import names a stored image), keeps
    the caption's own external id apart from the database id it is keyed by, and links
    parents within the file; the CSV escaping of cells a spreadsheet would run (a leading
    '=', '-', '+') is undone on reading, and a caption's own apostrophe is kept."""
    rows = [
        {"image": "img0.png", "caption": "=1+1 squares", "caption_id": "c0", "annotator": "x1", "score": 0.75,
         "fluency": 1, "references": ["-ish red", "+a red block"]},
        {"image": "img0.png", "caption": "=1+1 squares", "caption_id": "c0", "annotator": "x2", "score": 0.25},
        {"image": "img0.png", "caption": "=1+1 1+1 squares", "caption_id": "p0", "kind": "perturbed",
         "op": "repetition", "parent_id": "c0", "annotator": "x1", "score": 0.1},
        {"image": "img1.png", "caption": "'=quoted' and 'tis blue", "language": "de", "annotator": "x2",
         "score": 0.5, "references": ["ein blaues Quadrat"]},
        {"image": "img1.png", "caption": "-ein blaues Ding", "language": "de", "model": "blip", "annotator": "x1",
         "relevance": 0.5, "score": 1},
    ]
    path = image_files / "orig.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    with session_scope(engine) as s:
        import_file(s, accounts["rita"], path, collection="orig")
    for what in ("ratings", "captions"):
        out = image_files / f"{what}.{fmt}"
        with session_scope(engine, read_only=True) as s:
            export_table(s, accounts["rita"], what, out, fmt, get_collection(s, "orig"))
        with session_scope(engine) as s:
            import_file(s, accounts["rita"], out, collection=f"again-{what}")
    with session_scope(engine, read_only=True) as s:
        captions, ratings = _collection_contents(s, "orig")
        assert ("'=quoted' and 'tis blue", "de", "candidate", None, None, None) in {c[:6] for c in captions}
        assert _collection_contents(s, "again-ratings") == (captions, ratings)
        # a captions export has no ratings, and every caption
        assert _collection_contents(s, "again-captions") == (captions, [])


def test_an_exported_parent_outside_the_file_is_refused_not_looked_up(engine, accounts, image_files):
    """An export's parent_caption_id is the exporting database's id: a file naming one that is
    no row of the file must not be matched against stored external ids (an export writes the
    parents its rows need, test_a_ratings_export_of_a_perturbed_caption_of_an_unrated_one_imports_again;
    this file is one cut short)."""
    path = image_files / "orig.jsonl"
    path.write_text(json.dumps({"image": "img0.png", "caption": "a red square", "caption_id": "c0"}), encoding="utf-8")
    with session_scope(engine) as s:
        import_file(s, accounts["rita"], path, collection="orig")
        parent_id = s.scalar(select(Caption.id).where(Caption.external_id == "c0"))
    cut = image_files / "ratings.jsonl"
    cut.write_text(json.dumps({"image": "img0.png", "caption": "a red red square", "caption_id": parent_id + 1,
                               "kind": "perturbed", "perturbation_op": "repetition", "parent_caption_id": parent_id,
                               "annotator": "x1", "overall": 0.2}), encoding="utf-8")
    with session_scope(engine) as s, pytest.raises(ImportRejected) as rejected:
        import_file(s, accounts["rita"], cut, collection="again")
    assert rejected.value.errors == [f"line 1: parent_caption_id '{parent_id}' is not a caption_id of this file (in an "
                                     "export it is the parent's id in the database it came from: export the parent "
                                     "with it, as the captions export does)"]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_ratings_export_of_a_perturbed_caption_of_an_unrated_one_imports_again(engine, accounts, image_files,
                                                                                 tmp_path, fmt):
    """A ratings export names a rated perturbed caption's parent by parent_caption_id, which an
    import links only to a row of the same file: the export writes the unrated parents (and
    their unrated parents) as rows without rating, once each, so that export -> fresh
    database -> import gives back the same captions, parents and ratings."""
    rows = [  # img0: an unrated original and its rated perturbation
        {"image": "img0.png", "caption": "a red square", "caption_id": "c0", "model": "blip"},
        {"image": "img0.png", "caption": "a red red square", "caption_id": "p0", "kind": "perturbed",
         "op": "repetition", "parent_id": "c0", "annotator": "x1", "score": 0.2},
        {"image": "img0.png", "caption": "a red red square", "caption_id": "p0", "kind": "perturbed",
         "op": "repetition", "parent_id": "c0", "annotator": "x2", "score": 0.3},
        # img1: two unrated generations above a rated one, and a rated original beside them
        {"image": "img1.png", "caption": "a blue square", "caption_id": "c1"},
        {"image": "img1.png", "caption": "a blue blue square", "caption_id": "p1", "kind": "perturbed",
         "op": "repetition", "parent_id": "c1"},
        {"image": "img1.png", "caption": "a blue blue blue square", "caption_id": "p2", "kind": "perturbed",
         "op": "repetition", "parent_id": "p1", "annotator": "x1", "score": 0.1},
        {"image": "img1.png", "caption": "a blue box", "caption_id": "c2", "annotator": "x1", "score": 0.9},
        {"image": "img1.png", "caption": "a blue thing", "caption_id": "c3"},  # no rated caption needs it
    ]
    path = image_files / "orig.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    out = tmp_path / f"ratings.{fmt}"
    with session_scope(engine) as s:
        import_file(s, accounts["rita"], path, collection="orig")
        export_table(s, accounts["rita"], "ratings", out, fmt, get_collection(s, "orig"))
        captions, ratings = _collection_contents(s, "orig")
        # the analyses' table stays one row per rating
        assert len(ratings_table(s, accounts["rita"], get_collection(s, "orig"))) == 4
    if fmt == "csv":
        with out.open(newline="", encoding="utf-8") as f:
            exported = list(csv.DictReader(f))
    else:
        exported = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    unrated = [r for r in exported if r["rating_id"] in (None, "")]
    assert sorted(r["caption"] for r in unrated) == ["a blue blue square", "a blue square", "a red square"]
    assert all(r["annotator"] in (None, "") and r["overall"] in (None, "") for r in unrated)
    assert len(exported) == 4 + 3

    fresh_url = f"sqlite:///{tmp_path / 'fresh.db'}"
    upgrade(fresh_url)
    with session_scope(get_engine(fresh_url)) as s:  # the images, and nothing else, are there
        rita = create_user(s, "rita", "researcher", None)
        for name in ("img0.png", "img1.png"):
            add_image(s, (image_files / name).read_bytes(), original_filename=name)
        report = import_file(s, rita, out, collection="again")
        assert report.counts["captions"] == 6 and report.counts["ratings"] == 4
    with session_scope(get_engine(fresh_url), read_only=True) as s:
        again = _collection_contents(s, "again")
    # every caption but the one no rated caption descends from, with its parent; every rating
    assert again == ({c for c in captions if c[0] != "a blue thing"}, ratings)


def test_a_file_cannot_credit_ratings_to_another_account_that_signs_in(engine, accounts, image_files):
    """Ratings and markings go to login-less accounts (created by the import) or to the importing
    user; a row naming any other account with a login, an admin's included, refuses the file."""
    with session_scope(engine) as s:
        importer = create_user(s, "rex", "researcher", "a long passphrase 1")
        for name, role in [("dora", "annotator"), ("boss", "admin")]:
            create_user(s, name, role, "a long passphrase 2")
        before = _row_counts(s)
    rows = [{"image": "img0.png", "caption": "a red square", "caption_id": "c0", "annotator": "dora", "score": 0.9},
            {"image": "img0.png", "caption": "a red square", "caption_id": "c0", "annotator": "ann", "score": 0.2},
            {"image": "img1.png", "caption": "a blue square", "annotator": "boss", "critical_objects": ["blue square"]},
            {"image": "img2.png", "caption": "a green square", "annotator": "rex", "score": 0.5}]
    path = image_files / "spoof.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with session_scope(engine) as s, pytest.raises(ImportRejected) as rejected:
        import_file(s, importer, path, collection="spoof")
    assert [e.split(":")[0] for e in rejected.value.errors] == ["line 1", "line 3"]
    assert "'dora' is an account that signs in here" in rejected.value.errors[0]
    assert "'boss-imported'" in rejected.value.errors[1]
    with session_scope(engine) as s:
        assert _row_counts(s) == before
    path.write_text("\n".join(json.dumps(r | ({"annotator": "dora-imported"} if r["annotator"] == "dora" else {})
                                         | ({"annotator": "boss-imported"} if r["annotator"] == "boss" else {}))
                              for r in rows) + "\n")
    with session_scope(engine) as s:
        report = import_file(s, importer, path, collection="spoof")
        assert report.counts["ratings"] == 3 and report.counts["annotators_created"] == 2
        rex_ratings = s.scalar(select(func.count()).select_from(Rating).join(User, User.id == Rating.annotator_id)
                               .where(User.name == "rex"))
        assert rex_ratings == 1  # the importing user's own rating is theirs
