"""The world's three seed ranges, named here and nowhere else.

- train: scenes every recipe and world model trains on;
- validation: the only scenes used to choose checkpoints, learning rates and steps (and the
  demo collection's scenes);
- test: only for reported tables, never for a choice.

Claims are also re-checked on scenes outside all three (seeds from OUTSIDE_FIRST_SEED), so a
result tuned to one range shows up as a broken claim there.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SeedRange:
    """Scene seeds first <= seed < stop."""

    name: str
    first: int
    stop: int

    def __contains__(self, seed: int) -> bool:
        return self.first <= seed < self.stop

    def overlaps(self, first: int, count: int) -> bool:
        return first < self.stop and self.first < first + count


SPLITS = {
    "train": SeedRange("train", 0, 500_000),
    "validation": SeedRange("validation", 500_000, 1_000_000),
    "test": SeedRange("test", 1_000_000, 1_500_000),
}
ALIASES = {"heldout": "test"}  # the name earlier versions gave the test range
OUTSIDE_FIRST_SEED = 2_000_000  # a range outside all three, for re-checking claims


def split_range(name: str) -> SeedRange:
    key = ALIASES.get(name, name)
    if key not in SPLITS:
        raise ValueError(f"unknown split {name!r}; expected one of {', '.join(SPLITS)}")
    return SPLITS[key]


def check_report_range(first: int, count: int) -> str:
    """Refuse a reported range that overlaps train or validation (it would report scenes that
    trained a model or chose its settings); returns 'test' or 'outside'."""
    if count < 1:
        raise ValueError("a range needs at least one scene")
    if first < 0:  # random.Random(-s) is random.Random(s): these would be training scenes
        raise ValueError(f"seeds are 0 or more (got {first}): seed -s gives the same scene as seed s")
    for name in ("train", "validation"):
        if SPLITS[name].overlaps(first, count):
            r = SPLITS[name]
            raise ValueError(f"seeds {first}..{first + count - 1} overlap the {name} range "
                             f"({r.first}..{r.stop - 1}): report on the test range ({SPLITS['test'].first}..) "
                             f"or outside all ranges ({OUTSIDE_FIRST_SEED}..)")
    test = SPLITS["test"]
    if test.overlaps(first, count) and not (first in test and first + count - 1 in test):
        raise ValueError(f"seeds {first}..{first + count - 1} straddle the end of the test range ({test.stop - 1})")
    return "test" if first in test else "outside"


def check_range(first: int, count: int, choose: bool = False) -> str:
    """The kind of a benchmark's seed range: with `choose`, it must lie in validation (to choose
    checkpoints or settings, never to report); otherwise `check_report_range`."""
    if not choose:
        return check_report_range(first, count)
    validation = SPLITS["validation"]
    if count < 1 or not (first in validation and first + count - 1 in validation):
        raise ValueError(f"choosing runs on the validation range ({validation.first}..{validation.stop - 1})")
    return "validation (for choosing, not a result)"
