"""Export annotations as CSV, JSONL, Parquet or a Hugging Face `datasets` dataset.

`ratings_export` joins every rating with its caption, image, annotator, collection(s) and
cached metric scores (one column per metric and checkpoint fingerprint, `score:<metric>@<fp>`),
followed by a row without rating for each unrated caption a rated one descends from (so that
the file imports again: a parent_caption_id names a row of the same file).
`captions_export` gives one row per caption with its mean human score (both with a reviewer's
adjudicated value of the caption, `adjudicated_overall`, beside the raw ratings), `critical_export` one row
per critical-objects marking with its phrases and their character spans. Export is a
researcher or admin action.

Exports stream: the database is read `READ_CHUNK` rows at a time (with that chunk's
collections, references and scores), and every format is written as rows arrive (CSV and
JSONL row by row, Parquet in row groups, a `datasets` dataset as its Arrow files in batches),
so memory stays flat however many ratings there are. `ratings_table` / `captions_table` are the same rows
as lists (the ratings alone), for the analyses that need the whole table.
"""
from __future__ import annotations

import json
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import chain, islice
from pathlib import Path

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, aliased

from annotation.people.accounts import RESEARCH_ROLES, require_role
from annotation.captions import image_references, in_collection
from annotation.database import image_store_dir
from annotation.image_store import image_path, read_stored_bytes, stored_path
from db.models import (Caption, Collection, CriticalAnnotation, Image, MetricScore, Rating, Transcreation, User,
                       collection_captions)
from scoring.cache import LRUCache
from scoring.analysis.tables import rating_mean
from scoring.csv_safe import write_csv

TABLE_FORMATS = ("csv", "jsonl", "parquet", "hf")
READ_CHUNK = 1000  # rows fetched from the database at a time
PARQUET_ROW_GROUP = 5000  # rows per Parquet row group
HF_SHARD_ROWS = 1000  # rows per batch written to a `datasets` dataset ...
HF_SHARD_BYTES = 64 << 20  # ... or fewer, once their image bytes reach this much
HF_FILE_BYTES = 500 << 20  # a dataset file is closed once this much is in it (save_to_disk's default)
IMAGE_CACHE_BYTES = 64 << 20  # recently read image files kept for the rows that repeat them

# Column types, known before any row is read (Parquet and `datasets` need a schema up front).
ARROW_TYPES = ("int", "float", "str", "strs")
CAPTION_COLUMNS = {
    "caption_id": "int", "caption": "str", "language": "str", "kind": "str", "source_model": "str",
    "parent_caption_id": "int", "parent_caption": "str", "perturbation_op": "str", "caption_external_id": "str",
    "image": "str", "image_sha256": "str", "image_file": "str", "image_format": "str", "image_width": "int", "image_height": "int",
    "image_filename": "str", "image_external_id": "str",
}
# A reviewer's settled overall value of the caption (annotation.studies.quality), beside its raw ratings.
ADJUDICATION_COLUMNS = {"adjudicated_overall": "float", "adjudicated_by": "str"}
RATING_COLUMNS = {
    "rating_id": "int", "annotator": "str", "overall": "float", "fluency": "float", "relevance": "float",
    "descriptiveness": "float", "rating_version": "int", "rated_at": "str", "updated_at": "str",
    **CAPTION_COLUMNS, "references": "strs", "collections": "strs", **ADJUDICATION_COLUMNS,
}
CRITICAL_COLUMNS = {
    "critical_id": "int", "annotator": "str", "critical_objects": "strs", "backgrounds": "strs",
    "relationships": "strs", "spans": "str", "marked_at": "str", "updated_at": "str",
    **CAPTION_COLUMNS, "references": "strs", "collections": "strs",
}
EXPORT_WHAT = ("ratings", "captions", "critical")
# A transcreated caption keeps its source's human score (the parent caption): who wrote it and that score.
TRANSCREATION_COLUMNS = {"transcreated_by": "str", "source_score": "float"}
CAPTION_TABLE_COLUMNS = {**CAPTION_COLUMNS, "human_score": "float", "n_ratings": "int", "references": "strs",
                         "collections": "strs", **ADJUDICATION_COLUMNS, **TRANSCREATION_COLUMNS}


