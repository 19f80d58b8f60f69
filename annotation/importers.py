"""Import collections: CSV, JSONL, a zip of images with a manifest, CLIPScore / PAC-S JSON.

An import is all or nothing. Every row is checked first (images decoded, fields validated,
parents resolved); if any row is bad, nothing is written and `ImportRejected` lists every
bad row and why. Otherwise everything is written in one transaction, so a crash or a kill
part-way leaves the database without any of the import.

Row fields (CSV columns, JSONL keys, manifest entries):
  image            image file, relative to the manifest (or a zip member name),
                   or `sha256:<hex>` of an image already in the store        (required)
  caption | text   the caption                                                (required)
  language | lang  language code (default `en`)
  kind             reference / candidate / perturbed / transcreated (default candidate)
  model | source_model   the captioning model that wrote it
  image_id         your id of the image (rows with the same id share the image)
  caption_id       your id of the caption; rows repeating it add ratings to that caption
  parent_id        caption_id of the caption this one was derived from (perturbed ...)
  op | perturbation_op   perturbation operation (required for kind perturbed)
  perturbation     object of perturbation parameters (p, seed, changed_spans ...)
  references       list of reference captions of the image
  annotator        who gave the rating in this row (accounts are created, without login)
  score | overall, fluency, relevance, descriptiveness   rating values in [0, 1]
  critical_objects, backgrounds, relationships   lists of phrases of the caption (credited
                   to `annotator`, else to the login-less account "imported")
In CSV, list and object fields are JSON text (e.g. `["a man", "a dog"]`).
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from sqlalchemy import select
from sqlalchemy.orm import Session

from annotation.accounts import RESEARCH_ROLES, require_role, validate_name
from annotation.captions import add_caption, get_or_create_collection, validate_caption_text, validate_language
from annotation.image_store import MAX_IMAGE_BYTES, ImageFacts, add_inspected_image, inspect_image
from annotation.tasks import mark_critical, validate_rating_values
from db.models import CAPTION_KINDS, Caption, Collection, Image, ImportRecord, Rating, User

FORMATS = ("csv", "jsonl", "zip", "clipscore")
MANIFEST_NAMES = ("manifest.jsonl", "manifest.csv", "manifest.json")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tiff", ".tif", ".gif", ".webp", ".bmp")
BATCH_SIZE = 50
# Account credited with critical-object markings whose row names no annotator.
UNNAMED_ANNOTATOR = "imported"

Progress = Callable[[str, int, int], None]


class ImportRejected(ValueError):
    """Raised when rows are bad; nothing was written. `errors` holds one line per problem."""

    def __init__(self, source: str, errors: list[str]):
        self.source = source
        self.errors = errors
        shown = "\n  ".join(errors)
        super().__init__(f"{source}: import rejected, nothing written ({len(errors)} problems):\n  {shown}")


@dataclass
class ImportReport:
    import_id: int
    collection: str
    source: str
    format: str
    counts: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"import_id": self.import_id, "collection": self.collection, "source": self.source,
                "format": self.format, "counts": self.counts}


@dataclass
class _ImageSource:
    """Where a row's image bytes come from, and what they were checked to be."""

    key: str  # sha256:<hex>, or the manifest path / zip member name
    label: str
    read: Callable[[], bytes] | None
    facts: ImageFacts | None = None
    existing_sha256: str | None = None


@dataclass
class _Row:
    label: str
    image: _ImageSource
    text: str
    language: str
    kind: str
    source_model: str | None
    image_external_id: str | None
    caption_id: str | None
    parent_id: str | None
    perturbation: dict | None
    references: list[str]
    annotator: str | None
    rating: dict | None
    critical: dict | None


# ---------------------------------------------------------------------------------------
# reading sources into raw dict rows


def detect_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".zip":
        return "zip"
    if suffix == ".json":
        return "clipscore"
    raise ValueError(f"{path}: cannot tell the import format from the suffix; use --format ({', '.join(FORMATS)})")


