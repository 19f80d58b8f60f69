"""Corpus manifests, read one row at a time: JSONL, CSV, Parquet, or COCO results + annotations.

Fields of a row (JSONL keys, CSV or Parquet columns):
  image        image file (relative to the manifest's folder, or to --image-root) or an
               http(s):// / file:// URL                                      (required)
  candidate    the caption to score (also accepted: caption)                 (required)
  references   reference captions: a list (in CSV: JSON text, or separated by "|") (optional)
  id           the row's id, unique per model (default: its 1-based row number)
  model        the captioning model that wrote the candidate (default: "")
  lang         language code (also: language; default: --lang, else en)

COCO: the results file (`[{"image_id": 42, "caption": "..."}]`) with its annotations file
(`{"images": [{"id", "file_name"}], "annotations": [{"image_id", "caption"}]}`): the references
of an image are its annotation captions, the id is the image id and the model the results
file's name. Both are JSON documents and are read whole; the other formats stream.

A row whose fields cannot be used is still yielded, with `problem` saying why, so it reaches
the errors file with the others.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from scoring.clipscore_json import CANDIDATES_SHAPE, REFERENCES_SHAPE, clipscore_entries, is_candidates, is_references

FORMATS = ("jsonl", "csv", "parquet", "coco")
_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet",
             ".json": "coco"}
PARQUET_READ_ROWS = 4096  # rows per Parquet read, so a large file is never loaded whole


@dataclass
class CorpusRow:
    """One caption to score, as read from a manifest."""

    row: int  # 1-based position in the manifest
    id: str
    model: str
    image: str  # absolute path or URL
    candidate: str
    references: list[str] = field(default_factory=list)
    lang: str = "en"
    problem: str | None = None  # why the row cannot be scored, found while reading


@dataclass(frozen=True)
class Manifest:
    """Where a corpus is and how to read it."""

    path: Path
    format: str
    image_root: Path
    coco_annotations: Path | None = None
    lang: str = "en"

    @classmethod
    def from_description(cls, description: dict) -> "Manifest":
        annotations = description.get("coco_annotations")
        return cls(Path(description["path"]), description["format"], Path(description["image_root"]),
                   Path(annotations) if annotations else None, description.get("lang", "en"))

    def describe(self) -> dict:
        return {"path": str(self.path), "format": self.format, "image_root": str(self.image_root),
                "coco_annotations": str(self.coco_annotations) if self.coco_annotations else None, "lang": self.lang}


def open_manifest(path, *, coco_annotations=None, image_root=None, lang: str = "en") -> Manifest:
    """Check the manifest can be read (format from its suffix) and resolve its image folder."""
    path = Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"manifest not found: {path}")
    kind = _SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"{path.name}: unknown manifest format; expected one of {', '.join(_SUFFIXES)}")
    if kind == "coco" and coco_annotations is None:
        raise ValueError(f"{path.name} is a COCO results file: pass --coco-annotations with its annotations JSON")
    if coco_annotations is not None:
        if kind != "coco":
            raise ValueError("--coco-annotations goes with a COCO results .json manifest")
        coco_annotations = Path(coco_annotations).resolve()
        if not coco_annotations.is_file():
            raise FileNotFoundError(f"COCO annotations not found: {coco_annotations}")
    root = Path(image_root).resolve() if image_root else (coco_annotations or path).parent
    if not root.is_dir():
        raise FileNotFoundError(f"image root is not a folder: {root}")
    return Manifest(path, kind, root, coco_annotations, lang)


def read_manifest(manifest: Manifest) -> Iterator[CorpusRow]:
    """The manifest's rows in order, one at a time."""
    records = {"jsonl": _jsonl_records, "csv": _csv_records, "parquet": _parquet_records, "coco": _coco_records}
    for number, record in enumerate(records[manifest.format](manifest), start=1):
        yield _row(manifest, number, record)


