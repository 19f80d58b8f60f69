"""The published correlation and accuracy figures, as data (`published_values.toml`).

One row per metric x benchmark x coefficient, with the value as the paper prints it (x 100),
where it was read (`source`), the paper table (`table`) and protocol notes. `caplens analyze
reproduce` sets our value beside it. Rows only exist where a number was read in a named
source; docs/analysis.md lists what is missing.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PUBLISHED_FILE = Path(__file__).resolve().parent / "published_values.toml"
REQUIRED_FIELDS = ("metric", "benchmark", "coefficient", "value", "source", "table")


@dataclass(frozen=True)
class PublishedValue:
    metric: str
    benchmark: str
    coefficient: str
    value: float
    source: str
    table: str
    notes: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return self.metric, self.benchmark, self.coefficient


def read_published(path: Path = PUBLISHED_FILE) -> list[PublishedValue]:
    """Every row of a published-values file; ValueError naming the row when one is incomplete
    or repeats the metric x benchmark x coefficient of an earlier row."""
    with open(path, "rb") as handle:
        try:
            data = tomllib.load(handle)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{Path(path).name}: not valid TOML ({exc})") from None
    rows, seen = [], {}
    for number, entry in enumerate(data.get("value", []), 1):
        missing = [f for f in REQUIRED_FIELDS if entry.get(f) in (None, "")]
        if missing:
            raise ValueError(f"{Path(path).name}: value {number} lacks {', '.join(missing)}")
        row = PublishedValue(str(entry["metric"]), str(entry["benchmark"]), str(entry["coefficient"]),
                             float(entry["value"]), str(entry["source"]), str(entry["table"]),
                             str(entry.get("notes", "")))
        if row.key in seen:
            raise ValueError(f"{Path(path).name}: value {number} repeats {' / '.join(row.key)} (value {seen[row.key]})")
        seen[row.key] = number
        rows.append(row)
    return rows


@lru_cache(maxsize=1)
def published_table() -> dict[tuple[str, str, str], PublishedValue]:
    """The package's published values by (metric, benchmark, coefficient)."""
    return {row.key: row for row in read_published()}


def published_value(metric: str, benchmark: str, coefficient: str) -> PublishedValue | None:
    return published_table().get((metric, benchmark, coefficient))
