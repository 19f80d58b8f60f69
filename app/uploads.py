"""Safe decoding of user-uploaded images.

Uploads come from strangers: anything that is not a plain, reasonably sized image must
become a clear message for the user, never an exception that takes the server down or a
decompression bomb that eats its memory. The checks, EXIF orientation and RGB conversion
are the library's one decoding policy (scoring.images.decode_image).

Files handed back for download are written into a folder of their own inside Gradio's cache
folder (:func:`download_folder`): Gradio serves them from there without another copy, and
its cache sweep (`delete_cache` in app.ui) removes them.
"""
from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from gradio.utils import get_upload_folder
from PIL import Image

from scoring.images import ImageDecodeError, check_file_size, decode_image, image_limits


DOWNLOAD_PREFIX = "caplens-download-"


class UploadError(ValueError):
    """An upload that cannot be used; the message is meant for the user."""


@dataclass
class LoadedImage:
    """A decoded RGB image plus the raw bytes (the scorer hashes them for its cache)."""

    image: Image.Image
    data: bytes
    name: str
    notes: list[str] = field(default_factory=list)


def max_upload_bytes() -> int:
    """The largest file the server accepts (Gradio refuses bigger uploads before any handler):
    the configured image byte limit."""
    return image_limits().max_bytes


def load_upload(source: str | Path | bytes, name: str | None = None) -> LoadedImage:
    """Decode an uploaded file into an RGB image or raise UploadError saying why."""
    if isinstance(source, (bytes, bytearray)):
        return _decode(bytes(source), name or "upload")
    path = Path(source)
    name = name or path.name
    try:
        check_file_size(path.stat().st_size, name)  # before reading the file into memory
        data = path.read_bytes()
    except ImageDecodeError as exc:
        raise UploadError(str(exc)) from None
    except OSError as exc:
        raise UploadError(f"{name}: the upload could not be read ({exc.strerror or exc}).") from None
    return _decode(data, name)


def _decode(data: bytes, name: str) -> LoadedImage:
    try:
        decoded = decode_image(data, name)
    except ImageDecodeError as exc:
        raise UploadError(str(exc)) from None
    return LoadedImage(image=decoded.image, data=data, name=name, notes=decoded.notes)


@contextmanager
def download_folder() -> Iterator[Path]:
    """A new folder for one download in Gradio's cache folder; removed if the block raises."""
    cache = Path(get_upload_folder())
    cache.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=DOWNLOAD_PREFIX, dir=cache))
    try:
        yield folder
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
