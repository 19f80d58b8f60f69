"""Image inputs: accept PIL images, encoded bytes or file paths; hash them by content."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Union

from PIL import Image, UnidentifiedImageError

from scoring.fingerprint import content_fingerprint

ImageInput = Union[Image.Image, bytes, str, Path]


def image_key(image: ImageInput) -> str:
    """Content hash: the file's bytes for paths/bytes, the decoded pixels for PIL images.

    The same picture uploaded twice (or under another name) therefore hits the cache.
    """
    if isinstance(image, Image.Image):
        return content_fingerprint(f"{image.mode}:{image.size}".encode(), image.tobytes())
    return content_fingerprint(read_image_bytes(image))


def read_image_bytes(image: bytes | str | Path) -> bytes:
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image)
    path = Path(image)
    if not path.is_file():
        raise FileNotFoundError(f"image not found: {path}")
    return path.read_bytes()


def load_image(image: ImageInput) -> Image.Image:
    """Decode to an RGB PIL image; OSError with the file name when it is not an image."""
    if isinstance(image, Image.Image):
        return image.convert("RGB")
    data = read_image_bytes(image)
    try:
        decoded = Image.open(io.BytesIO(data))
        decoded.load()
    except (UnidentifiedImageError, OSError) as exc:
        where = image if not isinstance(image, (bytes, bytearray, memoryview)) else "<bytes>"
        raise OSError(f"cannot read image {where}: {exc}") from exc
    return decoded.convert("RGB")
