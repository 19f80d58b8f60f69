"""Import collections: CSV, JSONL, a zip of images with a manifest, CLIPScore / PAC-S JSON.

An import is all or nothing. Every row is checked first (images decoded, fields validated,
parents resolved); if any row is bad, nothing is written and `ImportRejected` lists every
bad row and why. Otherwise the rows are written to staging tables (`db.models.ImportStaging`
and the `staged_*` tables, which nothing but the import reads), then one short publishing
transaction copies them into the real tables with set-based INSERT ... SELECT statements and
deletes them (in batches, after it commits). With `commit_batches` (the CLI, the web upload) the staging is committed in
batches of `STAGING_BATCH` rows, each a short transaction, so a long import never holds the
write lock for long; a crash or a kill part-way leaves only staging rows, invisible to
everyone, which `gc_stagings` (`caplens db gc`) deletes once idle. Without it everything
happens in the caller's transaction.

Row fields (CSV columns, JSONL keys, manifest entries):
  image            image file, relative to the manifest (or a zip member name),
                   or `sha256:<hex>` of an image already in the store        (required)
  caption | text   the caption                                                (required)
  language | lang  language code (default `en`)
  kind             reference / candidate / perturbed / transcreated (default candidate)
  model | source_model   the captioning model that wrote it
  image_id         your id of the image (rows with the same id share the image)
  caption_id       your id of the caption; rows repeating it add ratings to that caption
  caption_external_id   the id stored with the caption, when caption_id is only a key within
                   the file (exports write both: caption_id is the exporting database's id)
  parent_id        caption_id of the caption of the same image this one was derived from (perturbed ...)
  parent_caption_id   as parent_id, but only a caption_id of this file (exports write it)
  op | perturbation_op   perturbation operation (required for kind perturbed)
  perturbation     object of perturbation parameters (p, seed, changed_spans ...)
  references       list of reference captions of the image
  annotator        who gave the rating in this row (accounts are created, without login; an
                   account that can log in is refused unless it is the importing user's)
  score | overall, fluency, relevance, descriptiveness   rating values in [0, 1]
  critical_objects, backgrounds, relationships   lists of phrases of the caption, found
                   case-insensitively, at least one critical object (credited to
                   `annotator`, else to the login-less account "imported")
In CSV, list and object fields are JSON text (e.g. `["a man", "a dog"]`).
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from sqlalchemy import DateTime, Integer, String, case, delete, func, insert, literal, select, text, union, update
from sqlalchemy.orm import Session

from annotation.people.accounts import RESEARCH_ROLES, require_role
from annotation.captions import get_or_create_collection, validate_caption_text, validate_collection_name
from annotation.image_store import display_name, stored_copy, write_to_store
from annotation.transfer.import_checks import Progress, Row, image_sha256, validate_rows
from annotation.transfer.import_sources import FORMATS, FileImages, RawRows, ZipImages, detect_format, open_source
from db.models import (
    Caption,
    Collection,
    CriticalAnnotation,
    Image,
    ImportRecord,
    ImportStaging,
    Rating,
    StagedCaption,
    StagedCritical,
    StagedImage,
    StagedRating,
    User,
    collection_captions,
    utcnow,
)
from db.session import session_scope

# Account credited with critical-object markings whose row names no annotator.
UNNAMED_ANNOTATOR = "imported"
STAGING_BATCH = 1000  # staged rows per committed transaction
# Between two committed batches the import pauses this long, so that writers waiting in
# SQLite's busy handler (which polls every 100 ms once it has waited a while) get their turn.
BATCH_PAUSE_S = 0.1
STAGING_IDLE = timedelta(hours=1)  # a staging this long without a batch is abandoned (gc deletes it)

Transaction = Callable[[], AbstractContextManager[Session]]


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
    errors.extend(f"{row.label}: parent_caption_id {row.parent_id!r} is not a caption_id of this file (in an export "
                  "it is the parent's id in the database it came from: export the parent with it, as the captions "
                  "export does)" for row in rows if row.parent_in_file and row.parent_id not in in_file)
    outside: dict[str, list[Row]] = {}  # the rows naming each parent not in the file, in file order
    for row in rows:
        if row.parent_id and row.parent_id not in in_file and not row.parent_in_file:
            outside.setdefault(row.parent_id, []).append(row)
    found: dict[str, Caption] = {}
    for external_id, children in outside.items():
        matches = list(session.execute(select(Caption, Image.sha256).join(Image, Image.id == Caption.image_id)
                                       .where(Caption.external_id == external_id).limit(2)))
        if len(matches) == 1:
            (parent, parent_sha), = matches
            found[external_id] = parent
            errors.extend(f"{row.label}: parent_id {external_id!r} is a caption of another image"
                          for row in children if image_sha256(row) != parent_sha)
        else:
            why = "is ambiguous (several captions have it)" if matches else "is not in the file or the database"
            errors.extend(f"{row.label}: parent_id {external_id!r} {why}" for row in children)
    return found


def refuse_login_accounts(session: Session, user: User, rows: list[Row], errors: list[str]) -> None:
    """A file may credit ratings and markings only to accounts without a login (those imports and
    simulations create) or to the importing user: a row naming another account that signs in
    here would put words in that person's mouth, an admin's included, and count in their
    agreement and quality figures."""
    credited = [(row, row.annotator or UNNAMED_ANNOTATOR) for row in rows if row.rating or row.critical]
    names, refused = sorted({name for _, name in credited} - {user.name}), set()
    for i in range(0, len(names), 500):
        refused.update(session.scalars(select(User.name).where(User.name.in_(names[i:i + 500]),
                                                               User.password_hash.is_not(None))))
    errors.extend(f"{row.label}: annotator {name!r} is an account that signs in here; a file credits ratings only "
                  f"to accounts without a login or to you. Name the rater differently, e.g. {name + '-imported'!r}"
                  for row, name in credited if name in refused)


@dataclass
class StagingPlan:
    """What an import will write, as rows of the staging tables (seq numbers link them)."""

    images: list[dict] = field(default_factory=list)
    captions: list[dict] = field(default_factory=list)
    ratings: list[dict] = field(default_factory=list)
    critical: list[dict] = field(default_factory=list)
    image_keys: int = 0
    counts: dict = field(default_factory=dict)

    @property
    def total(self) -> int:
        return len(self.images) + len(self.captions) + len(self.ratings) + len(self.critical)


def stored_references(session: Session, collection_id: int | None) -> set[tuple[str, str]]:
    """(image SHA-256, text) of the reference captions the collection holds already."""
    if collection_id is None:
        return set()
    in_target = select(collection_captions.c.caption_id).where(collection_captions.c.collection_id == collection_id)
    return {(sha, text_) for sha, text_ in session.execute(
        select(Image.sha256, Caption.text).join(Image, Image.id == Caption.image_id)
        .where(Caption.kind == "reference", Caption.id.in_(in_target)))}


def plan_rows(rows: list[Row], external_parents: dict[str, Caption],
              known_references: set[tuple[str, str]] = frozenset()) -> StagingPlan:
    """The staging rows of checked `rows`; new images are written to the store here (files
    named by hash: a file no row ends up using is removed by `caplens db gc`). A row's
    `references` are its image's: one the image has already (`known_references`: stored in the
    target collection, or given by an earlier row) is not added again, whatever the row's
    language (a German row repeating the English references made German copies of them); nor
    is a row of kind reference repeating one an earlier row's `references` gave in this file
    (a captions export lists each reference as a row and in its image's rows' `references`)."""
    plan = StagingPlan()
    counts = {"rows": len(rows), "captions": 0, "references": 0, "ratings": 0, "critical_annotations": 0}
    image_shas: dict[str, str] = {}
    staged_shas: set[str] = set()
    by_external: dict[str, int] = {}
    references: set[tuple[str, str]] = set(known_references)
    reference_seqs: dict[tuple[str, str], int] = {}  # the references this file adds
    critical: dict[tuple[int, str], dict] = {}
    parents: dict[int, tuple[dict, str]] = {}  # caption seq -> (its caption, the parent_id it names)

    def sha_for(row: Row) -> str:
        key = row.image.key
        if key not in image_shas:
            if row.image.existing_sha256:
                image_shas[key] = row.image.existing_sha256
            else:
                data, facts = stored_copy(row.image.read(), row.image.facts)
                write_to_store(data, facts)
                image_shas[key] = facts.sha256
                if facts.sha256 not in staged_shas:
                    staged_shas.add(facts.sha256)
                    plan.images.append(dict(seq=len(plan.images) + 1, sha256=facts.sha256, format=facts.format,
                                            width=facts.width, height=facts.height, size_bytes=facts.size_bytes,
                                            original_filename=display_name(row.image.label),
                                            external_id=row.image_external_id))
        return image_shas[key]

    def add_caption(**values) -> dict:
        caption = dict(seq=len(plan.captions) + 1, parent_seq=None, parent_caption_id=None, source_model=None,
                       perturbation=None, perturbation_op=None, external_id=None, **values)
        plan.captions.append(caption)
        return caption

    for row in rows:
        sha = sha_for(row)
        caption_seq = by_external.get(row.caption_id) if row.caption_id else None
        if caption_seq is None:
            listed = reference_seqs.get((sha, row.text)) if row.kind == "reference" else None
            if listed is None:
                caption = add_caption(image_sha256=sha, text=row.text, language=row.language, kind=row.kind)
                counts["references" if row.kind == "reference" else "captions"] += 1  # as the report names them
            else:  # a reference an earlier row's `references` gave (an export has both): that one, with this row's fields
                caption = plan.captions[listed - 1]
                caption["language"] = row.language
            caption.update(source_model=row.source_model, perturbation=row.perturbation,
                           perturbation_op=(row.perturbation or {}).get("op"), external_id=row.external_id)
            caption_seq = caption["seq"]
            if row.kind == "reference":
                references.add((sha, row.text))
                reference_seqs[(sha, row.text)] = caption_seq
            if row.caption_id:
                by_external[row.caption_id] = caption_seq
        else:  # a later row of the same caption (check_cross_row: it agrees): what the first left out
            caption = plan.captions[caption_seq - 1]
            if caption["source_model"] is None:
                caption["source_model"] = row.source_model
            if caption["perturbation"] is None and row.perturbation is not None:
                caption.update(perturbation=row.perturbation, perturbation_op=row.perturbation.get("op"))
        if row.parent_id and caption_seq not in parents:
            # Parents may come later in the file: linked once every row is planned.
            parents[caption_seq] = (caption, row.parent_id)
        for reference in map(validate_caption_text, row.references):
            key = (sha, reference)
            if key not in references:
                references.add(key)
                reference_seqs[key] = add_caption(image_sha256=sha, text=reference, language=row.language,
                                                  kind="reference")["seq"]
                counts["references"] += 1
        if row.rating:
            plan.ratings.append(dict(seq=len(plan.ratings) + 1, caption_seq=caption_seq, annotator=row.annotator,
                                     **row.rating))
            counts["ratings"] += 1
        if row.critical:
            # Marking the same caption again replaces the earlier marking of that annotator.
            critical[(caption_seq, row.annotator or UNNAMED_ANNOTATOR)] = row.critical
    for caption, parent_id in parents.values():
        if parent_id in by_external:
            caption["parent_seq"] = by_external[parent_id]
        else:
            caption["parent_caption_id"] = external_parents[parent_id].id
    plan.critical = [dict(seq=i, caption_seq=caption_seq, annotator=name, **marked)
                     for i, ((caption_seq, name), marked) in enumerate(critical.items(), start=1)]
    counts["critical_annotations"] = len(plan.critical)  # those stored, not the rows repeating one
    plan.image_keys = len(image_shas)
    plan.counts = counts
    return plan


def stage(transaction: Transaction, user: User, source_name: str, plan: StagingPlan,
          progress: Progress | None, pause_s: float = 0.0) -> int:
    """Write `plan` into the staging tables, `STAGING_BATCH` rows per `transaction()`; the
    staging's id."""
    with transaction() as session:
        staging = ImportStaging(user_id=user.id, source_name=source_name[:500])
        session.add(staging)
        session.flush()
        staging_id = staging.id
    done = 0
    for model, records in ((StagedImage, plan.images), (StagedCaption, plan.captions),
                           (StagedRating, plan.ratings), (StagedCritical, plan.critical)):
        for start in range(0, len(records), STAGING_BATCH):
            batch = records[start:start + STAGING_BATCH]
            with transaction() as session:
                session.execute(insert(model), [dict(staging_id=staging_id, **record) for record in batch])
                touched = session.execute(update(ImportStaging).where(ImportStaging.id == staging_id)
                                          .values(updated_at=utcnow()))
                if touched.rowcount != 1:
                    raise ValueError(f"{source_name}: the import's staging was removed meanwhile; run it again")
            done += len(batch)
            time.sleep(pause_s)
            if progress:  # in rows of the file, as the checking stage counts
                progress("writing", done * plan.counts["rows"] // plan.total, plan.counts["rows"])
    return staging_id


def _previous_import(session: Session, collection_id: int, source_sha: str) -> int | None:
    return session.scalar(select(ImportRecord.id).where(ImportRecord.source_sha256 == source_sha,
                                                        ImportRecord.collection_id == collection_id))


def _reimport_error(source: str, collection: str, previous: int) -> ValueError:
    return ValueError(f"{source}: this exact file was already imported into {collection!r} "
                      f"(import #{previous}); nothing was added again. To add its rows a second time, import it "
                      "from the command line with `caplens db import --allow-reimport`.")


def publish(session: Session, user: User, staging_id: int, plan: StagingPlan, *, collection: str, source: str,
            source_name: str, source_sha: str, fmt: str, allow_reimport: bool) -> ImportReport:
    """Copy a staging into the real tables and delete it, in the caller's (one, short)
    transaction. Captions get the ids after the highest one (PostgreSQL: under a table lock,
    with the id sequence moved past them)."""
    postgres = session.get_bind().dialect.name == "postgresql"
    if postgres:
        session.execute(text("LOCK TABLE users, images, captions IN SHARE ROW EXCLUSIVE MODE"))
    if session.get(ImportStaging, staging_id) is None:
        raise ValueError(f"{source}: the import's staging was removed before it was published; run it again")
    target = get_or_create_collection(session, user, collection)
    if not allow_reimport and (previous := _previous_import(session, target.id, source_sha)) is not None:
        raise _reimport_error(source, collection, previous)
    record = ImportRecord(format=fmt, source_name=source_name[:500], source_sha256=source_sha,
                          collection_id=target.id, user_id=user.id, counts={})
    session.add(record)
    session.flush()
    now = literal(utcnow(), DateTime(timezone=True))
    import_id = literal(record.id, Integer)
    names = union(select(StagedRating.annotator.label("name")).where(StagedRating.staging_id == staging_id),
                  select(StagedCritical.annotator.label("name")).where(StagedCritical.staging_id == staging_id)
                  ).subquery()
    users_before = session.scalar(select(func.count(User.id)))
    session.execute(insert(User).from_select(
        ["name", "role", "password_hash", "created_at"],
        select(names.c.name, literal("annotator", String), literal(None, String), now)
        .where(names.c.name.not_in(select(User.name)))))
    created = session.scalar(select(func.count(User.id))) - users_before  # (rowcount is -1 on some drivers)
    session.execute(insert(Image).from_select(
        ["sha256", "format", "width", "height", "size_bytes", "original_filename", "external_id", "import_id",
         "created_at"],
        select(StagedImage.sha256, StagedImage.format, StagedImage.width, StagedImage.height,
               StagedImage.size_bytes, StagedImage.original_filename, StagedImage.external_id, import_id, now)
        .where(StagedImage.staging_id == staging_id, StagedImage.sha256.not_in(select(Image.sha256)))))
    new_images = session.scalar(select(func.count(Image.id)).where(Image.import_id == record.id))
    base = session.scalar(select(func.coalesce(func.max(Caption.id), 0)))
    image_id = select(Image.id).where(Image.sha256 == StagedCaption.image_sha256).scalar_subquery()
    parent_id = case((StagedCaption.parent_seq.is_not(None), StagedCaption.parent_seq + base),
                     else_=StagedCaption.parent_caption_id)
    session.execute(insert(Caption).from_select(
        ["id", "image_id", "text", "language", "kind", "source_model", "parent_id", "perturbation_op",
         "perturbation", "external_id", "import_id", "created_by_id", "created_at"],
        select(StagedCaption.seq + base, image_id, StagedCaption.text, StagedCaption.language, StagedCaption.kind,
               StagedCaption.source_model, parent_id, StagedCaption.perturbation_op, StagedCaption.perturbation,
               StagedCaption.external_id, import_id, literal(user.id, Integer), now)
        .where(StagedCaption.staging_id == staging_id)))
    if postgres:
        session.execute(text("SELECT setval(pg_get_serial_sequence('captions', 'id'), "
                             "(SELECT COALESCE(MAX(id), 1) FROM captions))"))
    session.execute(insert(collection_captions).from_select(
        ["collection_id", "caption_id"],
        select(literal(target.id, Integer), StagedCaption.seq + base).where(StagedCaption.staging_id == staging_id)))
    annotator_id = lambda column: select(User.id).where(User.name == column).scalar_subquery()  # noqa: E731
    session.execute(insert(Rating).from_select(
        ["caption_id", "annotator_id", "overall", "fluency", "relevance", "descriptiveness", "version",
         "import_id", "created_at", "updated_at"],
        select(StagedRating.caption_seq + base, annotator_id(StagedRating.annotator), StagedRating.overall,
               StagedRating.fluency, StagedRating.relevance, StagedRating.descriptiveness, literal(1, Integer),
               import_id, now, now)
        .where(StagedRating.staging_id == staging_id)))
    session.execute(insert(CriticalAnnotation).from_select(
        ["caption_id", "annotator_id", "critical_objects", "backgrounds", "relationships", "spans", "created_at",
         "updated_at"],
        select(StagedCritical.caption_seq + base, annotator_id(StagedCritical.annotator),
               StagedCritical.critical_objects, StagedCritical.backgrounds, StagedCritical.relationships,
               StagedCritical.spans, now, now)
        .where(StagedCritical.staging_id == staging_id)))
    # The staging is spent: the caller deletes it after this commit, in batches
    # (`delete_staging`); marked idle, so that gc deletes it if a crash comes first.
    session.execute(update(ImportStaging).where(ImportStaging.id == staging_id)
                    .values(updated_at=literal(utcnow() - 2 * STAGING_IDLE, DateTime(timezone=True))))
    record.counts = {**plan.counts, "images_new": new_images, "images_existing": plan.image_keys - new_images,
                     "annotators_created": created}
    session.flush()
    return ImportReport(import_id=record.id, collection=target.name, source=source, format=fmt, counts=record.counts)


def _delete_staging(session: Session, staging_id: int) -> None:
    for model in (StagedCritical, StagedRating, StagedCaption, StagedImage):
        session.execute(delete(model).where(model.staging_id == staging_id))
    session.execute(delete(ImportStaging).where(ImportStaging.id == staging_id))


def delete_staging(transaction: Transaction, staging_id: int, pause_s: float = 0.0) -> None:
    """Delete a staging, `STAGING_BATCH` x 5 rows per `transaction()`."""
    for model in (StagedCritical, StagedRating, StagedCaption, StagedImage):
        while True:
            with transaction() as session:
                upto = session.scalar(select(model.seq).where(model.staging_id == staging_id).order_by(model.seq)
                                      .offset(STAGING_BATCH * 5 - 1).limit(1))
                query = delete(model).where(model.staging_id == staging_id)
                session.execute(query if upto is None else query.where(model.seq <= upto))
            if upto is None:
                break
            time.sleep(pause_s)
    with transaction() as session:
        session.execute(delete(ImportStaging).where(ImportStaging.id == staging_id))


def gc_stagings(session: Session, idle: timedelta = STAGING_IDLE) -> int:
    """Delete stagings no batch has touched for `idle` (imports that were killed or crashed);
    how many."""
    stale = list(session.scalars(select(ImportStaging.id).where(ImportStaging.updated_at < utcnow() - idle)))
    for staging_id in stale:
        _delete_staging(session, staging_id)
    return len(stale)


def import_file(session: Session, user: User, path: str | Path, *, collection: str | None = None,
                fmt: str | None = None, references: str | Path | None = None, image_dir: str | Path | None = None,
                source_model: str | None = None, allow_reimport: bool = False,
                progress: Progress | None = None, commit_batches: bool = False) -> ImportReport:
    """Import `path` into `collection` (default: the file's stem).

    Researcher or admin only. Raises `ImportRejected` (nothing written) when any row is bad.
    Without `commit_batches` the import happens in the caller's transaction. With it, `session`
    only reads (a read-only transaction: it never takes the write lock) and the import writes
    in its own short transactions on the same database: staging batches, then publishing.
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
                       source_name=path.name, source_sha=_file_sha256(path), fmt=fmt,
                       allow_reimport=allow_reimport, progress=progress, commit_batches=commit_batches)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def import_rows(session: Session, user: User, rows: list[dict], *, collection: str, base_dir: str | Path,
                source_name: str = "rows", progress: Progress | None = None) -> ImportReport:
    """Import already-parsed row dicts (same fields as a JSONL file), images relative to
    `base_dir`, in the caller's transaction."""
    require_role(user, *RESEARCH_ROLES)
    raw = [(f"row {i}", r if isinstance(r, dict) else "not an object") for i, r in enumerate(rows, start=1)]
    digest = hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()
    return _import(session, user, raw, FileImages(Path(base_dir)), collection=collection, source=source_name,
                   source_name=source_name, source_sha=digest, fmt="rows", allow_reimport=True, progress=progress)


def _import(session: Session, user: User, raw: RawRows, images: FileImages | ZipImages, *, collection: str,
            source: str, source_name: str, source_sha: str, fmt: str, allow_reimport: bool,
            progress: Progress | None, commit_batches: bool = False) -> ImportReport:
    """The one import path: check every row, reject all or stage all, then publish."""
    if not raw:
        raise ImportRejected(source, ["no rows"])
    rows, errors = validate_rows(raw, images, session, progress)
    external_parents = resolve_parents(session, rows, errors)
    refuse_login_accounts(session, user, rows, errors)
    if errors or not rows:
        raise ImportRejected(source, errors or ["no rows"])
    collection = validate_collection_name(collection)
    existing = session.scalar(select(Collection.id).where(Collection.name == collection))
    if not allow_reimport and existing is not None and \
            (previous := _previous_import(session, existing, source_sha)) is not None:
        raise _reimport_error(source, collection, previous)
    plan = plan_rows(rows, external_parents, stored_references(session, existing))
    if not commit_batches:
        transaction: Transaction = lambda: nullcontext(session)  # noqa: E731
    else:
        writing = session.get_bind().execution_options(sqlite_begin="IMMEDIATE")
        transaction = lambda: session_scope(writing)  # noqa: E731
    pause_s = BATCH_PAUSE_S if commit_batches else 0.0
    staging_id = None
    try:
        staging_id = stage(transaction, user, source_name, plan, progress, pause_s)
        if progress:
            progress("publishing", plan.counts["rows"], plan.counts["rows"])
        with transaction() as writer:
            report = publish(writer, user, staging_id, plan, collection=collection, source=source,
                             source_name=source_name, source_sha=source_sha, fmt=fmt, allow_reimport=allow_reimport)
        published, staging_id = staging_id, None
        if progress:
            progress("cleaning", plan.counts["rows"], plan.counts["rows"])
        delete_staging(transaction, published, pause_s)
        return report
    except BaseException:
        if commit_batches and staging_id is not None:  # not published: its staging goes now, not at gc
            try:
                with transaction() as writer:
                    _delete_staging(writer, staging_id)
            except Exception:  # the database is gone or busy: gc deletes it later
                pass
        raise