def _csv_rows(text: str) -> list[tuple[str, dict | str]]:
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames:
        return []
    rows = []
    for record in reader:
        label = f"line {reader.line_num}"
        if None in record:
            rows.append((label, "more fields than the header has columns"))
            continue
        rows.append((label, {k.strip(): (v if v is None else v.strip()) for k, v in record.items() if k}))
    return rows


def _jsonl_rows(text: str) -> list[tuple[str, dict | str]]:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        label = f"line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            rows.append((label, f"not valid JSON ({exc.msg})"))
            continue
        rows.append((label, record if isinstance(record, dict) else "not a JSON object"))
    return rows


def _json_list_rows(text: str, source: str) -> list[tuple[str, dict | str]]:
    try:
        records = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source}: not valid JSON ({exc})") from exc
    if not isinstance(records, list):
        raise ValueError(f"{source}: a JSON manifest must be a list of row objects")
    return [(f"entry {i}", r if isinstance(r, dict) else "not a JSON object") for i, r in enumerate(records)]


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{source}: not UTF-8 text ({exc})") from exc


def _rows_for(name: str, text: str) -> list[tuple[str, dict | str]]:
    if name.endswith(".csv"):
        return _csv_rows(text)
    if name.endswith(".json"):
        return _json_list_rows(text, name)
    return _jsonl_rows(text)


class _FileImages:
    """Images referenced by relative path from a manifest on disk (confined to its folder)."""

    def __init__(self, base: Path):
        self.base = base.resolve()

    def source(self, ref: str) -> _ImageSource | str:
        relative = PurePosixPath(ref.replace("\\", "/"))
        if relative.is_absolute() or ".." in relative.parts:
            return f"image path {ref!r} must be relative to the manifest's folder, without '..'"
        path = (self.base / relative).resolve()
        if not path.is_relative_to(self.base) or not path.is_file():
            return f"image {ref!r} not found next to the manifest"
        return _ImageSource(key=str(relative), label=ref, read=path.read_bytes)


class _ZipImages:
    """Images looked up by member name inside a zip (never extracted to disk paths)."""

    def __init__(self, archive: zipfile.ZipFile, prefix: str):
        self.archive = archive
        self.members = {info.filename: info for info in archive.infolist() if not info.is_dir()}
        self.prefix = prefix

    def source(self, ref: str) -> _ImageSource | str:
        name = self.prefix + ref.replace("\\", "/").lstrip("./")
        info = self.members.get(name)
        if info is None:
            return f"image {ref!r} is not in the zip"
        if info.file_size > MAX_IMAGE_BYTES:
            return f"image {ref!r} is larger than {MAX_IMAGE_BYTES} bytes"
        return _ImageSource(key=name, label=ref, read=lambda: self.archive.read(info))


def _find_manifest(archive: zipfile.ZipFile, source: str) -> tuple[str, str]:
    names = [n for n in archive.namelist() if not n.endswith("/")]
    for candidate in MANIFEST_NAMES:
        for name in names:
            if name == candidate or (name.count("/") == 1 and name.endswith("/" + candidate)):
                return name, name[: -len(candidate)]
    raise ValueError(f"{source}: the zip has no {' / '.join(MANIFEST_NAMES)} at its top level")


def _clipscore_rows(path: Path, references: Path | None, image_dir: Path | None,
                    source_model: str | None) -> list[tuple[str, dict | str]]:
    if image_dir is None:
        raise ValueError("the CLIPScore / PAC-S format needs --image-dir (images named <image_id>.<ext>)")
    if not image_dir.is_dir():
        raise ValueError(f"{image_dir}: not a directory")

    def load(json_path: Path) -> dict:
        try:
            data = json.loads(_decode(json_path.read_bytes(), str(json_path)))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{json_path}: not valid JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise ValueError(f"{json_path}: expected an object keyed by image id")
        return data

    candidates = load(path)
    refs = load(references) if references else {}
    images = {}
    for file in sorted(image_dir.iterdir()):
        if file.is_file() and file.suffix.lower() in IMAGE_SUFFIXES:
            images.setdefault(file.stem, file.name)
    rows: list[tuple[str, dict | str]] = []
    for image_id, candidate in candidates.items():
        label = f"candidate {image_id!r}"
        if not isinstance(candidate, str):
            rows.append((label, "the candidate must be a string"))
            continue
        reference_list = refs.get(image_id, [])
        if isinstance(reference_list, str):
            reference_list = [reference_list]
        if image_id not in images:
            rows.append((label, f"no image named {image_id}.<png|jpg|...> in {image_dir}"))
            continue
        rows.append((label, {"image": images[image_id], "image_id": image_id, "caption": candidate,
                             "kind": "candidate", "model": source_model, "references": reference_list}))
    for image_id in refs:
        if image_id not in candidates:
            rows.append((f"references {image_id!r}", "references for an image id that has no candidate"))
    return rows


