"""CSV-injection escaping (OWASP rule): formula-looking text is defused, everything else reads
back exactly as it was written."""
from __future__ import annotations

import csv
import io

import pandas as pd
import pytest

from scoring.csv_safe import escape_cell, frame_to_csv, read_csv_frame, unescape_cell, write_csv, write_rows

DANGEROUS = ["=HYPERLINK(\"http://evil.example\",\"click\")", "+1+2", "-2+3", "@SUM(A1:A9)", "\tstarts with a tab",
             "\rstarts with CR", "=", "'=already quoted once", "''@twice"]
HARMLESS = ["a dog on the grass", "", " =space first", "x=1", "ein Hund, der \"läuft\"", "line one\nline two",
            "'tis the season", "''", "'", "日本語のキャプション", "a, b; c|d", "%PDF", "[1, 2]"]


@pytest.mark.parametrize("text", DANGEROUS)
def test_formula_text_gets_one_leading_apostrophe_and_reads_back(text):
    assert escape_cell(text) == "'" + text
    assert unescape_cell(escape_cell(text)) == text


@pytest.mark.parametrize("text", HARMLESS)
def test_other_text_is_left_alone(text):
    assert escape_cell(text) == text
    assert unescape_cell(text) == text


@pytest.mark.parametrize("value", [-0.5, -3, 0, 1.25, True, None])
def test_numbers_are_not_text_and_stay_numbers(value):
    assert escape_cell(value) is value


def test_csv_round_trip_is_exact_and_no_cell_starts_a_formula(tmp_path):
    texts = DANGEROUS + HARMLESS
    rows = [{"text": t, "score": -0.25 * i, "refs": [t, "plain"], "=header": i} for i, t in enumerate(texts)]
    path = tmp_path / "out.csv"
    assert write_csv(path, ["text", "score", "refs", "=header"], rows) == len(rows)
    raw = list(csv.reader(path.open(encoding="utf-8", newline="")))
    assert raw[0] == ["text", "score", "refs", "'=header"]
    for cells in raw[1:]:
        text_cell = cells[0]
        assert not text_cell or text_cell[0] not in "=+-@\t\r"
    read = [{unescape_cell(k): unescape_cell(v) for k, v in zip(raw[0], cells)} for cells in raw[1:]]
    assert [r["text"] for r in read] == texts
    assert [float(r["score"]) for r in read] == [row["score"] for row in rows]  # -0.25 stays a number
    assert [r["refs"] for r in read][0].startswith('["=HYPERLINK')  # JSON lists start with "[": safe as they are
    # The only change on disk: one apostrophe in front of each dangerous cell.
    assert [cells[0] for cells in raw[1:]] == ["'" + t for t in DANGEROUS] + HARMLESS


def test_tab_separated_rows_are_escaped_too():
    buffer = io.StringIO()
    write_rows(buffer, ["a"], [{"a": "=1+1"}, {"a": "\tx"}], delimiter="\t")
    lines = list(csv.reader(io.StringIO(buffer.getvalue()), delimiter="\t"))
    assert lines == [["a"], ["'=1+1"], ["'\tx"]]


def test_dataframe_round_trip(tmp_path):
    frame = pd.DataFrame({"caption": DANGEROUS + ["a dog", " =space first", "x=1", "last"], "value": [-1.5 + i for i in range(13)],
                          "=metric": list(range(13))})
    frame.loc[3, "caption"] = None
    path = frame_to_csv(frame, tmp_path / "table.csv")
    assert path.read_text(encoding="utf-8").splitlines()[0] == "caption,value,'=metric"
    back = read_csv_frame(path)
    assert list(back.columns) == list(frame.columns)
    assert back["caption"].tolist()[:3] == DANGEROUS[:3] and pd.isna(back.loc[3, "caption"])
    assert back["caption"].tolist()[4:] == frame["caption"].tolist()[4:]
    assert back["value"].tolist() == frame["value"].tolist()


ATTACK = "x;=cmd|' /C calc'!A0;y"


@pytest.mark.parametrize("separator", [",", ";", "\t"])
def test_no_cell_starts_a_formula_whatever_separator_the_spreadsheet_splits_at(tmp_path, separator):
    """The issue's cell, and a formula after each separator inside a text, written with "," and
    read back with each of "," ";" and tab: no cell starts with a formula character there, and
    CapLens reads back exactly what it wrote."""
    texts = [ATTACK, f"a{separator}=1+1", f'a{separator}"@SUM(A1)"', f"a{separator}'=already", "a; b, c\td",
             f"a{separator}{separator}-2"]
    path = tmp_path / "out.csv"
    write_csv(path, ["text"], [{"text": t} for t in texts])
    on_disk = path.read_text(encoding="utf-8")
    assert "x;'=cmd|' /C calc'!A0;y" in on_disk and "a; b, c\td" in on_disk
    for split_at in (",", ";", "\t"):
        for row in csv.reader(io.StringIO(on_disk, newline=""), delimiter=split_at):
            for cell in row:
                assert not cell or cell[0] not in "=+-@", (split_at, row)
    back = [unescape_cell(row[0]) for row in list(csv.reader(path.open(encoding="utf-8", newline="")))[1:]]
    assert back == texts


@pytest.mark.parametrize("text, written", [
    ("a\n=1", "a\n'=1"), ('a;"=1"', "a;\"'=1\""), ("a;'b", "a;'b"), ("a,''-1", "a,'''-1"), ("\t\t=", "'\t'\t'="),
])
def test_a_formula_after_a_line_break_or_a_quote_is_escaped_and_reads_back(text, written):
    assert escape_cell(text) == written
    assert unescape_cell(written) == text
