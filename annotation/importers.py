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

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from annotation.accounts import RESEARCH_ROLES, require_role
from annotation.captions import add_caption, get_or_create_collection
from annotation.image_store import add_inspected_image
from annotation.import_checks import BATCH_SIZE, Progress, Row, validate_rows
from annotation.import_sources import FORMATS, FileImages, RawRows, ZipImages, detect_format, open_source
from annotation.tasks import mark_critical
from db.models import Caption, Collection, Image, ImportRecord, Rating, User

# Account credited with critical-object markings whose row names no annotator.
UNNAMED_ANNOTATOR = "imported"


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


def resolve_parents(session: Session, rows: list[Row], errors: list[str]) -> dict[str, Caption]:
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


def write_rows(session: Session, user: User, rows: list[Row], record: ImportRecord, collection: Collection,
               external_parents: dict[str, Caption], progress: Progress | None) -> dict:
    counts = {"rows": len(rows), "images_new": 0, "images_existing": 0, "captions": 0, "references": 0,
              "ratings": 0, "critical_annotations": 0, "annotators_created": 0}
    images: dict[str, Image] = {}
    captions: dict[str, Caption] = {}
    references: set[tuple[int, str, str]] = set()
    annotators: dict[str, User] = {}
    pending_parents: list[tuple[Caption, str]] = []

    def image_for(row: Row) -> Image:
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
    with open_source(path, fmt, references=Path(references) if references else None,
                     image_dir=Path(image_dir) if image_dir else None, source_model=source_model) as (raw, images):
        return _import(session, user, raw, images, collection=collection or path.stem, source=str(path),
                       source_name=path.name, source_sha=hashlib.sha256(path.read_bytes()).hexdigest(), fmt=fmt,
                       allow_reimport=allow_reimport, progress=progress)


def import_rows(session: Session, user: User, rows: list[dict], *, collection: str, base_dir: str | Path,
                source_name: str = "rows", progress: Progress | None = None) -> ImportReport:
    """Import already-parsed row dicts (same fields as a JSONL file), images relative to `base_dir`."""
    require_role(user, *RESEARCH_ROLES)
    raw = [(f"row {i}", r if isinstance(r, dict) else "not an object") for i, r in enumerate(rows, start=1)]
    digest = hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()
    return _import(session, user, raw, FileImages(Path(base_dir)), collection=collection, source=source_name,
                   source_name=source_name, source_sha=digest, fmt="rows", allow_reimport=True, progress=progress)


def _import(session: Session, user: User, raw: RawRows, images: FileImages | ZipImages, *, collection: str,
            source: str, source_name: str, source_sha: str, fmt: str, allow_reimport: bool,
            progress: Progress | None) -> ImportReport:
    """The one import path: check every row, reject all or write all, and record the import."""
    if not raw:
        raise ImportRejected(source, ["no rows"])
    rows, errors = validate_rows(raw, images, session, progress)
    external_parents = resolve_parents(session, rows, errors)
    if errors or not rows:
        raise ImportRejected(source, errors or ["no rows"])
    target = get_or_create_collection(session, user, collection)
    if not allow_reimport:
        previous = session.scalar(select(ImportRecord.id).where(ImportRecord.source_sha256 == source_sha,
                                                                ImportRecord.collection_id == target.id))
        if previous is not None:
            raise ValueError(f"{source}: this exact file was already imported into {collection!r} "
                             f"(import #{previous}); pass allow_reimport / --allow-reimport to add it again")
    record = ImportRecord(format=fmt, source_name=source_name[:500], source_sha256=source_sha,
                          collection_id=target.id, user_id=user.id, counts={})
    session.add(record)
    session.flush()
    record.counts = write_rows(session, user, rows, record, target, external_parents, progress)
    session.flush()
    return ImportReport(import_id=record.id, collection=target.name, source=source, format=fmt, counts=record.counts)
