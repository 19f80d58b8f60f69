"""What an import keeps and refuses of the text it is given: captions byte for byte, annotator
names under the account name rules, captions within the caption length limit."""
from __future__ import annotations

import csv
import json

import pytest
from sqlalchemy import func, select

from annotation.transfer.importers import ImportRejected, import_file
from db.models import Caption, Rating, User
from db.session import session_scope
from scoring.paths import DEFAULT_CAPTION_MAX_CHARS

EXACT = ["  two leading spaces", "trailing tab\t", "\tleading tab then text", " both ", "plain"]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_captions_are_stored_byte_for_byte(engine, accounts, tmp_path, make_png, fmt):
    (tmp_path / "a.png").write_bytes(make_png())
    rows = [{"image": " a.png ", "caption": text, "language": " en "} for text in EXACT]
    path = tmp_path / f"exact.{fmt}"
    if fmt == "csv":
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, ["image", "caption", "language"])
            writer.writeheader()
            writer.writerows(rows)
    else:
        path.write_text("\n".join(json.dumps({**r, "image": "a.png", "language": "en"}) for r in rows))
    with session_scope(engine) as session:
        import_file(session, accounts["rita"], path, collection="exact")
    with session_scope(engine) as session:
        assert sorted(session.scalars(select(Caption.text))) == sorted(EXACT)


@pytest.mark.parametrize("annotator, problem", [
    ("two words", "invalid user name 'two words'"),
    ("x" * 101, "invalid user name"),
    ("bell\x07", "invalid user name"),
    (17, "annotator must be a name (text), not int 17"),
    (["a"], "annotator must be a name (text), not list ['a']"),
])
def test_annotator_names_follow_the_account_name_rules(engine, accounts, tmp_path, make_png, annotator, problem):
    (tmp_path / "a.png").write_bytes(make_png())
    path = tmp_path / "names.jsonl"
    path.write_text(json.dumps({"image": "a.png", "caption": "a red square", "annotator": "fine-name", "score": 0.5})
                    + "\n" + json.dumps({"image": "a.png", "caption": "a red square", "annotator": annotator,
                                         "score": 0.4}))
    with session_scope(engine) as session, pytest.raises(ImportRejected) as rejected:
        import_file(session, accounts["rita"], path, collection="names")
    assert len(rejected.value.errors) == 1 and rejected.value.errors[0].startswith("line 2: ")
    assert problem in rejected.value.errors[0]
    with session_scope(engine) as session:
        assert session.scalar(select(User).where(User.name == "fine-name")) is None  # nothing written


def test_a_caption_at_the_length_limit_is_imported_and_one_past_it_is_refused(engine, accounts, tmp_path, make_png):
    (tmp_path / "a.png").write_bytes(make_png())
    at_limit, past = "a" * DEFAULT_CAPTION_MAX_CHARS, "b" * (DEFAULT_CAPTION_MAX_CHARS + 1)
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(json.dumps({"image": "a.png", "caption": text}) for text in (at_limit, past)))
    with session_scope(engine) as session, pytest.raises(ImportRejected) as rejected:
        import_file(session, accounts["rita"], path, collection="long")
    assert rejected.value.errors == [f"line 2: caption: {DEFAULT_CAPTION_MAX_CHARS + 1:,} characters; the limit is "
                                     f"{DEFAULT_CAPTION_MAX_CHARS:,} per caption (the server's caption_max_chars setting)."]
    path.write_text(json.dumps({"image": "a.png", "caption": at_limit}))
    with session_scope(engine) as session:
        assert import_file(session, accounts["rita"], path, collection="long").counts["captions"] == 1


def test_the_server_start_deletes_the_staging_a_killed_import_left(engine, accounts):
    from datetime import timedelta

    from annotation.app_start import prepare_database
    from annotation.transfer.importers import STAGING_IDLE
    from db.models import ImportStaging, utcnow

    with session_scope(engine) as session:
        session.add(ImportStaging(source_name="killed.csv", updated_at=utcnow() - STAGING_IDLE - timedelta(seconds=5)))
        session.add(ImportStaging(source_name="running.csv", updated_at=utcnow() - STAGING_IDLE + timedelta(minutes=5)))
    prepare_database(False, "demo")
    with session_scope(engine) as session:
        assert list(session.scalars(select(ImportStaging.source_name))) == ["running.csv"]