@dataclass
class Table:
    """An export: its columns, known before the first row; its rows, dicts produced as they are
    read (one pass); and each column's type (one of ARROW_TYPES), or None to infer the types
    from the rows, which must then be a list."""

    columns: list[str]
    rows: Iterable[dict]
    types: dict[str, str] | None = None


def _iso(moment: datetime) -> str:
    """ISO 8601 in UTC (SQLite hands back naive datetimes; CapLens writes them in UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat()


def _collections_of(session: Session, caption_ids: list[int]) -> dict[int, list[str]]:
    names: dict[int, list[str]] = defaultdict(list)
    for start in range(0, len(caption_ids), 500):
        chunk = caption_ids[start:start + 500]
        for caption_id, name in session.execute(
            select(collection_captions.c.caption_id, Collection.name)
            .join(Collection, Collection.id == collection_captions.c.collection_id)
            .where(collection_captions.c.caption_id.in_(chunk)).order_by(Collection.name)
        ):
            names[caption_id].append(name)
    return names


def _metric_columns(session: Session, caption_ids: list[int]) -> dict[int, dict[str, float | None]]:
    scores: dict[int, dict[str, float | None]] = defaultdict(dict)
    for start in range(0, len(caption_ids), 500):
        chunk = caption_ids[start:start + 500]
        for caption_id, metric, fingerprint, value in session.execute(
            select(MetricScore.caption_id, MetricScore.metric, MetricScore.checkpoint_fingerprint, MetricScore.value)
            .where(MetricScore.caption_id.in_(chunk))
        ):
            scores[caption_id][f"score:{metric}@{fingerprint}"] = value
    return scores


def _caption_fields(row, image_root: Path) -> dict:
    return {
        "caption_id": row.caption_id, "caption": row.caption, "language": row.language, "kind": row.kind,
        "source_model": row.source_model, "parent_caption_id": row.parent_caption_id,
        "parent_caption": row.parent_caption, "perturbation_op": row.perturbation_op,
        "caption_external_id": row.caption_external_id,
        "image": f"sha256:{row.image_sha256}",  # how an import names a stored image: exports import again
        "image_sha256": row.image_sha256,
        "image_file": str(stored_path(row.image_sha256, row.image_format, image_root)),
        "image_format": row.image_format, "image_width": row.image_width, "image_height": row.image_height,
        "image_filename": row.image_filename, "image_external_id": row.image_external_id,
    }


def _caption_select(parent) -> tuple:
    """The caption, image and parent-caption columns both tables select, labelled as exported."""
    return (Caption.id.label("caption_id"), Caption.text.label("caption"), Caption.language, Caption.kind,
            Caption.source_model, Caption.parent_id.label("parent_caption_id"), parent.text.label("parent_caption"),
            Caption.perturbation_op, Caption.external_id.label("caption_external_id"),
            Image.id.label("image_id"), Image.sha256.label("image_sha256"), Image.format.label("image_format"),
            Image.width.label("image_width"), Image.height.label("image_height"),
            Image.original_filename.label("image_filename"), Image.external_id.label("image_external_id"))


def _score_columns(session: Session, caption_ids) -> list[str]:
    """`score:<metric>@<fingerprint>` of every score cached for the captions `caption_ids` selects."""
    pairs = session.execute(select(MetricScore.metric, MetricScore.checkpoint_fingerprint)
                            .where(MetricScore.caption_id.in_(caption_ids)).distinct())
    return sorted(f"score:{metric}@{fingerprint}" for metric, fingerprint in pairs)


def _joined_rows(session: Session, query, score_columns: list[str], row_fields,
                 adjudicated: Collection | bool = False) -> Iterator[dict]:
    """The rows of `query`, read READ_CHUNK at a time, each chunk joined with its captions'
    collections, references and scores; `row_fields(row, image_root)` gives a row's own fields.
    With `adjudicated` (a collection, or True for any), also each caption's adjudicated value."""
    from annotation.studies.quality import adjudicated_values

    image_root = image_store_dir()
    result = session.execute(query.execution_options(yield_per=READ_CHUNK))
    try:
        for chunk in result.partitions():
            caption_ids = sorted({row.caption_id for row in chunk})
            collections = _collections_of(session, caption_ids)
            references = image_references(session, {row.image_id for row in chunk})
            scores = _metric_columns(session, caption_ids)
            settled = {} if adjudicated is False else adjudicated_values(
                session, caption_ids, None if adjudicated is True else adjudicated)
            for row in chunk:
                per_caption = scores.get(row.caption_id, {})
                yield {**row_fields(row, image_root),
                       "references": references.get((row.image_id, row.language), []),
                       "collections": collections.get(row.caption_id, []),
                       **({} if adjudicated is False else dict(zip(ADJUDICATION_COLUMNS,
                                                                  settled.get(row.caption_id, (None, None))[:2]))),
                       **{name: per_caption.get(name) for name in score_columns}}
    finally:
        result.close()


