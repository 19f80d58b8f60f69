"""Safe decoding of user-uploaded images.

Uploads come from strangers: anything that is not a plain, reasonably sized image must
become a clear message for the user, never an exception that takes the server down or a
decompression bomb that eats its memory. The checks, EXIF orientation and RGB conversion
are the library's one decoding policy (scoring.images.decode_image).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from scoring.images import MAX_IMAGE_BYTES as MAX_UPLOAD_BYTES
from scoring.images import MAX_PIXELS, ImageDecodeError, decode_image  # noqa: F401 (MAX_PIXELS: the limit users read)


class UploadError(ValueError):
    """An upload that cannot be used; the message is meant for the user."""


@dataclass
class LoadedImage:
    """A decoded RGB image plus the raw bytes (the scorer hashes them for its cache)."""

    image: Image.Image
    data: bytes
    name: str
    notes: list[str] = field(default_factory=list)


def load_upload(source: str | Path | bytes, name: str | None = None) -> LoadedImage:
    """Decode an uploaded file into an RGB image or raise UploadError saying why."""
    if isinstance(source, (bytes, bytearray)):
        data = bytes(source)
        name = name or "upload"
    else:
        path = Path(source)
        name = name or path.name
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise UploadError(f"{name}: the upload could not be read ({exc.strerror or exc}).") from None
        if size > MAX_UPLOAD_BYTES:
            raise UploadError(f"{name}: file is {size / 2**20:.0f} MB; the limit is {MAX_UPLOAD_BYTES // 2**20} MB.")
        data = path.read_bytes()
    if not data:
        raise UploadError(f"{name}: the file is empty.")
    if len(data) > MAX_UPLOAD_BYTES:
        raise UploadError(f"{name}: file is {len(data) / 2**20:.0f} MB; the limit is {MAX_UPLOAD_BYTES // 2**20} MB.")
    return _decode(data, name)


def _decode(data: bytes, name: str) -> LoadedImage:
    try:
        decoded = decode_image(data, name)
    except ImageDecodeError as exc:
        raise UploadError(str(exc)) from None
    return LoadedImage(image=decoded.image, data=data, name=name, notes=decoded.notes)