def test_the_web_import_report_names_the_upload_not_the_servers_folder(engine, accounts, tmp_path, make_png):
    from annotation.transfer.transfers import import_upload

    folder = tmp_path / "gradio" / "0d7131729eb0e056"
    folder.mkdir(parents=True)
    (folder / "a.png").write_bytes(make_png())
    path = folder / "mine.jsonl"
    path.write_text(json.dumps({"image": "a.png", "caption": "a red square"}))
    report = import_upload(accounts["rita"].id, str(path), "web")
    assert report["source"] == "mine.jsonl" and str(tmp_path) not in json.dumps(report)
    assert report["summary"] == (f"Imported mine.jsonl (jsonl, 1 row) into 'web' as import #{report['import_id']}.\n"
                                 "Written: 1 caption, 0 references, 0 ratings, 0 critical-object annotations.\n"
                                 "Images: 1 new, 0 already stored.")


def test_the_import_summary_names_every_count_in_words():
    from annotation.transfer.transfers import import_summary

    counts = {"rows": 7, "captions": 2, "references": 1, "ratings": 6, "critical_annotations": 1, "images_new": 0,
              "images_existing": 2, "annotators_created": 3}
    report = {"import_id": 9, "collection": "cli", "source": "r.jsonl", "format": "jsonl", "counts": counts}
    assert import_summary(report) == (
        "Imported r.jsonl (jsonl, 7 rows) into 'cli' as import #9.\n"
        "Written: 2 captions, 1 reference, 6 ratings, 1 critical-object annotation.\n"
        "Images: 0 new, 2 already stored.\n"
        "3 annotator accounts created for the file's annotator names, without a login.")


def test_a_csv_error_names_the_lines_where_its_row_stands(engine, accounts, tmp_path, make_png):
    """A quoted caption with line breaks makes one row span lines: an error names them all,
    counted from the row's first line, and the rows after it keep their own line numbers."""
    (tmp_path / "a.png").write_bytes(make_png())
    path = tmp_path / "breaks.csv"
    path.write_text('image,caption,annotator,score\n'
                    'a.png,"a red square\non a table",rita,0.5\n'  # lines 2-3: fine
                    'a.png,"two\r\nlines",two words,0.5\n'  # lines 4-5: a name with a space
                    'a.png,one line,two words,0.5\n', encoding="utf-8", newline="")  # line 6
    with session_scope(engine) as session, pytest.raises(ImportRejected) as rejected:
        import_file(session, accounts["rita"], path, collection="breaks")
    assert [error.split(":")[0] for error in rejected.value.errors] == ["lines 4-5", "line 6"]
    assert all("invalid user name 'two words'" in error for error in rejected.value.errors)


def test_a_file_without_any_column_an_import_reads_names_its_columns(engine, accounts, tmp_path):
    path = tmp_path / "sheet.csv"
    path.write_text("foo,bar,baz\n1,2,3\n4,5,6\n", encoding="utf-8")
    with session_scope(engine) as session, pytest.raises(ImportRejected) as rejected:
        import_file(session, accounts["rita"], path, collection="sheet")
    assert rejected.value.errors[0] == ("the file has no column an import reads (its columns: bar, baz, foo); each row "
                                       "needs `image` and `caption` (or `text` or `candidate`)")
    assert rejected.value.errors[1].startswith("line 2: no image given")  # the rows' own problems follow