def _unrated_parents(rated: Select, parent_select: Callable[[], Select]) -> Select:
    """`parent_select()` restricted to the captions the captions of `rated` descend from
    (parent, grandparent ...) that `rated` leaves out, by caption id."""
    ancestors = (select(Caption.parent_id.label("id")).where(Caption.id.in_(rated), Caption.parent_id.is_not(None))
                 .cte("ancestors", recursive=True))
    older = aliased(Caption)
    ancestors = ancestors.union(select(older.parent_id).join(ancestors, older.id == ancestors.c.id)
                                .where(older.parent_id.is_not(None)))
    return (parent_select().where(Caption.id.in_(select(ancestors.c.id)), Caption.id.not_in(rated))
            .order_by(Caption.id))


def ratings_export(session: Session, user: User, collection: Collection | None = None, *,
                   unrated_parents: bool = True) -> Table:
    """One row per rating, joined with caption, image, annotator, references and metric scores
    (streamed: iterate `rows` once, inside the session). With `unrated_parents`, after them one
    row, without rating (no rating_id, annotator or values), for each caption a rated one
    descends from (its parent_caption_id, the parent's parent ...) that has no rating row here:
    an import links a parent_caption_id only to a row of the same file, so without these rows a
    rated perturbed caption of an unrated original could not be imported again."""
    require_role(user, *RESEARCH_ROLES)
    parent = aliased(Caption)
    query = (select(Rating.id.label("rating_id"), User.name.label("annotator"), Rating.overall, Rating.fluency,
                    Rating.relevance, Rating.descriptiveness, Rating.version.label("rating_version"),
                    Rating.created_at, Rating.updated_at, *_caption_select(parent))
             .join(Caption, Caption.id == Rating.caption_id).join(Image, Image.id == Caption.image_id)
             .join(User, User.id == Rating.annotator_id).outerjoin(parent, parent.id == Caption.parent_id)
             .order_by(Rating.id))
    rated = select(Rating.caption_id).join(Caption, Caption.id == Rating.caption_id)
    if collection is not None:
        query = query.where(in_collection(collection))
        rated = rated.where(in_collection(collection))
    rated = rated.correlate(None)  # its own captions, never those of a query it is used in
    score_columns = _score_columns(session, rated)
    adjudicated = collection if collection is not None else True

    def fields(row, image_root: Path) -> dict:
        return {"rating_id": row.rating_id, "annotator": row.annotator, "overall": row.overall,
                "fluency": row.fluency, "relevance": row.relevance, "descriptiveness": row.descriptiveness,
                "rating_version": row.rating_version, "rated_at": _iso(row.created_at),
                "updated_at": _iso(row.updated_at), **_caption_fields(row, image_root)}

    rows = _joined_rows(session, query, score_columns, fields, adjudicated)
    if unrated_parents:
        unrated = _unrated_parents(rated, lambda: select(*_caption_select(parent)).join(
            Image, Image.id == Caption.image_id).outerjoin(parent, parent.id == Caption.parent_id))
        no_rating = dict.fromkeys(("rating_id", "annotator", "overall", "fluency", "relevance", "descriptiveness",
                                   "rating_version", "rated_at", "updated_at"))
        rows = chain(rows, _joined_rows(session, unrated, score_columns,
                                        lambda row, image_root: {**no_rating, **_caption_fields(row, image_root)},
                                        adjudicated))
    return Table([*RATING_COLUMNS, *score_columns], rows, {**RATING_COLUMNS, **dict.fromkeys(score_columns, "float")})


