"""Import sources read into raw rows: CSV, JSONL, a zip with a manifest, CLIPScore / PAC-S JSON.

A raw row is (label, record) where record is a dict of the fields annotation.transfer.importers
documents, or a string saying why that row could not be read. Images are looked up through
a `FileImages` (a folder, confined to it) or a `ZipImages` (members of the zip, never
extracted to disk paths; the zip is checked against `annotation.transfer.archives` limits first, and an
image path with '..' is refused in both).
"""
from __future__ import annotations

import csv
import io
import json
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from annotation.transfer.archives import ArchiveError, check_archive, member_path, open_zip
from annotation.image_store import ImageFacts
from scoring.clipscore_json import clipscore_entries
from scoring.csv_safe import unescape_cell
from scoring.images import image_limits
from scoring.paths import caption_max_chars

FORMATS = ("csv", "jsonl", "zip", "clipscore")
MANIFEST_NAMES = ("manifest.jsonl", "manifest.csv", "manifest.json")
CAPTION_TEXT_FIELDS = ("caption", "text", "candidate")  # the field names a row's caption may have
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tiff", ".tif", ".gif", ".webp", ".bmp")

RawRows = list[tuple[str, "dict | str"]]


@dataclass
class ImageSource:
    """Where a row's image bytes come from, and what they were checked to be."""

    key: str  # sha256:<hex>, or the manifest path / zip member name
    label: str
    read: Callable[[], bytes] | None
    facts: ImageFacts | None = None
    existing_sha256: str | None = None


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


def strict_csv(text: str) -> csv.DictReader:
    """The one way CSV uploads are read. Strict: a stray quote in a quoted field ("a "red" car")
    is an error, not a caption silently stored as 'a red" car"'."""
    return csv.DictReader(io.StringIO(text), strict=True)


def csv_records(text: str) -> list[dict]:
    """Every record of a CSV upload; an unreadable line is a ValueError naming it."""
    return list(_records(strict_csv(text)))


def csv_rows(text: str) -> RawRows:
    reader = strict_csv(text)
    if not reader.fieldnames:
        return []
    rows = []
    for record in _records(reader):
        label = _lines(record, reader.line_num)
        if None in record:
            rows.append((label, "more fields than the header has columns"))
            continue
        rows.append((label, {k.strip(): _cell(k.strip(), v) for k, v in record.items() if k}))
    return rows


def _lines(record: dict, last: int) -> str:
    """Where a record stands in the file: "line N", or "lines N-M" when a quoted field spans
    lines (the reader counts only to a record's last line, so a caption with a line break
    was reported one line past where its row starts)."""
    cells = [v for k, v in record.items() if k is not None] + list(record.get(None) or [])
    breaks = sum(cell.count("\n") for cell in cells if isinstance(cell, str))
    return f"line {last}" if not breaks else f"lines {last - breaks}-{last}"


def _records(reader: csv.DictReader):
    """The reader's records, unescaped; a line the csv module cannot read (a field over its limit of
    `csv.field_size_limit()` characters, an unclosed or stray quote) is a ValueError naming the line,
    and so is a header naming a column twice (the reader would keep the last one's cells only)."""
    names = [unescape_cell(name).strip() for name in reader.fieldnames or []]
    twice = sorted({name for name in names if name and names.count(name) > 1})  # empty: unused columns
    if twice:
        raise ValueError(f"line 1: the header names {', '.join(map(repr, twice))} more than once; "
                         "give each column once")
    while True:
        try:
            # Cells as written before CapLens's CSV writer escaped them (scoring.csv_safe), so an
            # exported caption "-ish" comes back as "-ish", not "'-ish".
            yield {unescape_cell(k): unescape_cell(v) for k, v in next(reader).items()}
        except StopIteration:
            return
        except csv.Error as exc:  # raised before the reader counts the line it was reading
            if "field larger than field limit" in str(exc):
                raise ValueError(f"line {reader.line_num + 1}: a field is longer than {csv.field_size_limit():,} "
                                 f"characters; a caption may have at most "
                                 f"{caption_max_chars():,}") from None
            if "expected after" in str(exc):
                raise ValueError(f"line {reader.line_num + 1}: text follows the quote that closes a quoted field; "
                                 'inside quotes, write a quote as two ("")') from None
            raise ValueError(f"line {reader.line_num + 1}: not readable as CSV ({exc})") from None


def _cell(column: str, value: str | None) -> str | None:
    """A CSV cell as a field: spaces around it dropped, except in caption text, kept byte for byte."""
    if value is None or column in CAPTION_TEXT_FIELDS:
        return value
    return value.strip()


def jsonl_rows(text: str) -> RawRows:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        label = f"line {number}"
        try:
            record = _decode_json(line)
        except ValueError as exc:
            rows.append((label, str(exc)))
            continue
        rows.append((label, record if isinstance(record, dict) else "not a JSON object"))
    return rows


