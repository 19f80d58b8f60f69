"""Checking import rows before anything is written: fields, images, and rows against each other.

Every problem of every row is collected (one line each), so a rejected import lists them all.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from annotation.people.accounts import validate_name
from annotation.captions import validate_caption_text, validate_language
from annotation.image_store import inspect_image
from annotation.transfer.import_sources import CAPTION_TEXT_FIELDS, FileImages, ImageSource, RawRows, ZipImages, parse_json
from annotation.studies.tasks import marked_phrases, validate_rating_values
from db.models import CAPTION_KINDS, Image

BATCH_SIZE = 50  # rows between progress reports (and flushes while writing)

Progress = Callable[[str, int, int], None]
MARKING_GROUPS = ("critical_objects", "backgrounds", "relationships")  # in marked_phrases' order


@dataclass
class Row:
    """One import row after its checks: every field parsed, its image found and decoded."""

    label: str
    image: ImageSource
    text: str
    language: str
    kind: str
    source_model: str | None
    image_external_id: str | None
    caption_id: str | None  # the caption's key within the file
    external_id: str | None  # the id stored with the caption
    parent_id: str | None
    parent_in_file: bool  # parent_id is a caption_id of this file only (an export's parent_caption_id)
    perturbation: dict | None
    references: list[str]
    annotator: str | None
    rating: dict | None
    critical: dict | None  # as stored: the phrases of each group and their "spans"


def _get(record: dict, *names: str):
    for name in names:
        value = record.get(name)
        if value is not None and value != "":
            return value
    return None


def _text(value) -> str | None:
    return None if value is None else str(value)


def _as_list(value, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        value = parse_json(text, what, list, "a JSON list") if text.startswith("[") else [text]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a list of strings")
    return [v.strip() for v in value if v.strip()]


def _as_object(value, what: str) -> dict | None:
    if value is None:
        return None
    if isinstance(value, str):
        return parse_json(value, what, dict, "a JSON object")
    if not isinstance(value, dict):
        raise ValueError(f"{what}: expected a JSON object")
    return value


def _parse_row(label: str, record: dict, images, existing_sha: set[str]) -> tuple[Row | None, list[str]]:
    problems: list[str] = []

    def check(fn, *args):
        try:
            return fn(*args)
        except ValueError as exc:
            problems.append(str(exc))
            return None

    image_ref = _get(record, *IMAGE_FIELDS)
    image = None
    if not isinstance(image_ref, str):
        problems.append("no image given (field `image`)")
    elif image_ref.startswith("sha256:"):
        digest = image_ref[7:].lower()
        if digest not in existing_sha:
            problems.append(f"image {image_ref} is not in the store")
        else:
            image = ImageSource(key=image_ref, label=image_ref, read=None, existing_sha256=digest)
    else:
        found = images.source(image_ref)
        if isinstance(found, str):
            problems.append(found)
        else:
            image = found
    text = check(validate_caption_text, _get(record, *CAPTION_TEXT_FIELDS))
    language = check(validate_language, str(_get(record, "language", "lang") or "en"))
    kind = str(_get(record, "kind") or "candidate")
    if kind not in CAPTION_KINDS:
        problems.append(f"unknown kind {kind!r} (choose one of {', '.join(CAPTION_KINDS)})")
    parent_id = _get(record, "parent_id", "parent")
    # An export's parent_caption_id is the parent's id in the database it came from: it names a
    # row of the same file (its caption_id), never a stored caption's external id.
    parent_in_file = parent_id is None and _get(record, "parent_caption_id") is not None
    if parent_in_file:
        parent_id = _get(record, "parent_caption_id")
    op = _get(record, "op", "perturbation_op")
    perturbation = check(_as_object, _get(record, "perturbation"), "perturbation")
    if kind == "perturbed":
        if parent_id is None:
            problems.append("a perturbed caption needs parent_id")
        if op is None and not (perturbation or {}).get("op"):
            problems.append("a perturbed caption needs op")
    if op is not None:
        perturbation = {**(perturbation or {}), "op": str(op)}
    references = check(_as_list, _get(record, "references", "refs"), "references") or []
    annotator = _get(record, "annotator", "rater")
    if annotator is not None:  # a name the account rules refuse is that row's one problem about it
        if not isinstance(annotator, str):
            problems.append(f"annotator must be a name (text), not {type(annotator).__name__} {annotator!r}"[:200])
        elif check(validate_name, annotator) is not None:
            annotator = validate_name(annotator)
    rating = None
    values = {name: _get(record, *aliases) for name, aliases in
              (("overall", ("overall", "score", "rating")), ("fluency", ("fluency",)),
               ("relevance", ("relevance",)), ("descriptiveness", ("descriptiveness",)))}
    if any(v is not None for v in values.values()):
        if annotator is None:
            problems.append("a rating needs the annotator who gave it (field `annotator`)")
        if kind == "reference":
            problems.append("reference captions are not rated")
        rating = check(validate_rating_values, values)
    critical = None
    if any(_get(record, name) is not None for name in MARKING_GROUPS):
        critical = {name: check(_as_list, _get(record, name), name) or [] for name in MARKING_GROUPS}
        # Found as the marking is stored (marked_phrases: one rule for what matches, here and
        # when marking on screen), and refused as `mark_critical` refuses it.
        critical = check(marked_phrases, text, *(critical[name] for name in MARKING_GROUPS)) if text else None
        if critical is not None and not critical["critical_objects"]:
            problems.append("a marking needs at least one critical object (field `critical_objects`)")
    caption_id = _get(record, "caption_id", "id")
    if problems:
        return None, problems
    return Row(label=label, image=image, text=text, language=language, kind=kind,
               source_model=str(_get(record, "model", "source_model")) if _get(record, "model", "source_model") else None,
               image_external_id=str(_get(record, "image_id")) if _get(record, "image_id") is not None else None,
               caption_id=_text(caption_id), parent_id=_text(parent_id), parent_in_file=parent_in_file,
               # an export's caption_id is its database's id; the caption's own is caption_external_id
               external_id=_text(_get(record, "caption_external_id") if "caption_external_id" in record
                                 else caption_id),
               perturbation=perturbation,
               references=references, annotator=annotator, rating=rating, critical=critical), []


IMAGE_FIELDS = ("image", "image_path", "file_name")


def unread_columns(raw_rows: RawRows) -> list[str]:
    """One line when no row has an image or caption field: a file with other columns (a
    spreadsheet's own headers, say) gets its columns named, not only "no image given" per row."""
    columns = sorted({str(key) for _, record in raw_rows if isinstance(record, dict) for key in record})
    if not columns or set(columns) & {*IMAGE_FIELDS, *CAPTION_TEXT_FIELDS}:
        return []
    return [f"the file has no column an import reads (its columns: {', '.join(columns)}); each row needs `image` and "
            "`caption` (or `text` or `candidate`)"]


def validate_rows(raw_rows: RawRows, images: FileImages | ZipImages, session: Session,
                  progress: Progress | None) -> tuple[list[Row], list[str]]:
    existing_sha = set(session.scalars(select(Image.sha256)))
    errors: list[str] = unread_columns(raw_rows)
    rows: list[Row] = []
    checked: dict[str, ImageSource | str] = {}
    for index, (label, record) in enumerate(raw_rows, start=1):
        if isinstance(record, str):
            errors.append(f"{label}: {record}")
            continue
        row, problems = _parse_row(label, record, images, existing_sha)
        if row is not None and row.image.read is not None:
            # Decode each distinct image once, however many rows use it.
            known = checked.get(row.image.key)
            if known is None:
                try:
                    row.image.facts = inspect_image(row.image.read(), row.image.label)
                    known = checked[row.image.key] = row.image
                except (ValueError, OSError) as exc:
                    known = checked[row.image.key] = str(exc)
            if isinstance(known, str):
                problems.append(known)
                row = None
            else:
                row.image = known
        errors.extend(f"{label}: {p}" for p in problems)
        if row is not None:
            rows.append(row)
        if progress and index % BATCH_SIZE == 0:
            progress("checking", index, len(raw_rows))
    errors.extend(check_cross_row(rows))
    return rows, errors


def check_cross_row(rows: list[Row]) -> list[str]:
    errors = []
    first: dict[str, Row] = {}
    for row in rows:
        if row.caption_id is None:
            continue
        seen = first.setdefault(row.caption_id, row)
        if seen is row:
            continue
        differs = [name for name in ("text", "language", "kind") if getattr(seen, name) != getattr(row, name)]
        differs += [name for name in ("source_model", "parent_id", "perturbation")  # a row may leave these out
                    if None not in (getattr(seen, name), getattr(row, name)) and getattr(seen, name) != getattr(row, name)]
        if seen.image.key != row.image.key:
            differs.insert(0, "image")
        if differs:  # the rows are one caption: the first row's fields would have been kept silently
            errors.append(f"{row.label}: caption_id {row.caption_id!r} was used by {seen.label} "
                          f"with another {', '.join('caption' if d == 'text' else d for d in differs)}")
    pairs = set()
    for row in rows:
        if row.annotator and row.rating:
            key = (row.caption_id or id(row), row.annotator)
            if key in pairs:
                errors.append(f"{row.label}: {row.annotator} rates caption {row.caption_id!r} twice")
            pairs.add(key)
    for row in rows:
        if row.parent_id is not None and row.parent_id == row.caption_id:
            errors.append(f"{row.label}: a caption cannot be its own parent")
        elif (parent := first.get(row.parent_id)) is not None and image_sha256(parent) != image_sha256(row):
            errors.append(f"{row.label}: parent_id {row.parent_id!r} ({parent.label}) is a caption of another image")
    errors.extend(_parent_cycles(first))
    return errors


def image_sha256(row: Row) -> str:
    """The SHA-256 the row's image is stored under (images are stored by the upload's hash), so
    that one image named two ways is one image."""
    return row.image.existing_sha256 or row.image.facts.sha256


def _parent_cycles(first: dict[str, Row]) -> list[str]:
    """A line for each caption whose parents lead back to it (A from B, B from A): such
    captions have no original, and following parents (lineage, PR-MCS pairs) would not end."""
    state: dict[str, str] = {}  # caption_id -> "walking" | "done"
    errors = []
    for start in first:
        path: list[str] = []
        current: str | None = start
        while current in first and current not in state:
            state[current] = "walking"
            path.append(current)
            current = first[current].parent_id
        if current in first and state.get(current) == "walking":
            cycle = path[path.index(current):]
            errors.extend(f"{first[c].label}: parent_id {first[c].parent_id!r} leads back to caption_id {c!r} "
                          f"(a cycle of parents: {' -> '.join(map(repr, cycle + [current]))})"
                          for c in cycle if len(cycle) > 1)
        state.update(dict.fromkeys(path, "done"))
    return errors