def _jsonl_records(manifest: Manifest) -> Iterator[dict | str]:
    with open(manifest.path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                yield f"line {line_number} is not valid JSON ({exc.msg})"
                continue
            yield record if isinstance(record, dict) else f"line {line_number} is not a JSON object"


def _csv_records(manifest: Manifest) -> Iterator[dict]:
    with open(manifest.path, encoding="utf-8", newline="") as handle:
        yield from csv.DictReader(handle)


def _parquet_records(manifest: Manifest) -> Iterator[dict]:
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(manifest.path).iter_batches(batch_size=PARQUET_READ_ROWS):
        yield from batch.to_pylist()


def _load_json(path: Path, what: str):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{what} {path.name} is not valid JSON ({exc})") from None


def coco_captions(path: Path, data) -> tuple[dict[str, str], dict[str, list[str]]]:
    """A COCO captions file's image file names and reference captions, both keyed by the image
    id as text (so that 42 in a results list and "42" in a JSON object name the same image)."""
    if not isinstance(data, dict) or not isinstance(data.get("images"), list) or not isinstance(data.get("annotations"), list):
        raise ValueError(f"{path.name}: expected a COCO captions file with images and annotations")
    try:
        files = {str(image["id"]): str(image["file_name"]) for image in data["images"]}
        references: dict[str, list[str]] = {}
        for annotation in data["annotations"]:
            references.setdefault(str(annotation["image_id"]), []).append(str(annotation["caption"]))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{path.name}: a COCO image needs id and file_name, an annotation image_id and caption "
                         f"(missing {exc})") from None
    return files, references


def _coco_records(manifest: Manifest) -> Iterator[dict]:
    files, references = coco_captions(manifest.coco_annotations, _load_json(manifest.coco_annotations, "COCO annotations"))
    results = _load_json(manifest.path, "COCO results")
    if not isinstance(results, list):
        raise ValueError(f'{manifest.path.name}: expected a COCO results list [{{"image_id": ..., "caption": ...}}]')
    for result in results:
        image_id = result.get("image_id") if isinstance(result, dict) else None
        key = None if image_id is None else str(image_id)
        yield {
            "id": image_id, "model": manifest.path.stem, "image": files.get(key),
            "candidate": result.get("caption") if isinstance(result, dict) else None,
            "references": references.get(key, []),
        }


def _first(record: dict, *names: str):
    for name in names:
        value = record.get(name)
        if value is not None and value == value and value != "":  # NaN (Parquet) and "" (CSV) are absent
            return value
    return None


REFERENCE_SEPARATOR = "|"


