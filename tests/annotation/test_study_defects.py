"""The smaller defects of issue 24, in the library: an untouched slider is refused (never saved
as 0.5 or silently as "not rated"), Back after Skip shows the skipped item, imports refuse
unknown language codes naming the line, critical objects are exported (CSV, JSONL, Hugging
Face, `caplens db export`), and a rating records the seconds since the queue offered it."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from annotation.studies import queue_screens
from annotation.captions import add_caption, get_or_create_collection, validate_caption_text, validate_language
from annotation.transfer.exporters import export_table
from annotation.image_store import add_image
from annotation.transfer.importers import ImportRejected, import_file
from annotation.studies.tasks import mark_critical, next_rating_item, submit_rating
from db.models import Rating, RatingLease, User
from db.session import session_scope

REPO = Path(__file__).resolve().parents[2]
CAPTION = "a small white circle next to a big red square"


@pytest.fixture
def queue(engine, accounts, make_png):
    """Collection "q": three captions, each of its own image."""
    with session_scope(engine) as s:
        rita = s.merge(accounts["rita"])
        collection = get_or_create_collection(s, rita, "q")
        ids = []
        for n in range(3):
            image = add_image(s, make_png((40 * n, 90, 10)), original_filename=f"q{n}.png")
            ids.append(add_caption(s, rita, image, f"{CAPTION} {n}", collection=collection).id)
    return ids


def _ann_id(engine):
    with session_scope(engine, read_only=True) as s:
        return s.scalar(select(User.id).where(User.name == "ann"))


def test_an_untouched_slider_is_refused_and_nothing_is_saved(engine, accounts, queue):
    ann = _ann_id(engine)
    screen = queue_screens.rating_screen(ann, "q")
    with pytest.raises(ValueError, match="Set the overall score first"):
        queue_screens.rate_and_next(ann, "q", screen.caption_id, queue_screens.UNSET)
    with pytest.raises(ValueError, match="Set the overall score first"):
        queue_screens.rate_and_next(ann, "q", screen.caption_id, None)
    with pytest.raises(ValueError, match="Set or skip fluency, descriptiveness first"):
        queue_screens.rate_and_next(ann, "q", screen.caption_id, 0.7, queue_screens.UNSET, None,
                                    queue_screens.UNSET)
    with session_scope(engine, read_only=True) as s:
        assert s.scalar(select(Rating)) is None
    # set overall, fluency set, relevance and descriptiveness explicitly skipped: NULL, not 0.5
    queue_screens.rate_and_next(ann, "q", screen.caption_id, 0.7, 0.9, None, None)
    with session_scope(engine, read_only=True) as s:
        rating = s.scalar(select(Rating))
        assert (rating.overall, rating.fluency, rating.relevance, rating.descriptiveness) == (0.7, 0.9, None, None)


def test_back_after_skip_returns_to_the_skipped_item(engine, accounts, queue):
    ann = _ann_id(engine)
    first = queue_screens.rating_screen(ann, "q")
    second = queue_screens.rate_and_next(ann, "q", first.caption_id, 0.4)
    third = queue_screens.skip_rating(ann, "q", second.caption_id)
    assert third.caption_id not in (first.caption_id, second.caption_id)
    back = queue_screens.earlier_rating_screen(ann, "q", third.caption_id)
    assert back.caption_id == second.caption_id and "skipped" in back.message and back.values == {}
    again = queue_screens.earlier_rating_screen(ann, "q", back.caption_id)
    assert again.caption_id == first.caption_id and again.values["overall"] == 0.4


def test_a_rating_records_the_seconds_since_the_queue_offered_it(engine, accounts, queue):
    with session_scope(engine) as s:
        ann, collection = s.merge(accounts["ann"]), get_or_create_collection(s, s.merge(accounts["rita"]), "q")
        caption = next_rating_item(s, ann, collection)
        lease = s.scalar(select(RatingLease))
        lease.created_at = lease.created_at - timedelta(seconds=42)
        s.flush()
        rating = submit_rating(s, ann, caption.id, 0.5)
        assert rating.seconds == pytest.approx(42, abs=5)
        assert submit_rating(s, s.merge(accounts["bea"]), caption.id, 0.5).seconds is None  # not from the queue


@pytest.mark.parametrize("code", ["xx", "english", "e1", "zz-ZZ"])
def test_unknown_language_codes_are_refused(code):
    with pytest.raises(ValueError, match="language code"):
        validate_language(code)


@pytest.mark.parametrize("code", ["en", "pt-BR", "zh-Hant", "und", "sw"])
def test_known_language_codes_pass(code):
    assert validate_language(code) == code


@pytest.mark.parametrize("text, code, position", [("a dog\x00 on grass", "0000", 6), ("\x1b[31mred", "001B", 1),
                                                    ("a cat\x7f", "007F", 6)])
def test_a_caption_with_a_control_character_is_refused_naming_it(text, code, position):
    with pytest.raises(ValueError, match=f"control character U\\+{code} at position {position}$"):
        validate_caption_text(text)


def test_tabs_and_line_breaks_stay_part_of_a_caption():
    assert validate_caption_text("a dog\ton grass\r\nat noon ") == "a dog\ton grass\r\nat noon "


def test_an_import_with_an_unknown_language_is_refused_with_its_line(engine, accounts, tmp_path, make_png):
    (tmp_path / "a.png").write_bytes(make_png())
    rows = [{"image": "a.png", "caption": "a red square", "lang": "en"},
            {"image": "a.png", "caption": "ein rotes Quadrat", "lang": "de"},
            {"image": "a.png", "caption": "??", "lang": "xx"}]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    with session_scope(engine) as s, pytest.raises(ImportRejected) as rejected:
        import_file(s, s.merge(accounts["rita"]), path, collection="langs")
    assert rejected.value.errors == ["line 3: unknown language code 'xx': use an ISO 639-1 code such as en, de, ja, "
                                     "or one with a region, such as pt-BR"]


@pytest.fixture
def marked(engine, accounts, queue):
    with session_scope(engine) as s:
        mark_critical(s, s.merge(accounts["ann"]), queue[0], [(2, 20)], [], [(21, 30)])
        mark_critical(s, s.merge(accounts["bea"]), queue[0], ["big red square"], ["white circle"])
    return queue[0]


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "hf"])
def test_critical_objects_are_exported(engine, accounts, marked, tmp_path, fmt):
    out = tmp_path / ("critical" if fmt == "hf" else f"critical.{fmt}")
    with session_scope(engine, read_only=True) as s:
        assert export_table(s, s.merge(accounts["rita"]), "critical", out, fmt)["rows"] == 2
    if fmt == "csv":
        rows = list(csv.DictReader(out.open(encoding="utf-8")))
        for row in rows:
            for name in ("critical_objects", "backgrounds", "relationships"):
                row[name] = json.loads(row[name])
    elif fmt == "jsonl":
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    else:
        import datasets

        rows = list(datasets.load_from_disk(str(out)))
        assert rows[0]["image"].size == (12, 9)
    by = {row["annotator"]: row for row in rows}
    assert by["ann"]["critical_objects"] == ["small white circle"] and by["ann"]["relationships"] == ["next to a"]
    assert json.loads(by["ann"]["spans"]) == {"backgrounds": [], "critical_objects": [[2, 20]],
                                              "relationships": [[21, 30]]}
    assert by["bea"]["critical_objects"] == ["big red square"] and by["bea"]["backgrounds"] == ["white circle"]
    assert all(int(row["caption_id"]) == marked and row["caption"] == f"{CAPTION} 0" for row in rows)


def test_annotators_cannot_export_critical_objects(engine, accounts, marked, tmp_path):
    with session_scope(engine, read_only=True) as s, pytest.raises(PermissionError):
        export_table(s, s.merge(accounts["ann"]), "critical", tmp_path / "x.csv", "csv")


@pytest.mark.parametrize("empty_db_url", ["sqlite"], indirect=True)
def test_caplens_db_export_writes_critical_objects(db_url, accounts, marked, tmp_path):
    out = tmp_path / "critical.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "app.cli", "db", "export", "--format", "jsonl", "--what", "critical",
                           "--user", "rita", str(out)], capture_output=True, text=True, env=env, cwd=REPO, timeout=180)
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(line)["annotator"] for line in out.read_text().splitlines()) == ["ann", "bea"]


@pytest.mark.parametrize("code, canonical", [("EN", "en"), ("pt_BR", "pt-BR"), ("pt-br", "pt-BR"),
                                             ("zh-hant", "zh-Hant"), ("es-419", "es-419"), ("De-ch", "de-CH")])
def test_a_language_code_not_in_its_canonical_form_is_refused_naming_that_form(code, canonical):
    """Codes were stored as given, so "EN" and "pt_BR" were languages apart from "en" and
    "pt-BR"; refused rather than rewritten, since existing databases may hold them as given."""
    if code == canonical:
        assert validate_language(code) == code
    else:
        with pytest.raises(ValueError, match=f"not in its canonical form: write '{canonical}'"):
            validate_language(code)


def test_an_import_with_a_non_canonical_language_is_refused_with_its_line(engine, accounts, tmp_path, make_png):
    (tmp_path / "a.png").write_bytes(make_png())
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [{"image": "a.png", "caption": "a dog", "language": "en"},
                                                      {"image": "a.png", "caption": "a cat", "language": "EN"}]))
    with session_scope(engine) as s, pytest.raises(ImportRejected) as rejected:
        import_file(s, accounts["rita"], path, collection="langs")
    assert rejected.value.errors == ["line 2: language code 'EN' is not in its canonical form: write 'en' "
                                     "(lowercase language, '-', uppercase region)"]