def test_a_stray_quote_in_a_quoted_caption_refuses_the_file_instead_of_storing_it_changed(engine, accounts, tmp_path,
                                                                                          make_png):
    """`"a "red" car"` is not CSV: read leniently it became the caption 'a red" car"', stored as
    if the file had said so. The import refuses it, names the line and says how to write a
    quote, and writes nothing; a doubled quote stays a quote."""
    (tmp_path / "a.png").write_bytes(make_png())
    path = tmp_path / "quotes.csv"
    path.write_text('image,caption\na.png,"a ""red"" square"\na.png,"a "red" car"\n', encoding="utf-8")
    with session_scope(engine) as session, pytest.raises(ValueError) as refused:
        import_file(session, accounts["rita"], path, collection="quotes")
    assert str(refused.value) == ('line 3: text follows the quote that closes a quoted field; inside quotes, write a '
                                  'quote as two ("")')
    with session_scope(engine, read_only=True) as session:
        assert session.scalar(select(func.count()).select_from(Caption)) == 0
    path.write_text('image,caption\na.png,"a ""red"" square"\n', encoding="utf-8")
    with session_scope(engine) as session:
        import_file(session, accounts["rita"], path, collection="quotes")
    with session_scope(engine, read_only=True) as session:
        assert session.scalars(select(Caption.text)).all() == ['a "red" square']


def _import_rows(engine, accounts, path, rows, collection):
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    with session_scope(engine) as session:
        return import_file(session, accounts["rita"], path, collection=collection)


def test_a_parent_on_another_image_or_a_cycle_of_parents_is_refused_naming_the_row(engine, accounts, tmp_path,
                                                                                   make_png):
    """A perturbed caption is derived from a caption of its own image (PR-MCS pairs them with
    that image), and parents end somewhere; both were accepted."""
    (tmp_path / "a.png").write_bytes(make_png((255, 0, 0)))
    (tmp_path / "b.png").write_bytes(make_png((0, 0, 255)))
    (tmp_path / "a-again.png").write_bytes(make_png((255, 0, 0)))  # the same image under another name
    perturbed = {"kind": "perturbed", "op": "repetition"}
    with pytest.raises(ImportRejected) as rejected:
        _import_rows(engine, accounts, tmp_path / "other.jsonl", [
            {"image": "a.png", "caption": "x y", "caption_id": "P"},
            {"image": "b.png", "caption": "x x y", "parent_id": "P", **perturbed}], "other")
    assert rejected.value.errors == ["line 2: parent_id 'P' (line 1) is a caption of another image"]
    with pytest.raises(ImportRejected) as rejected:
        _import_rows(engine, accounts, tmp_path / "cycle.jsonl", [
            {"image": "a.png", "caption": "a b", "caption_id": "A", "parent_id": "B", **perturbed},
            {"image": "a.png", "caption": "a c", "caption_id": "B", "parent_id": "A", **perturbed}], "cycle")
    assert [e.split(":")[0] for e in rejected.value.errors] == ["line 1", "line 2"]
    assert all("a cycle of parents" in e for e in rejected.value.errors)
    _import_rows(engine, accounts, tmp_path / "same.jsonl", [
        {"image": "a.png", "caption": "x y", "caption_id": "Q"},
        {"image": "a-again.png", "caption": "x x y", "caption_id": "Q2", "parent_id": "Q", **perturbed}], "same")
    with pytest.raises(ImportRejected) as rejected:  # a parent already stored, on another image
        _import_rows(engine, accounts, tmp_path / "stored.jsonl", [
            {"image": "b.png", "caption": "x y y", "parent_id": "Q", **perturbed}], "stored")
    assert rejected.value.errors == ["line 1: parent_id 'Q' is a caption of another image"]
    with session_scope(engine) as session:
        assert sorted(session.scalars(select(Caption.text))) == ["x x y", "x y"]


def test_rows_of_one_caption_id_must_agree_on_the_caption(engine, accounts, tmp_path, make_png):
    """Rows sharing a caption_id are one caption (one row per annotator's rating): a row that
    gave it another language or kind was dropped silently, keeping the first row's."""
    (tmp_path / "a.png").write_bytes(make_png((255, 0, 0)))
    with pytest.raises(ImportRejected) as rejected:
        _import_rows(engine, accounts, tmp_path / "split.jsonl", [
            {"image": "a.png", "caption": "a red square", "caption_id": "C", "annotator": "ann", "score": 0.5,
             "model": "blip"},
            {"image": "a.png", "caption": "a red square", "caption_id": "C", "annotator": "bea", "score": 0.7,
             "language": "de", "model": "blip"},
            {"image": "a.png", "caption": "a red box", "caption_id": "C", "annotator": "cal", "score": 0.2,
             "model": "git"}], "split")
    assert rejected.value.errors == [
        "line 2: caption_id 'C' was used by line 1 with another language",
        "line 3: caption_id 'C' was used by line 1 with another caption, source_model"]
    _import_rows(engine, accounts, tmp_path / "agree.jsonl", [  # a row may leave out the model another gives
        {"image": "a.png", "caption": "a red square", "caption_id": "C", "annotator": "ann", "score": 0.5},
        {"image": "a.png", "caption": "a red square", "caption_id": "C", "annotator": "bea", "score": 0.7,
         "model": "blip"}], "agree")
    with session_scope(engine) as session:
        assert session.scalar(select(func.count(Rating.id))) == 2
        assert session.scalar(select(Caption.source_model).where(Caption.text == "a red square")) == "blip"


