"""Safe decoding of user-uploaded images.

Uploads come from strangers: anything that is not a plain, reasonably sized image must
become a clear message for the user, never an exception that takes the server down or a
decompression bomb that eats its memory. Odd but valid images (CMYK, 16-bit, palette,
animated) are converted to RGB and the conversion is reported.
"""
from __future__ import annotations

import io
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

# Largest accepted upload, in bytes and in pixels. 40 megapixels covers every camera image
# a caption metric could want (they are resized to 224 px anyway) while keeping the
# decoded RGB buffer near 120 MB.
MAX_UPLOAD_BYTES = 50 * 1024 * 1024
MAX_PIXELS = 40_000_000
MAX_SIDE = 20_000


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
    notes: list[str] = []
    with warnings.catch_warnings():
        # Pillow warns (and above 2x its limit raises) on decompression bombs; we check the
        # header dimensions ourselves before any pixel is decoded, so silence its warning.
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            img = Image.open(io.BytesIO(data))
        except UnidentifiedImageError:
            raise UploadError(f"{name}: not an image (or a format Pillow cannot read).") from None
        except Image.DecompressionBombError:
            raise UploadError(f"{name}: image dimensions are too large to decode safely.") from None
        except (OSError, SyntaxError, ValueError) as exc:
            raise UploadError(f"{name}: the image could not be read ({exc}).") from None
        width, height = img.size
        if width <= 0 or height <= 0:
            raise UploadError(f"{name}: the image has no pixels ({width}x{height}).")
        if width * height > MAX_PIXELS or max(width, height) > MAX_SIDE:
            raise UploadError(
                f"{name}: {width}x{height} pixels is too large (limit {MAX_PIXELS // 1_000_000} megapixels, "
                f"{MAX_SIDE} px per side); resize it first."
            )
        frames = getattr(img, "n_frames", 1)
        if frames > 1:
            notes.append(f"animated image with {frames} frames: the first frame is used")
            img.seek(0)
        try:
            img.load()
        except Image.DecompressionBombError:
            raise UploadError(f"{name}: image dimensions are too large to decode safely.") from None
        except (OSError, SyntaxError, ValueError) as exc:
            raise UploadError(f"{name}: the image is damaged or truncated ({exc}).") from None
    rgb = _to_rgb(img, notes)
    return LoadedImage(image=rgb, data=data, name=name, notes=notes)


def _to_rgb(img: Image.Image, notes: list[str]) -> Image.Image:
    """Convert any Pillow mode to 8-bit RGB, scaling high-bit-depth data instead of clipping."""
    mode = img.mode
    if mode == "RGB":
        return img
    if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I", "F"):
        array = np.asarray(img, dtype=np.float64)
        top = 65535.0 if mode.startswith("I;16") else max(float(array.max()), 1.0)
        scaled = np.clip(array / top * 255.0, 0, 255).astype(np.uint8)
        notes.append(f"{'16-bit' if mode.startswith('I;16') else mode + '-mode'} image scaled to 8-bit RGB")
        return Image.fromarray(scaled, mode="L").convert("RGB")
    if mode in ("RGBA", "LA", "PA") or (mode == "P" and "transparency" in img.info):
        # Composite on white so transparent areas do not turn black.
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        notes.append(f"{mode} image with transparency composited on white")
        return Image.alpha_composite(background, rgba).convert("RGB")
    label = {"P": "palette", "CMYK": "CMYK", "L": "greyscale", "1": "1-bit", "YCbCr": "YCbCr"}.get(mode, mode)
    notes.append(f"{label} image converted to RGB")
    return img.convert("RGB")