def captions_export(session: Session, user: User, collection: Collection | None = None) -> Table:
    """One row per caption with its mean human score, rating count and metric scores (streamed)."""
    require_role(user, *RESEARCH_ROLES)
    stats = (select(Rating.caption_id, func.avg(Rating.overall).label("mean"), func.count(Rating.id).label("n"))
             .group_by(Rating.caption_id).subquery())
    parent, transcreator = aliased(Caption), aliased(User)
    query = (select(*_caption_select(parent), stats.c.mean, stats.c.n, transcreator.name.label("transcreated_by"),
                    Transcreation.source_score)
             .join(Image, Image.id == Caption.image_id).outerjoin(stats, stats.c.caption_id == Caption.id)
             .outerjoin(parent, parent.id == Caption.parent_id)
             .outerjoin(Transcreation, Transcreation.result_caption_id == Caption.id)
             .outerjoin(transcreator, transcreator.id == Transcreation.annotator_id).order_by(Caption.id))
    scoped = select(Caption.id)
    if collection is not None:
        query = query.where(in_collection(collection))
        scoped = scoped.where(in_collection(collection))
    score_columns = _score_columns(session, scoped)

    def fields(row, image_root: Path) -> dict:
        return {**_caption_fields(row, image_root), "human_score": rating_mean(row.mean), "n_ratings": row.n or 0,
                "transcreated_by": row.transcreated_by, "source_score": row.source_score}

    return Table([*CAPTION_TABLE_COLUMNS, *score_columns],
                 _joined_rows(session, query, score_columns, fields, collection if collection is not None else True),
                 {**CAPTION_TABLE_COLUMNS, **dict.fromkeys(score_columns, "float")})


def critical_export(session: Session, user: User, collection: Collection | None = None) -> Table:
    """One row per critical-objects marking: its annotator, the phrases of each group, their
    character spans in the caption (JSON text, {"critical_objects": [[start, end], ...], ...}),
    joined with the caption, image and references like the ratings (streamed)."""
    require_role(user, *RESEARCH_ROLES)
    parent = aliased(Caption)
    query = (select(CriticalAnnotation.id.label("critical_id"), User.name.label("annotator"),
                    CriticalAnnotation.critical_objects, CriticalAnnotation.backgrounds,
                    CriticalAnnotation.relationships, CriticalAnnotation.spans, CriticalAnnotation.created_at,
                    CriticalAnnotation.updated_at, *_caption_select(parent))
             .join(Caption, Caption.id == CriticalAnnotation.caption_id).join(Image, Image.id == Caption.image_id)
             .join(User, User.id == CriticalAnnotation.annotator_id).outerjoin(parent, parent.id == Caption.parent_id)
             .order_by(CriticalAnnotation.id))
    if collection is not None:
        query = query.where(in_collection(collection))

    def fields(row, image_root: Path) -> dict:
        return {"critical_id": row.critical_id, "annotator": row.annotator,
                "critical_objects": list(row.critical_objects or []), "backgrounds": list(row.backgrounds or []),
                "relationships": list(row.relationships or []),
                "spans": json.dumps(row.spans or {}, ensure_ascii=False, sort_keys=True),
                "marked_at": _iso(row.created_at), "updated_at": _iso(row.updated_at),
                **_caption_fields(row, image_root)}

    return Table(list(CRITICAL_COLUMNS), _joined_rows(session, query, [], fields), dict(CRITICAL_COLUMNS))


def ratings_table(session: Session, user: User, collection: Collection | None = None) -> list[dict]:
    """The rows of :func:`ratings_export` as a list: the ratings alone (no unrated parents)."""
    return list(ratings_export(session, user, collection, unrated_parents=False).rows)


def captions_table(session: Session, user: User, collection: Collection | None = None) -> list[dict]:
    """The rows of :func:`captions_export` as a list."""
    return list(captions_export(session, user, collection).rows)