# ---------------------------------------------------------------------------------------
# validation


def _get(record: dict, *names: str):
    for name in names:
        value = record.get(name)
        if value is not None and value != "":
            return value
    return None


def _as_list(value, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{what}: not a valid JSON list ({exc.msg})") from None
        else:
            value = [text]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a list of strings")
    return [v.strip() for v in value if v.strip()]


def _as_object(value, what: str) -> dict | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{what}: not a valid JSON object ({exc.msg})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be an object")
    return value


def _parse_row(label: str, record: dict, images, existing_sha: set[str]) -> tuple[_Row | None, list[str]]:
    problems: list[str] = []

    def check(fn, *args):
        try:
            return fn(*args)
        except ValueError as exc:
            problems.append(str(exc))
            return None

    image_ref = _get(record, "image", "image_path", "file_name")
    image = None
    if not isinstance(image_ref, str):
        problems.append("no image given (field `image`)")
    elif image_ref.startswith("sha256:"):
        digest = image_ref[7:].lower()
        if digest not in existing_sha:
            problems.append(f"image {image_ref} is not in the store")
        else:
            image = _ImageSource(key=image_ref, label=image_ref, read=None, existing_sha256=digest)
    else:
        found = images.source(image_ref)
        if isinstance(found, str):
            problems.append(found)
        else:
            image = found
    text = check(validate_caption_text, _get(record, "caption", "text", "candidate"))
    language = check(validate_language, str(_get(record, "language", "lang") or "en"))
    kind = str(_get(record, "kind") or "candidate")
    if kind not in CAPTION_KINDS:
        problems.append(f"unknown kind {kind!r} (choose one of {', '.join(CAPTION_KINDS)})")
    parent_id = _get(record, "parent_id", "parent")
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
    if annotator is not None:
        annotator = check(validate_name, str(annotator))
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
    if any(_get(record, name) is not None for name in ("critical_objects", "backgrounds", "relationships")):
        critical = {name: check(_as_list, _get(record, name), name) or []
                    for name in ("critical_objects", "backgrounds", "relationships")}
        if text:
            lowered = text.casefold()
            missing = [p for group in critical.values() for p in group if p.casefold() not in lowered]
            if missing:
                problems.append(f"marked phrases not in the caption: {', '.join(map(repr, missing))}")
    if problems:
        return None, problems
    return _Row(label=label, image=image, text=text, language=language, kind=kind,
                source_model=str(_get(record, "model", "source_model")) if _get(record, "model", "source_model") else None,
                image_external_id=str(_get(record, "image_id")) if _get(record, "image_id") is not None else None,
                caption_id=str(_get(record, "caption_id", "id")) if _get(record, "caption_id", "id") is not None else None,
                parent_id=str(parent_id) if parent_id is not None else None, perturbation=perturbation,
                references=references, annotator=annotator, rating=rating, critical=critical), []


def _validate(raw_rows, images, session: Session, progress: Progress | None) -> tuple[list[_Row], list[str]]:
    existing_sha = set(session.scalars(select(Image.sha256)))
    errors: list[str] = []
    rows: list[_Row] = []
    checked: dict[str, _ImageSource | str] = {}
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
    errors.extend(_check_cross_row(rows))
    return rows, errors


def _check_cross_row(rows: list[_Row]) -> list[str]:
    errors = []
    first: dict[str, _Row] = {}
    for row in rows:
        if row.caption_id is None:
            continue
        seen = first.setdefault(row.caption_id, row)
        if seen is not row and (seen.text != row.text or seen.image.key != row.image.key):
            errors.append(f"{row.label}: caption_id {row.caption_id!r} was used by {seen.label} "
                          "for a different caption or image")
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
    return errors


# ---------------------------------------------------------------------------------------
# writing


def _resolve_parents(session: Session, rows: list[_Row], errors: list[str]) -> dict[str, Caption]:
    """Parents named by caption_id in the file, else captions already in the database."""
    in_file = {row.caption_id for row in rows if row.caption_id}
    outside = {row.parent_id for row in rows if row.parent_id and row.parent_id not in in_file}
    found: dict[str, Caption] = {}
    for external_id in outside:
        matches = list(session.scalars(select(Caption).where(Caption.external_id == external_id).limit(2)))
        if len(matches) == 1:
            found[external_id] = matches[0]
        else:
            for row in rows:
                if row.parent_id == external_id:
                    why = "is ambiguous (several captions have it)" if matches else "is not in the file or the database"
                    errors.append(f"{row.label}: parent_id {external_id!r} {why}")
    return found


def _write(session: Session, user: User, rows: list[_Row], record: ImportRecord, collection: Collection,
           external_parents: dict[str, Caption], progress: Progress | None) -> dict:
    counts = {"rows": len(rows), "images_new": 0, "images_existing": 0, "captions": 0, "references": 0,
              "ratings": 0, "critical_annotations": 0, "annotators_created": 0}
    images: dict[str, Image] = {}
    captions: dict[str, Caption] = {}
    references: set[tuple[int, str, str]] = set()
    annotators: dict[str, User] = {}
    pending_parents: list[tuple[Caption, str]] = []

    def image_for(row: _Row) -> Image:
        if row.image.key not in images:
            if row.image.existing_sha256:
                images[row.image.key] = session.scalar(select(Image).where(Image.sha256 == row.image.existing_sha256))
                counts["images_existing"] += 1
            else:
                before = session.scalar(select(Image.id).where(Image.sha256 == row.image.facts.sha256))
                images[row.image.key] = add_inspected_image(
                    session, row.image.read(), row.image.facts, original_filename=row.image.label,
                    external_id=row.image_external_id, import_id=record.id)
                counts["images_existing" if before else "images_new"] += 1
        return images[row.image.key]

    def annotator_for(name: str) -> User:
        if name not in annotators:
            account = session.scalar(select(User).where(User.name == name))
            if account is None:
                account = User(name=name, role="annotator", password_hash=None)
                session.add(account)
                session.flush()
                counts["annotators_created"] += 1
            annotators[name] = account
        return annotators[name]

    for index, row in enumerate(rows, start=1):
        image = image_for(row)
        caption = captions.get(row.caption_id) if row.caption_id else None
        if caption is None:
            caption = Caption(image=image, text=row.text, language=row.language, kind=row.kind,
                              source_model=row.source_model, perturbation=row.perturbation,
                              perturbation_op=(row.perturbation or {}).get("op"), external_id=row.caption_id,
                              import_id=record.id, created_by_id=user.id)
            caption.collections.append(collection)
            session.add(caption)
            session.flush()
            counts["captions"] += 1
            if row.caption_id:
                captions[row.caption_id] = caption
            if row.parent_id:
                # Parents may come later in the file: linked once every row is written.
                pending_parents.append((caption, row.parent_id))
        for text in row.references:
            key = (image.id, row.language, text)
            if key not in references:
                references.add(key)
                add_caption(session, user, image, text, language=row.language, kind="reference",
                                      collection=collection, import_id=record.id)
                counts["references"] += 1
        if row.rating:
            annotator = annotator_for(row.annotator)
            session.add(Rating(caption_id=caption.id, annotator_id=annotator.id, import_id=record.id, **row.rating))
            counts["ratings"] += 1
        if row.critical:
            marker = annotator_for(row.annotator or UNNAMED_ANNOTATOR)
            mark_critical(session, marker, caption.id, **row.critical)
            counts["critical_annotations"] += 1
        if index % BATCH_SIZE == 0:
            session.flush()
            if progress:
                progress("writing", index, len(rows))
    for caption, parent_id in pending_parents:
        caption.parent = captions.get(parent_id) or external_parents.get(parent_id)
    session.flush()
    if progress:
        progress("writing", len(rows), len(rows))
    return counts


def import_file(session: Session, user: User, path: str | Path, *, collection: str | None = None,
                fmt: str | None = None, references: str | Path | None = None, image_dir: str | Path | None = None,
                source_model: str | None = None, allow_reimport: bool = False,
                progress: Progress | None = None) -> ImportReport:
    """Import `path` into `collection` (default: the file's stem) in the caller's transaction.

    Researcher or admin only. Raises `ImportRejected` (nothing written) when any row is bad.
    """
    require_role(user, *RESEARCH_ROLES)
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise ValueError(f"unknown import format {fmt!r}: choose one of {', '.join(FORMATS)}")
    source_sha = hashlib.sha256(path.read_bytes()).hexdigest()
    collection_name = collection or path.stem
    archive = None
    try:
        if fmt == "zip":
            try:
                archive = zipfile.ZipFile(path)
            except zipfile.BadZipFile as exc:
                raise ValueError(f"{path}: not a zip file ({exc})") from exc
            manifest, prefix = _find_manifest(archive, str(path))
            raw = _rows_for(manifest, _decode(archive.read(manifest), manifest))
            images = _ZipImages(archive, prefix)
        elif fmt == "clipscore":
            raw = _clipscore_rows(path, Path(references) if references else None,
                                  Path(image_dir) if image_dir else None, source_model)
            images = _FileImages(Path(image_dir))
        else:
            text = _decode(path.read_bytes(), str(path))
            raw = _csv_rows(text) if fmt == "csv" else _jsonl_rows(text)
            images = _FileImages(path.parent)
        if not raw:
            raise ImportRejected(str(path), ["no rows"])
        rows, errors = _validate(raw, images, session, progress)
        external_parents = _resolve_parents(session, rows, errors)
        if errors:
            raise ImportRejected(str(path), errors)
        target = get_or_create_collection(session, user, collection_name)
        if not allow_reimport:
            previous = session.scalar(select(ImportRecord.id).where(ImportRecord.source_sha256 == source_sha,
                                                                    ImportRecord.collection_id == target.id))
            if previous is not None:
                raise ValueError(f"{path}: this exact file was already imported into {collection_name!r} "
                                 f"(import #{previous}); pass allow_reimport / --allow-reimport to add it again")
        record = ImportRecord(format=fmt, source_name=path.name[:500], source_sha256=source_sha,
                              collection_id=target.id, user_id=user.id, counts={})
        session.add(record)
        session.flush()
        counts = _write(session, user, rows, record, target, external_parents, progress)
        record.counts = counts
        session.flush()
        return ImportReport(import_id=record.id, collection=target.name, source=str(path), format=fmt, counts=counts)
    finally:
        if archive is not None:
            archive.close()


def import_rows(session: Session, user: User, rows: list[dict], *, collection: str, base_dir: str | Path,
                source_name: str = "rows", progress: Progress | None = None) -> ImportReport:
    """Import already-parsed row dicts (same fields as a JSONL file), images relative to `base_dir`."""
    require_role(user, *RESEARCH_ROLES)
    raw = [(f"row {i}", r if isinstance(r, dict) else "not an object") for i, r in enumerate(rows, start=1)]
    parsed, errors = _validate(raw, _FileImages(Path(base_dir)), session, progress)
    external_parents = _resolve_parents(session, parsed, errors)
    if errors or not parsed:
        raise ImportRejected(source_name, errors or ["no rows"])
    target = get_or_create_collection(session, user, collection)
    digest = hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()
    record = ImportRecord(format="rows", source_name=source_name[:500], source_sha256=digest,
                          collection_id=target.id, user_id=user.id, counts={})
    session.add(record)
    session.flush()
    record.counts = _write(session, user, parsed, record, target, external_parents, progress)
    session.flush()
    return ImportReport(import_id=record.id, collection=target.name, source=source_name, format="rows",
                        counts=record.counts)

