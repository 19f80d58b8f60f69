"""Export annotations as CSV, JSONL, Parquet or a Hugging Face `datasets` dataset.

`ratings_table` joins every rating with its caption, image, annotator, collection(s) and
cached metric scores (one column per metric and checkpoint fingerprint, `score:<metric>@<fp>`).
`captions_table` gives one row per caption with its mean human score. Export is a
researcher or admin action.
"""
from __future__ import annotations

import csv
import json
import shutil
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from annotation.accounts import RESEARCH_ROLES, require_role
from annotation.captions import in_collection
from annotation.image_store import image_path, read_image_bytes
from db.models import Caption, Collection, Image, MetricScore, Rating, User, collection_captions

TABLE_FORMATS = ("csv", "jsonl", "parquet", "hf")


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


def _references(session: Session, image_ids: list[int]) -> dict[tuple[int, str], list[str]]:
    refs: dict[tuple[int, str], list[str]] = defaultdict(list)
    for start in range(0, len(image_ids), 500):
        chunk = image_ids[start:start + 500]
        for image_id, language, text in session.execute(
            select(Caption.image_id, Caption.language, Caption.text)
            .where(Caption.kind == "reference", Caption.image_id.in_(chunk)).order_by(Caption.id)
        ):
            refs[(image_id, language)].append(text)
    return refs


def _caption_fields(caption: Caption, image: Image, parent_text: str | None) -> dict:
    return {
        "caption_id": caption.id, "caption": caption.text, "language": caption.language, "kind": caption.kind,
        "source_model": caption.source_model, "parent_caption_id": caption.parent_id, "parent_caption": parent_text,
        "perturbation_op": caption.perturbation_op, "caption_external_id": caption.external_id,
        "image_sha256": image.sha256, "image_file": str(image_path(image)), "image_format": image.format,
        "image_width": image.width, "image_height": image.height, "image_filename": image.original_filename,
        "image_external_id": image.external_id,
    }


def _with_scores(rows: list[dict], scores: dict[int, dict]) -> list[dict]:
    columns = sorted({name for per_caption in scores.values() for name in per_caption})
    for row in rows:
        per_caption = scores.get(row["caption_id"], {})
        for name in columns:
            row[name] = per_caption.get(name)
    return rows


def ratings_table(session: Session, user: User, collection: Collection | None = None) -> list[dict]:
    """One row per rating, joined with caption, image, annotator, references and metric scores."""
    require_role(user, *RESEARCH_ROLES)
    parent = select(Caption.id, Caption.text).subquery()
    query = (select(Rating, Caption, Image, User.name, parent.c.text)
             .join(Caption, Caption.id == Rating.caption_id).join(Image, Image.id == Caption.image_id)
             .join(User, User.id == Rating.annotator_id).outerjoin(parent, parent.c.id == Caption.parent_id)
             .order_by(Rating.id))
    if collection is not None:
        query = query.where(in_collection(collection))
    results = session.execute(query).all()
    caption_ids = sorted({caption.id for _r, caption, *_ in results})
    collections = _collections_of(session, caption_ids)
    references = _references(session, sorted({image.id for _r, _c, image, *_ in results}))
    rows = []
    for rating, caption, image, annotator, parent_text in results:
        rows.append({
            "rating_id": rating.id, "annotator": annotator, "overall": rating.overall, "fluency": rating.fluency,
            "relevance": rating.relevance, "descriptiveness": rating.descriptiveness,
            "rating_version": rating.version, "rated_at": _iso(rating.created_at),
            "updated_at": _iso(rating.updated_at),
            **_caption_fields(caption, image, parent_text),
            "references": references.get((image.id, caption.language), []),
            "collections": collections.get(caption.id, []),
        })
    return _with_scores(rows, _metric_columns(session, caption_ids))


def captions_table(session: Session, user: User, collection: Collection | None = None) -> list[dict]:
    """One row per caption with its mean human score, rating count and metric scores."""
    require_role(user, *RESEARCH_ROLES)
    stats = (select(Rating.caption_id, func.avg(Rating.overall).label("mean"), func.count(Rating.id).label("n"))
             .group_by(Rating.caption_id).subquery())
    parent = select(Caption.id, Caption.text).subquery()
    query = (select(Caption, Image, parent.c.text, stats.c.mean, stats.c.n)
             .join(Image, Image.id == Caption.image_id).outerjoin(stats, stats.c.caption_id == Caption.id)
             .outerjoin(parent, parent.c.id == Caption.parent_id).order_by(Caption.id))
    if collection is not None:
        query = query.where(in_collection(collection))
    results = session.execute(query).all()
    caption_ids = [caption.id for caption, *_ in results]
    collections = _collections_of(session, caption_ids)
    references = _references(session, sorted({image.id for _c, image, *_ in results}))
    rows = [{**_caption_fields(caption, image, parent_text), "human_score": mean, "n_ratings": n or 0,
             "references": references.get((image.id, caption.language), []),
             "collections": collections.get(caption.id, [])}
            for caption, image, parent_text, mean, n in results]
    return _with_scores(rows, _metric_columns(session, caption_ids))


def _csv_cell(value):
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return "" if value is None else value


def write_table(rows: list[dict], out: str | Path, fmt: str, image_bytes=None) -> Path:
    """Write rows as `fmt`. For `hf`, `image_bytes(row)` supplies the image column's bytes."""
    out = Path(out)
    if fmt not in TABLE_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}: choose one of {', '.join(TABLE_FORMATS)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    columns = list(dict.fromkeys(name for row in rows for name in row))
    if fmt == "csv":
        with out.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            for row in rows:
                writer.writerow({name: _csv_cell(row.get(name)) for name in columns})
    elif fmt == "jsonl":
        with out.open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist([{n: row.get(n) for n in columns} for row in rows]), out)
    else:
        _write_hf(rows, columns, out, image_bytes)
    return out


def _write_hf(rows: list[dict], columns: list[str], out: Path, image_bytes) -> None:
    import datasets

    if out.exists():
        if not out.is_dir() or any(out.iterdir()):
            raise ValueError(f"{out}: exists and is not an empty directory")
        out.rmdir()
    data = {name: [row.get(name) for row in rows] for name in columns}
    if image_bytes is not None:
        data["image"] = [{"bytes": image_bytes(row), "path": None} for row in rows]
    dataset = datasets.Dataset.from_dict(data)
    if image_bytes is not None:
        dataset = dataset.cast_column("image", datasets.Image())
    dataset.save_to_disk(str(out))


def export_table(session: Session, user: User, what: str, out: str | Path, fmt: str,
                 collection: Collection | None = None) -> dict:
    """Export `ratings` or `captions` to `out`; returns a small summary."""
    if what == "ratings":
        rows = ratings_table(session, user, collection)
    elif what == "captions":
        rows = captions_table(session, user, collection)
    else:
        raise ValueError(f"unknown export {what!r}: ratings or captions")
    images = {image.sha256: image for image in session.scalars(
        select(Image).where(Image.sha256.in_({row["image_sha256"] for row in rows})))} if fmt == "hf" else {}
    path = write_table(rows, out, fmt,
                       image_bytes=(lambda row: read_image_bytes(images[row["image_sha256"]])) if fmt == "hf" else None)
    return {"what": what, "format": fmt, "rows": len(rows), "path": str(path)}


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
