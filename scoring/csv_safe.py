"""CSV files a spreadsheet cannot run: every CSV CapLens writes goes through this module.

A text cell whose first character makes a spreadsheet read it as a formula (``=``, ``+``,
``-``, ``@``, tab or carriage return; the OWASP CSV-injection rule) is written with a leading
apostrophe, which spreadsheets show as plain text. A spreadsheet may also split the file at
another separator than the one it was written with (``;`` in much of Europe, tabs, new
lines), so the same holds wherever a cell could start inside the text: after each ``,``,
``;``, tab, carriage return and line feed, past any double quotes there
(``x;=cmd|' /C calc'!A0;y`` is written ``x;'=cmd|' /C calc'!A0;y``). So that reading back
is exact, text that already has apostrophes followed by such a character there gets one more
apostrophe, and :func:`unescape_cell` removes exactly one. Every other cell is written
unchanged; numbers stay numbers (a score of -0.5 is not text and is not escaped). Header
cells follow the same rule (metric names come from users' registries).

defusedcsv (kept in the package lists) was weighed and not used: it looks at a cell's first
character only, and changes ``|`` in a way reading back cannot undo.

CapLens's own readers of CSV it may have written (fine-tuning sets, score tables) read
through :func:`read_csv_frame`, so an exported caption "=1+1" trains and analyses as "=1+1".
"""
from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

FORMULA_START = "=+-@\t\r"
SEPARATORS = ",;\t\r\n"  # where a spreadsheet may start a new cell inside a text
_CELL_START = rf"(?:^|(?<=[{re.escape(SEPARATORS)}]))(\"*)"  # and the double quotes that open a cell
_FORMULA_AHEAD = rf"(?='*[{re.escape(FORMULA_START)}])"
_NEEDS_ESCAPE = re.compile(_CELL_START + _FORMULA_AHEAD)
_ESCAPED = re.compile(_CELL_START + "'" + _FORMULA_AHEAD)


def escape_cell(value: Any) -> Any:
    """`value` as it is safe to write: text a spreadsheet would evaluate, at its start or after
    any separator, gets an apostrophe there."""
    if isinstance(value, str):
        return _NEEDS_ESCAPE.sub(r"\1'", value)
    return value


def unescape_cell(value: Any) -> Any:
    """The inverse of :func:`escape_cell` on text read back from a CapLens CSV."""
    if isinstance(value, str) and "'" in value:
        return _ESCAPED.sub(r"\1", value)
    return value


def csv_cell(value: Any) -> Any:
    """One cell of a row dict: None empty, lists and dicts as JSON, text escaped."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple, dict)):
        value = json.dumps(value, ensure_ascii=False)
    return escape_cell(value)


def write_rows(handle: IO[str], columns: Sequence[str], rows: Iterable[Mapping[str, Any]],
               delimiter: str = ",") -> int:
    """Write a header and `rows` (dicts; missing keys empty) row by row; returns the row count."""
    writer = csv.writer(handle, delimiter=delimiter)
    writer.writerow([escape_cell(name) for name in columns])
    count = 0
    for row in rows:
        writer.writerow([csv_cell(row.get(name)) for name in columns])
        count += 1
    return count


def write_csv(path: str | Path, columns: Sequence[str], rows: Iterable[Mapping[str, Any]],
              delimiter: str = ",") -> int:
    """:func:`write_rows` into a new UTF-8 file at `path`."""
    with Path(path).open("w", encoding="utf-8", newline="") as handle:
        return write_rows(handle, columns, rows, delimiter)


def frame_to_csv(frame, path: str | Path, delimiter: str = ",") -> Path:
    """A pandas DataFrame as CSV (without its index), text cells and column names escaped."""
    safe = _map_text(frame.rename(columns=escape_cell), escape_cell)
    # CRLF rows, as the csv module writes them: a cell holding a bare CR is then quoted.
    safe.to_csv(path, index=False, sep=delimiter, lineterminator="\r\n")
    return Path(path)


def read_csv_frame(path: str | Path, delimiter: str = ","):
    """A CSV read with pandas, the escaping of :func:`frame_to_csv` / :func:`write_rows` undone."""
    import pandas as pd

    return _map_text(pd.read_csv(path, sep=delimiter).rename(columns=unescape_cell), unescape_cell)


def _map_text(frame, function):
    """`frame` with `function` applied to every cell of its text (or mixed) columns."""
    from pandas.api.types import is_string_dtype

    frame = frame.copy()
    for position, dtype in enumerate(frame.dtypes):
        if is_string_dtype(dtype):
            frame.isetitem(position, frame.iloc[:, position].map(function))
    return frame