def _decode_json(text: str):
    """`text` parsed as JSON; ValueError "not valid JSON (why)", also for a value nested too
    deeply for the parser (its RecursionError reached users as "Something went wrong")."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise ValueError("not valid JSON (nested too deeply)") from None


def parse_json(text: str, what: str, kind: type, expected: str):
    """`text` parsed as JSON, which must be a `kind`; ValueError naming `what` otherwise."""
    try:
        value = _decode_json(text)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    if not isinstance(value, kind):
        raise ValueError(f"{what}: expected {expected}")
    return value


def json_list_rows(text: str, source: str) -> RawRows:
    records = parse_json(text, source, list, "a JSON manifest: a list of row objects")
    return [(f"entry {i}", r if isinstance(r, dict) else "not a JSON object") for i, r in enumerate(records)]


def decode_text(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{source}: not UTF-8 text ({exc})") from exc


def manifest_rows(name: str, text: str) -> RawRows:
    if name.endswith(".csv"):
        return csv_rows(text)
    if name.endswith(".json"):
        return json_list_rows(text, name)
    return jsonl_rows(text)


class FileImages:
    """Images referenced by relative path from a manifest on disk (confined to its folder), or
    from the folder the importer names (`--image-dir`)."""

    def __init__(self, base: Path, named: bool = False):
        self.base = base.resolve()
        self.where = "in the image folder (--image-dir)" if named else \
            "next to the manifest (a zip of the manifest and its images brings them along; or give --image-dir)"
        self._found: dict[str, ImageSource | str] = {}

    def source(self, ref: str) -> ImageSource | str:
        """Where `ref` is (looked up once per distinct ref: many rows share an image)."""
        if ref not in self._found:
            self._found[ref] = self._look_up(ref)
        return self._found[ref]

    def _look_up(self, ref: str) -> ImageSource | str:
        relative = PurePosixPath(ref.replace("\\", "/"))
        if relative.is_absolute() or ".." in relative.parts:
            return f"image path {ref!r} must be relative to the manifest's folder, without '..'"
        path = (self.base / relative).resolve()
        if not path.is_relative_to(self.base) or not path.is_file():
            return f"image {ref!r} not found {self.where}"
        return ImageSource(key=str(relative), label=ref, read=path.read_bytes)


class ZipImages:
    """Images looked up by member name inside a zip (never extracted to disk paths)."""

    def __init__(self, archive: zipfile.ZipFile, prefix: str):
        self.archive = archive
        self.members = {info.filename: info for info in archive.infolist() if not info.is_dir()}
        self.prefix = prefix

    def source(self, ref: str) -> ImageSource | str:
        try:
            name = self.prefix + member_path(ref).as_posix()
        except ArchiveError:
            return f"image path {ref!r} must be relative to the manifest's folder, without '..'"
        info = self.members.get(name)
        if info is None:
            return f"image {ref!r} is not in the zip"
        limit = image_limits().max_bytes
        if info.file_size > limit:
            return f"image {ref!r} is larger than {limit:,} bytes"
        return ImageSource(key=name, label=ref, read=lambda: self.archive.read(info))


def find_manifest(archive: zipfile.ZipFile, source: str) -> tuple[str, str]:
    names = [n for n in archive.namelist() if not n.endswith("/")]
    for candidate in MANIFEST_NAMES:
        for name in names:
            if name == candidate or (name.count("/") == 1 and name.endswith("/" + candidate)):
                return name, name[: -len(candidate)]
    raise ValueError(f"{source}: the zip has no {' / '.join(MANIFEST_NAMES)} at its top level")


def clipscore_rows(path: Path, references: Path | None, image_dir: Path | None,
                   source_model: str | None) -> RawRows:
    if image_dir is None:
        raise ValueError("the CLIPScore / PAC-S format needs --image-dir (images named <image_id>.<ext>)")
    if not image_dir.is_dir():
        raise ValueError(f"{image_dir}: not a directory")

    def load(json_path: Path) -> dict:
        return parse_json(decode_text(json_path.read_bytes(), str(json_path)), str(json_path), dict,
                          "an object keyed by image id")

    entries, extra = clipscore_entries(load(path), load(references) if references else None)
    images = {}
    for file in sorted(image_dir.iterdir()):
        if file.is_file() and file.suffix.lower() in IMAGE_SUFFIXES:
            images.setdefault(file.stem, file.name)
    rows: RawRows = []
    for entry in entries:
        label = f"candidate {entry.image_id!r}"
        if entry.problem:
            rows.append((label, entry.problem))
        elif entry.image_id not in images:
            rows.append((label, f"no image named {entry.image_id}.<png|jpg|...> in {image_dir}"))
        else:
            rows.append((label, {"image": images[entry.image_id], "image_id": entry.image_id, "caption": entry.candidate,
                                 "kind": "candidate", "model": source_model, "references": entry.references}))
    for image_id in extra:
        rows.append((f"references {image_id!r}", "references for an image id that has no candidate"))
    return rows


@contextmanager
def open_source(path: Path, fmt: str, *, references: Path | None = None, image_dir: Path | None = None,
                source_model: str | None = None) -> Iterator[tuple[RawRows, FileImages | ZipImages]]:
    """The raw rows of `path` read as `fmt`, and where their images come from (a zip stays
    open while the block runs)."""
    if fmt == "zip":
        with open_zip(path) as archive:
            check_archive(archive, path.name, whole=False)  # members are read one at a time, each bounded
            manifest, prefix = find_manifest(archive, str(path))
            yield manifest_rows(manifest, decode_text(archive.read(manifest), manifest)), ZipImages(archive, prefix)
    elif fmt == "clipscore":
        yield clipscore_rows(path, references, image_dir, source_model), FileImages(Path(image_dir))
    else:
        text = decode_text(path.read_bytes(), str(path))
        images = FileImages(image_dir, named=True) if image_dir is not None else FileImages(path.parent)
        yield (csv_rows(text) if fmt == "csv" else jsonl_rows(text)), images