def test_json_nested_too_deeply_is_not_valid_json_of_its_row(engine, accounts, tmp_path, make_png):
    """The parser's RecursionError reached users as "Something went wrong"."""
    (tmp_path / "a.png").write_bytes(make_png())
    deep = "[" * 100_000 + "]" * 100_000
    path = tmp_path / "deep.jsonl"
    path.write_text(json.dumps({"image": "a.png", "caption": "a dog"}) + "\n"
                    + '{"image": "a.png", "caption": "a cat", "perturbation": ' + deep + "}\n")
    with session_scope(engine) as session, pytest.raises(ImportRejected) as rejected:
        import_file(session, accounts["rita"], path, collection="deep")
    assert rejected.value.errors == ["line 2: not valid JSON (nested too deeply)"]
    path = tmp_path / "deep.csv"
    path.write_text(f"image,caption,references\na.png,a dog,{deep[99_000:101_000]}\n")  # within the CSV field limit
    with session_scope(engine) as session, pytest.raises(ImportRejected) as rejected:
        import_file(session, accounts["rita"], path, collection="deep")
    assert rejected.value.errors == ["line 2: references: not valid JSON (nested too deeply)"]


def test_a_csv_header_naming_a_column_twice_is_refused(engine, accounts, tmp_path, make_png):
    """The reader kept the last column's cells: `image,caption,caption` stored the second caption."""
    (tmp_path / "a.png").write_bytes(make_png())
    path = tmp_path / "twice.csv"
    path.write_text("image,caption, caption,,\na.png,first,second,,\n")
    with session_scope(engine) as session, pytest.raises(ValueError, match="^line 1: the header names 'caption' "
                                                                           "more than once; give each column once$"):
        import_file(session, accounts["rita"], path, collection="twice")
    with session_scope(engine) as session:
        assert session.scalar(select(func.count(Caption.id))) == 0


def test_imported_markings_follow_the_marking_rules_and_are_counted_as_stored(engine, accounts, tmp_path, make_png):
    """A marking with no critical object is refused, as on screen (`mark_critical`); a phrase
    is found in the caption by the rule that stores its span (the check case-folded, so
    'straße' passed it and then failed in planning, naming no row); a caption marked twice by
    one annotator keeps the last marking and counts once."""
    from db.models import CriticalAnnotation

    (tmp_path / "a.png").write_bytes(make_png())
    bad = [{"image": "a.png", "caption": "a bird on a lawn", "backgrounds": ["lawn"], "annotator": "bea"},
           {"image": "a.png", "caption": "Die STRASSE ist nass", "language": "de", "critical_objects": ["straße"]}]
    with pytest.raises(ImportRejected) as rejected:
        _import_rows(engine, accounts, tmp_path / "bad.jsonl", bad, "bad")
    assert rejected.value.errors == [
        "line 1: a marking needs at least one critical object (field `critical_objects`)",
        "line 2: not in the caption text: 'straße'"]
    twice = [{"image": "a.png", "caption": "a bird on a tree", "caption_id": "q", "critical_objects": [name],
              "annotator": "ann"} for name in ("bird", "Tree")]
    report = _import_rows(engine, accounts, tmp_path / "twice.jsonl", twice, "twice")
    assert report.counts["critical_annotations"] == 1
    with session_scope(engine) as session:
        (marking,) = session.scalars(select(CriticalAnnotation))
        assert (marking.critical_objects, marking.spans["critical_objects"]) == (["Tree"], [[12, 16]])
