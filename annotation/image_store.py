"""Content-addressed image store: files are named by the sha256 of the uploaded bytes, never
by client names.

`<data dir>/images/<first two hex digits>/<sha256>.<ext>`. The same upload is stored once.
An image with a side longer than `store_max_side` pixels (configurable: `$CAPLENS_STORE_MAX_SIDE`
or `store_max_side` in config.toml's `[limits]`; caption metrics look at 224-384 px) is kept
as a copy downscaled to that side, still under the upload's hash, so each stored image has a
bounded size. Writes go to a temporary file and are renamed into place, so a crash never
leaves a half-written image under its hash.
"""
from __future__ import annotations

import functools
import io
import os
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from PIL import Image as PILImage
from sqlalchemy import select
from sqlalchemy.orm import Session

from annotation.database import image_store_dir
from db.models import Image, StagedImage
from scoring.fingerprint import content_fingerprint
from scoring.images import ImageDecodeError, decode_image, open_checked
from scoring.paths import configured_limit

# Pillow format name -> file extension in the store.
STORED_FORMATS = {"JPEG": "jpg", "PNG": "png", "GIF": "gif", "WEBP": "webp", "BMP": "bmp", "TIFF": "tiff"}
DEFAULT_STORE_MAX_SIDE = 4096


@dataclass(frozen=True)
class ImageFacts:
    """What a decoded upload is: hash, format and size, checked before anything is stored."""

    sha256: str
    format: str
    width: int
    height: int
    size_bytes: int


def inspect_image(data: bytes, name: str = "upload") -> ImageFacts:
    """Decode `data` fully under the library's decoding policy; raise ValueError naming `name`
    if it is not a supported image. Width and height are those of the upright image (after
    its EXIF orientation), as the scorers and browsers show it; the bytes are stored as sent."""
    try:
        header = open_checked(data, name)
        upright = decode_image(data, name).image  # the whole image: catches truncated files with a valid header
    except ImageDecodeError as exc:
        raise ValueError(str(exc)) from None
    if header.format not in STORED_FORMATS:
        raise ValueError(f"{name}: image format {header.format} is not supported ({', '.join(STORED_FORMATS)})")
    width, height = upright.size
    return ImageFacts(content_fingerprint(data), header.format, width, height, len(data))


def stored_path(sha256: str, fmt: str, root: Path | None = None) -> Path:
    """Where the image with this hash and format lives in the store."""
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise ValueError(f"not a sha256 hex digest: {sha256!r}")
    root = root or image_store_dir()
    return root / sha256[:2] / f"{sha256}.{STORED_FORMATS[fmt]}"


def image_path(image: Image) -> Path:
    return stored_path(image.sha256, image.format)


def store_max_side() -> int:
    return configured_limit("store_max_side", DEFAULT_STORE_MAX_SIDE)


def stored_copy(data: bytes, facts: ImageFacts) -> tuple[bytes, ImageFacts]:
    """What the store keeps of an upload: its bytes as they are, or, when a side is longer than
    `store_max_side()`, the upright image downscaled to that side (JPEG at quality 95 for
    JPEG uploads, PNG otherwise), with the upload's hash and the copy's format and size."""
    limit = store_max_side()
    if max(facts.width, facts.height) <= limit:
        return data, facts
    image = decode_image(data).image
    image.thumbnail((limit, limit), PILImage.Resampling.LANCZOS)
    fmt = "JPEG" if facts.format == "JPEG" else "PNG"
    buffer = io.BytesIO()
    image.save(buffer, fmt, **({"quality": 95} if fmt == "JPEG" else {}))
    copy = buffer.getvalue()
    return copy, ImageFacts(facts.sha256, fmt, image.width, image.height, len(copy))


def write_to_store(data: bytes, facts: ImageFacts) -> Path:
    """Put the bytes into the store (idempotent: an existing file with that hash is kept)."""
    path = stored_path(facts.sha256, facts.format)
    if path.exists():
        os.utime(path)  # written again, as `orphaned_files` sees it: an import may be about to name it
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".incoming-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return path


def add_image(session: Session, data: bytes, original_filename: str | None = None,
              external_id: str | None = None, import_id: int | None = None) -> Image:
    """Store an image and return its row (the existing row when these bytes are known)."""
    facts = inspect_image(data, original_filename or "upload")
    return add_inspected_image(session, data, facts, original_filename, external_id, import_id)


def add_inspected_image(session: Session, data: bytes, facts: ImageFacts, original_filename: str | None = None,
                        external_id: str | None = None, import_id: int | None = None) -> Image:
    """The row of an upload `inspect_image` described, stored (bounded: `stored_copy`) unless
    these bytes are known; a known row whose file went missing gets it back."""
    existing = session.scalar(select(Image).where(Image.sha256 == facts.sha256))
    if existing is not None:
        if not image_path(existing).is_file():
            write_to_store(*stored_copy(data, facts))
        return existing
    data, facts = stored_copy(data, facts)
    write_to_store(data, facts)
    image = Image(sha256=facts.sha256, format=facts.format, width=facts.width, height=facts.height,
                  size_bytes=facts.size_bytes, original_filename=display_name(original_filename),
                  external_id=external_id, import_id=import_id)
    session.add(image)
    session.flush()
    return image


API_PICTURE_PX = 512  # the longer side of the picture an API or MCP caller gets with an item


def picture_data_uri(path: str | Path | None, size: int = API_PICTURE_PX) -> str | None:
    """A stored image (`path`, a screen's `image_file`) as a JPEG data URI, its longer side at most
    `size` pixels: what an API or MCP caller rates or judges by, since it cannot read the
    server's files; None without a file."""
    return None if path is None else _picture_data_uri(str(path), size)


@functools.lru_cache(maxsize=128)
def _picture_data_uri(path: str, size: int) -> str:
    """Kept by path: a stored file is named by its content, so it never changes, and each item is
    fetched by every annotator who rates it (a 1024 px image takes about 35 ms to shrink and encode)."""
    from scoring.images import thumbnail_data_uri

    with PILImage.open(path) as img:
        return thumbnail_data_uri(img, size)


def display_name(name: str | None) -> str | None:
    """Keep only the last path component of a client file name, as metadata."""
    if not name:
        return None
    return name.replace("\\", "/").rsplit("/", 1)[-1][:500] or None


def read_stored_bytes(sha256: str, fmt: str) -> bytes:
    """The stored file of the image with this hash and format."""
    try:
        return stored_path(sha256, fmt).read_bytes()
    except FileNotFoundError:
        raise OSError(f"image {sha256} is in the database but missing from the image store") from None


def orphaned_files(session: Session, idle: timedelta = timedelta(hours=1)) -> list[Path]:
    """Stored files no database row refers to (left by rolled-back or killed imports). An
    import still staging keeps its files, and so does a file written less than `idle` ago: an
    import writes its images before any staging row names them."""
    known = set(session.scalars(select(Image.sha256))) | set(session.scalars(select(StagedImage.sha256)))
    written_before = time.time() - idle.total_seconds()
    root = image_store_dir()
    return [p for p in root.glob("??/*") if p.is_file() and p.name.split(".")[0] not in known
            and p.stat().st_mtime < written_before]
