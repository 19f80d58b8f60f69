"""The CLIPScore / PAC-S command-line JSON format, read in one place.

Candidates: ``{"image_id": "caption", ...}``; references (optional): ``{"image_id":
["reference", ...]}``, where a single string stands for a list of one (as CLIPScore's own
reader allows). Read here for `caplens score` and the Score tab
(`scoring.corpus.manifest.read_score_rows`), for analysis tables
(`scoring.analysis.datasets.load_candidates_json`) and for `caplens db import --format
clipscore` (`annotation.transfer.import_sources.clipscore_rows`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

CANDIDATES_SHAPE = '{"image_id": "caption", ...}'
REFERENCES_SHAPE = '{"image_id": ["reference", ...]}'


def is_candidates(data) -> bool:
    """A non-empty object whose every value is a string: a candidates file."""
    return isinstance(data, dict) and bool(data) and all(isinstance(v, str) for v in data.values())


def is_references(data) -> bool:
    """A non-empty object whose every value is a list (or, not all of them, a string): a
    references file. An object of strings only is a candidates file."""
    return (isinstance(data, dict) and bool(data) and all(isinstance(v, (list, str)) for v in data.values())
            and not is_candidates(data))


def references_of(value) -> list[str]:
    """One image's references: a list of strings, or one string as a list of one."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(r, str) for r in value):
        return list(value)
    raise ValueError("references must be a list of strings")


@dataclass
class ClipScoreEntry:
    """One candidate of the file, its references, and why it cannot be used (else None)."""

    image_id: str
    candidate: str | None
    references: list[str] = field(default_factory=list)
    problem: str | None = None


def clipscore_entries(candidates, references=None, *, name: str = "candidates",
                      references_name: str = "references") -> tuple[list[ClipScoreEntry], list[str]]:
    """The entries of a candidates object (file order) with their references, and the ids of
    references that no candidate has. A file that is not an object raises ValueError; a
    candidate that is not a string, or references that are not strings, set that entry's
    ``problem``; a candidate without references gets none."""
    if not isinstance(candidates, dict):
        raise ValueError(f"{name}: expected {CANDIDATES_SHAPE}")
    if references is not None and not isinstance(references, dict):
        raise ValueError(f"{references_name}: expected {REFERENCES_SHAPE}")
    references = references or {}
    entries = []
    for image_id, candidate in candidates.items():
        entry = ClipScoreEntry(str(image_id), candidate if isinstance(candidate, str) else None)
        if entry.candidate is None:
            entry.problem = "the candidate must be a string"
        else:
            try:
                entry.references = references_of(references.get(image_id, []))
            except ValueError as exc:
                entry.problem = str(exc)
        entries.append(entry)
    extra = [str(image_id) for image_id in references if image_id not in candidates]
    return entries, extra
