"""CSV files a spreadsheet cannot run: every CSV CapLens writes goes through this module.

A text cell whose first character makes a spreadsheet read it as a formula (``=``, ``+``,
``-``, ``@``, tab or carriage return; the OWASP CSV-injection rule) is written with a leading
apostrophe, which spreadsheets show as plain text. So that reading back is exact, a text cell
that already starts with apostrophes followed by such a character gets one more apostrophe,
and :func:`unescape_cell` removes exactly one. Every other cell is written unchanged; numbers
stay numbers (a score of -0.5 is not text and is not escaped). Header cells follow the same
rule (metric names come from users' registries).

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
_NEEDS_ESCAPE = re.compile(r"'*[=+\-@\t\r]")


def escape_cell(value: Any) -> Any:
    """`value` as it is safe to write: text a spreadsheet would evaluate gets a leading apostrophe."""
    if isinstance(value, str) and _NEEDS_ESCAPE.match(value):
        return "'" + value
    return value


def unescape_cell(value: Any) -> Any:
    """The inverse of :func:`escape_cell` on text read back from a CapLens CSV."""
    if isinstance(value, str) and value.startswith("'") and _NEEDS_ESCAPE.match(value, 1):
        return value[1:]
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