def _references(value) -> list[str]:
    """A row's references: a list, or in a text cell a JSON list or the references separated by
    "|" (as the Score tab's table writes them, so a table saved as CSV reads back the same)."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        if not value.lstrip().startswith("["):
            return [part.strip() for part in value.split(REFERENCE_SEPARATOR) if part.strip()]
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError("references must be a JSON list of strings or text separated by \"|\"") from None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(r, str) for r in value):
        raise ValueError("references must be a list of strings")
    return [r for r in value if r.strip()]


def _image(manifest: Manifest, value) -> str:
    text = str(value).strip()
    if "://" in text:
        return text
    return str((manifest.image_root / text).resolve())


def _row(manifest: Manifest, number: int, record: dict | str, resolve_image: bool = True,
         image_optional: bool = False) -> CorpusRow:
    if isinstance(record, str):
        return CorpusRow(number, f"#{number}", "", "", "", problem=record)
    identifier = _first(record, "id")
    row = CorpusRow(
        row=number,
        id=str(identifier) if identifier is not None else f"#{number}",
        model=str(_first(record, "model") or ""),
        image="",
        candidate=str(_first(record, "candidate", "caption") or ""),
        lang=str(_first(record, "lang", "language") or manifest.lang),
    )
    image = _first(record, "image")
    image = "" if image is None else str(image).strip()  # (an image id may be the number 0)
    if image:
        row.image = _image(manifest, image) if resolve_image else image
    elif not image_optional:
        row.problem = "no image given"
        return row
    try:
        row.references = _references(_first(record, "references"))
    except ValueError as exc:
        row.problem = str(exc)
    return row


# -- rows of a small scoring request: `caplens score` and the app's Score tab ----------------

ROWS_SUFFIXES = (".csv", ".jsonl", ".ndjson", ".parquet", ".pq", ".json")


def read_score_rows(paths, lang: str = "en", image_optional: bool = False) -> list[CorpusRow]:
    """Rows to score (image, candidate, references) from the files a person gives: one CSV,
    JSONL or Parquet file of rows (fields as in a manifest), or JSON files that the content
    tells apart: a COCO results list with its COCO captions file, or `{"id": "caption"}` with
    `{"id": ["reference", ...]}` (the CLIPScore / PAC-S command-line formats).

    The image stays the name as written (a COCO image's file name, else its id): the caller
    matches it against its images (the CLI in a folder, the app among the uploads). Rows
    whose fields cannot be used carry `problem`; files that cannot be read raise ValueError.
    `image_optional`: a row without an image keeps image "" (the app's table: every image)."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("no rows file given")
    for path in paths:
        if path.suffix.lower() not in ROWS_SUFFIXES:
            raise ValueError(f"{path.name}: expected a .csv, .jsonl, .parquet or .json file")
    tables = [p for p in paths if p.suffix.lower() != ".json"]
    if tables:
        if len(paths) > 1:
            raise ValueError("give one CSV, JSONL or Parquet file of rows, or JSON files (COCO results + annotations)")
        path = tables[0]
        kind = _SUFFIXES[path.suffix.lower()]
        manifest = Manifest(path, kind, path.parent, None, lang)
        records = {"jsonl": _jsonl_records, "csv": _csv_records, "parquet": _parquet_records}[kind]
        try:
            found = list(records(manifest))
            columns = sorted({str(key) for record in found if isinstance(record, dict) for key in record})
            if columns and not {"candidate", "caption"} & set(columns):  # not a row's problem: the file's
                raise ValueError(f"{path.name}: no `candidate` column (its columns: {', '.join(columns)}); a rows "
                                 "file has the columns image, candidate and references (id, lang and model if wanted)")
            return [_row(manifest, n, record, resolve_image=False, image_optional=image_optional)
                    for n, record in enumerate(found, 1)]
        except (UnicodeDecodeError, csv.Error) as exc:
            raise ValueError(f"{path.name}: cannot read the rows ({exc})") from None
        except Exception as exc:  # pyarrow's errors for a file that is not Parquet
            if type(exc).__module__.startswith("pyarrow"):
                raise ValueError(f"{path.name}: not a Parquet file") from None
            raise
    return _json_rows(paths, lang)


def _json_rows(paths: list[Path], lang: str) -> list[CorpusRow]:
    candidates: dict | None = None
    references: dict | None = None
    files: dict = {}
    names = {}
    for path in paths:
        data = _load_json(path, "rows file")
        if isinstance(data, list):
            kind, value = "candidates", _coco_results(path, data)
        elif isinstance(data, dict) and "annotations" in data and "images" in data:
            kind = "references"
            files, value = coco_captions(path, data)
            names["coco"] = path.name
        elif is_candidates(data):
            kind, value = "candidates", {str(k): v for k, v in data.items()}
        elif is_references(data):
            kind, value = "references", {str(k): refs for k, refs in data.items()}
        else:
            raise ValueError(f"{path.name}: expected {CANDIDATES_SHAPE}, {REFERENCES_SHAPE}, "
                             "a COCO results list or a COCO captions file")
        if (candidates if kind == "candidates" else references) is not None:
            raise ValueError(f"{path.name}: two {kind} files given; give one of each")
        if kind == "candidates":
            candidates = value
        else:
            references = value
        names[kind] = path.name
    if candidates is None:
        raise ValueError(f"{' and '.join(p.name for p in paths)}: no candidates (a COCO results list or "
                         '{"image_id": "caption"})')
    # candidates and references paired by id through the format's one reader (a COCO captions file
    # holds other images too: its ids without a candidate are no mismatch)
    entries, extra = clipscore_entries(candidates, references)
    bad = next((e for e in entries if e.problem), None)
    if bad is not None:
        raise ValueError(f"{names['references']}: references of {bad.image_id!r} must be a list of strings")
    if references is not None and "coco" not in names:
        missing = [i for i in candidates if i not in references]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"no references for {len(missing)} id(s), e.g. {missing[:3]}")
            if extra:
                parts.append(f"{len(extra)} reference id(s) not among the candidates, e.g. {extra[:3]}")
            raise ValueError(f"ids of {names['references']} do not match the candidates: " + "; ".join(parts))
    rows = []
    for number, entry in enumerate(entries, start=1):
        row = CorpusRow(number, entry.image_id, "", files.get(entry.image_id, entry.image_id), entry.candidate,
                        entry.references, lang)
        if "coco" in names and entry.image_id not in files:
            row.problem = f"image id {entry.image_id} is not in {names['coco']}"
        rows.append(row)
    return rows


def _coco_results(path: Path, data: list) -> dict[str, str]:
    results = {}
    for entry in data:
        if not isinstance(entry, dict) or "image_id" not in entry or not isinstance(entry.get("caption"), str):
            raise ValueError(f'{path.name}: expected {{"image_id": "caption", ...}} or a COCO results list '
                             '[{"image_id": ..., "caption": ...}]')
        results[str(entry["image_id"])] = entry["caption"]
    if not results:
        raise ValueError(f"{path.name}: no candidates")
    return results