def _batches(rows: Iterable[dict], size: int, max_bytes: int = 0,
             weigh: Callable[[dict], int] | None = None) -> Iterator[list[dict]]:
    """Lists of at most `size` rows and, with `weigh`, about `max_bytes` (at least one row)."""
    rows = iter(rows)
    if weigh is None:
        while batch := list(islice(rows, size)):
            yield batch
        return
    batch, weight = [], 0
    for row in rows:
        batch.append(row)
        weight += weigh(row)
        if len(batch) >= size or weight >= max_bytes:
            yield batch
            batch, weight = [], 0
    if batch:
        yield batch


def _arrow_schema(table: Table):
    import pyarrow as pa

    if table.types is not None:
        arrow = {"int": pa.int64(), "float": pa.float64(), "str": pa.string(), "strs": pa.list_(pa.string())}
        return pa.schema([(name, arrow[table.types[name]]) for name in table.columns])
    if not isinstance(table.rows, Sequence):
        raise TypeError("column types can only be inferred from a list of rows")
    return pa.schema([(name, pa.array([row.get(name) for row in table.rows]).type) for name in table.columns])


def write_table(table: Table, out: str | Path, fmt: str, image_bytes: Callable[[dict], bytes] | None = None) -> int:
    """Write `table` as `fmt` row by row; returns the number of rows. For `hf`,
    `image_bytes(row)` supplies the image column's bytes."""
    out = Path(out)
    if fmt not in TABLE_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}: choose one of {', '.join(TABLE_FORMATS)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        return write_csv(out, table.columns, table.rows)
    if fmt == "jsonl":
        count = 0
        with out.open("w", encoding="utf-8") as handle:
            for row in table.rows:
                handle.write(json.dumps({name: row.get(name) for name in table.columns}, ensure_ascii=False) + "\n")
                count += 1
        return count
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema, count = _arrow_schema(table), 0
        with pq.ParquetWriter(out, schema) as writer:
            for batch in _batches(table.rows, PARQUET_ROW_GROUP):
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                count += len(batch)
        return count
    return _write_hf(table, out, image_bytes)


def _write_hf(table: Table, out: Path, image_bytes: Callable[[dict], bytes] | None) -> int:
    """A `datasets` dataset in `out`, in the layout `Dataset.save_to_disk` writes and
    `datasets.load_from_disk` reads: its Arrow files written batch by batch (at most
    HF_SHARD_ROWS rows or HF_SHARD_BYTES of images), a new file every HF_FILE_BYTES, then
    `dataset_info.json` and `state.json`. Nothing is read back, so memory stays flat."""
    import datasets
    import pyarrow as pa
    from datasets.arrow_writer import ArrowWriter
    from datasets.fingerprint import generate_random_fingerprint

    if out.exists():
        if not out.is_dir() or any(out.iterdir()):
            raise ValueError(f"{out}: exists and is not an empty directory")
    if image_bytes is not None:  # the dataset's `image` column holds the image itself
        table = Table([name for name in table.columns if name != "image"], table.rows, table.types)
    schema = _arrow_schema(table)
    rows: Iterable[dict] = table.rows
    weigh = None
    if image_bytes is not None:
        schema = schema.append(pa.field("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])))
        rows = ({**row, "image": {"bytes": image_bytes(row), "path": None}} for row in rows)
        weigh = lambda row: len(row["image"]["bytes"])  # noqa: E731
    features = datasets.Features.from_arrow_schema(schema)
    if image_bytes is not None:
        features["image"] = datasets.Image()
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    writer, written, count = None, 0, 0
    try:
        for batch in _batches(rows, HF_SHARD_ROWS, HF_SHARD_BYTES, weigh):
            if writer is None:
                files.append(out / f".part-{len(files):05d}.arrow")
                writer, written = ArrowWriter(features=features, path=str(files[-1])), 0
            arrow = pa.Table.from_pylist(batch, schema=schema)
            writer.write_table(arrow)
            count, written = count + len(batch), written + arrow.nbytes
            if written >= HF_FILE_BYTES:
                writer.finalize()
                writer = None
        if writer is None and not files:  # no rows: one empty file that still carries the features
            files.append(out / ".part-00000.arrow")
            writer = ArrowWriter(features=features, path=str(files[-1]))
        if writer is not None:
            writer.finalize()
        names = [f"data-{number:05d}-of-{len(files):05d}.arrow" for number in range(len(files))]
        for part, name in zip(files, names):
            part.rename(out / name)
        datasets.DatasetInfo(features=features).write_to_directory(str(out))
        state = {"_data_files": [{"filename": name} for name in names], "_fingerprint": generate_random_fingerprint(),
                 "_format_columns": None, "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False,
                 "_split": None}
        (out / datasets.config.DATASET_STATE_JSON_FILENAME).write_text(json.dumps(state, indent=2, sort_keys=True),
                                                                         encoding="utf-8")
    except BaseException:
        if writer is not None:
            writer.close()
        shutil.rmtree(out, ignore_errors=True)
        raise
    return count


def stored_image_reader() -> Callable[[str, str], bytes]:
    """`read(sha256, format)`: a stored image's bytes, keeping the most recent ones (rows of
    an export repeat images) within IMAGE_CACHE_BYTES."""
    recent = LRUCache(IMAGE_CACHE_BYTES, weigh=len)

    def read(sha256: str, fmt: str) -> bytes:
        data = recent.get(sha256)
        if data is None:
            data = read_stored_bytes(sha256, fmt)
            recent.put(sha256, data)
        return data

    return read


def export_table(session: Session, user: User, what: str, out: str | Path, fmt: str,
                 collection: Collection | None = None) -> dict:
    """Export `ratings`, `captions` or `critical` (critical-objects markings) to `out`,
    streamed; returns a small summary."""
    if what == "ratings":
        table = ratings_export(session, user, collection)
    elif what == "captions":
        table = captions_export(session, user, collection)
    elif what == "critical":
        table = critical_export(session, user, collection)
    else:
        raise ValueError(f"unknown export {what!r}: {', '.join(EXPORT_WHAT)}")
    root = image_store_dir()
    # The file's place in the image store, not the server's absolute path (which would tell
    # every reader of the export where the server keeps its data).
    table = Table(table.columns, ({**row, "image_file": Path(row["image_file"]).relative_to(root).as_posix()}
                                  for row in table.rows), table.types)
    read = stored_image_reader()
    rows = write_table(table, out, fmt, image_bytes=(lambda row: read(row["image_sha256"], row["image_format"]))
                       if fmt == "hf" else None)
    summary = {"what": what, "format": fmt, "rows": rows, "path": str(out)}
    if what == "ratings":  # the agreement dashboard's numbers go with every ratings export
        summary["agreement"] = write_agreement(session, user, collection, Path(out), fmt)
    return summary


def agreement_path(out: Path, fmt: str) -> Path:
    """Where a ratings export's agreement numbers go: agreement.json inside a `datasets`
    folder, else beside the file as <file>.agreement.json."""
    return out / "agreement.json" if fmt == "hf" else out.with_name(out.name + ".agreement.json")


def write_agreement(session: Session, user: User, collection: Collection | None, out: Path, fmt: str) -> dict:
    """The agreement dashboard's numbers (`agreement.study_agreement`, overall score) of the
    exported collection, or of every collection with ratings, as JSON beside the export
    (`agreement_path`); returns them, by collection name."""
    from annotation.studies.agreement import study_agreement

    if collection is not None:
        chosen = [collection]
    else:
        rated = select(collection_captions.c.collection_id).where(
            collection_captions.c.caption_id.in_(select(Rating.caption_id)))
        chosen = list(session.scalars(select(Collection).where(Collection.id.in_(rated)).order_by(Collection.name)))
    numbers = {c.name: study_agreement(session, user, c).to_dict() for c in chosen}
    agreement_path(out, fmt).write_text(json.dumps(numbers, indent=2, ensure_ascii=False), encoding="utf-8")
    return numbers


def copy_image(image: Image, folder: Path) -> str:
    """Copy a stored image into `folder` (hard link when possible); returns its name there."""
    source = image_path(image)
    target = folder / source.name
    if not target.exists():
        folder.mkdir(parents=True, exist_ok=True)
        try:
            target.hardlink_to(source)
        except OSError:
            shutil.copyfile(source, target)
    return f"{folder.name}/{target.name}"
