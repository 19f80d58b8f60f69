"""The one image decoding policy: bytes, paths or PIL images in, upright 8-bit RGB out.

Every place that turns an image into pixels or accepts one (the scorer, uploads, the image
store's check of imported files) goes through :func:`decode_image` or :func:`load_image`, so
they all agree:

* the header is checked before any pixel is decoded: the file's bytes, its pixel count
  weighted by its bit depth and its longest side are bounded (:func:`image_limits`,
  configurable), which stops decompression bombs;
* EXIF orientation is applied, so a phone photo is scored the way it is seen;
* odd modes become 8-bit RGB (16-bit scaled, transparency on white, CMYK, palette), each
  conversion noted for the user; animated images use their first frame.

Images are identified by :func:`image_key`, a hash of their content.
"""
from __future__ import annotations

import io
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from scoring.fingerprint import content_fingerprint
from scoring.paths import configured_limit

ImageInput = Union[Image.Image, bytes, str, Path]

# Largest accepted image by default, in bytes and in pixels. 40 megapixels covers every camera
# image a caption metric could want (they are resized to 224-384 px anyway) while keeping the
# decoded RGB buffer near 120 MB.
DEFAULT_MAX_IMAGE_BYTES = 50 * 1024 * 1024
DEFAULT_MAX_PIXELS = 40_000_000
DEFAULT_MAX_SIDE = 20_000
EXIF_ORIENTATION = 0x0112


@dataclass(frozen=True)
class ImageLimits:
    """The largest image accepted: file bytes, pixels (width x height, of 8 bits per channel:
    a 16-bit image counts twice its pixels, a 32-bit one four times, as its decoded buffer
    grows) and pixels per side."""

    max_bytes: int
    max_pixels: int
    max_side: int


def image_limits() -> ImageLimits:
    """The configured limits: `$CAPLENS_IMAGE_MAX_BYTES` / `_PIXELS` / `_SIDE`, else
    `image_max_bytes` / `image_max_pixels` / `image_max_side` in the `[limits]` table of the
    data directory's config.toml, else the defaults above."""
    return ImageLimits(configured_limit("image_max_bytes", DEFAULT_MAX_IMAGE_BYTES),
                       configured_limit("image_max_pixels", DEFAULT_MAX_PIXELS),
                       configured_limit("image_max_side", DEFAULT_MAX_SIDE))


class ImageDecodeError(OSError):
    """Bytes that cannot become an image under the policy; the message is for the user."""


@dataclass
class DecodedImage:
    """An upright RGB image and what the conversion did to it (for the user to read)."""

    image: Image.Image
    notes: list[str] = field(default_factory=list)


def image_key(image: ImageInput) -> str:
    """Content hash: the file's bytes for paths/bytes, the decoded pixels for PIL images.

    The same picture uploaded twice (or under another name) therefore hits the cache.
    """
    if isinstance(image, Image.Image):
        return content_fingerprint(f"{image.mode}:{image.size}".encode(), image.tobytes())
    return bytes_key(read_image_bytes(image))


def bytes_key(data: bytes) -> str:
    """:func:`image_key` of encoded bytes already in memory."""
    return content_fingerprint(data)


def read_image_bytes(image: bytes | str | Path) -> bytes:
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image)
    path = os.fspath(image)
    try:
        return _read_file(path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise FileNotFoundError(f"image not found: {path}") from None


def _read_file(path: str) -> bytes:
    """A file's bytes, asked for in one read of its size (plus one to see the end) and read on
    until a read returns nothing, so a short read (a network or FUSE file system, a pipe) loses
    nothing: no existence check, no Python file object (scoring reads thousands of files)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    try:
        chunks = [os.read(fd, os.fstat(fd).st_size + 1)]  # a pipe's size is 0: one byte first
        while chunks[-1]:
            chunks.append(os.read(fd, 1 << 20))
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 2 else b"".join(chunks)


def check_file_size(size: int, name: str = "image", limits: ImageLimits | None = None) -> None:
    """ImageDecodeError when a file of `size` bytes is empty or over the byte limit."""
    limits = limits or image_limits()
    if not size:
        raise ImageDecodeError(f"{name}: the file is empty.")
    if size > limits.max_bytes:
        raise ImageDecodeError(f"{name}: file is {_readable(size)}; the limit is {_readable(limits.max_bytes)}.")


def _readable(size: int) -> str:
    if size >= 2**20:
        return f"{size / 2**20:.1f} MB"
    return f"{size / 2**10:.1f} KB" if size >= 2**10 else f"{size} bytes"


def open_checked(data: bytes, name: str = "image") -> Image.Image:
    """Parse the header only and enforce the limits; no pixel is decoded yet."""
    return _opened_checked(io.BytesIO(data), len(data), name)


def check_image_file(path: str | os.PathLike, name: str = "image") -> None:
    """`open_checked`'s checks of a file, reading its header only (not the whole file): for a
    pass that needs to know a file would be scored before the scoring reads it."""
    with open(path, "rb") as handle:
        _opened_checked(handle, os.fstat(handle.fileno()).st_size, name).close()


def _opened_checked(source, size: int, name: str) -> Image.Image:
    limits = image_limits()
    check_file_size(size, name, limits)
    with warnings.catch_warnings():
        # Pillow warns (and above 2x its limit raises) on decompression bombs; the header
        # dimensions are checked here before any pixel is decoded, so its warning is noise.
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            img = Image.open(source)
        except UnidentifiedImageError:
            raise ImageDecodeError(f"{name}: not an image (or a format Pillow cannot read).") from None
        except Image.DecompressionBombError:
            raise ImageDecodeError(f"{name}: image dimensions are too large to decode safely.") from None
        except (OSError, SyntaxError, ValueError) as exc:
            raise ImageDecodeError(f"{name}: the image could not be read ({exc}).") from None
    width, height = img.size
    if width <= 0 or height <= 0:
        raise ImageDecodeError(f"{name}: the image has no pixels ({width}x{height}).")
    depth = bits_per_channel(img.mode)
    if not fits_pixel_limits(width, height, depth, limits):
        deep = f" at {depth} bits per channel (it counts {depth // 8} times)" if depth > 8 else ""
        raise ImageDecodeError(
            f"{name}: {width}x{height} pixels{deep} is too large (limit {limits.max_pixels / 1_000_000:g} megapixels "
            f"at 8 bits per channel, {limits.max_side} px per side); resize it first."
        )
    return img


# Frame-header markers of the JPEG kinds nvJPEG decodes: baseline, extended sequential and
# progressive, Huffman-coded. Lossless, hierarchical and arithmetic-coded frames are not among them.
_NVJPEG_FRAMES = {0xC0, 0xC1, 0xC2}
_OTHER_FRAMES = {0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
_STANDALONE = {0x01, *range(0xD0, 0xD8)}  # TEM and the restart markers carry no length


@dataclass(frozen=True)
class JpegHeader:
    """What a JPEG's markers say before any pixel is decoded."""

    width: int
    height: int
    components: int  # 1 greyscale, 3 YCbCr/RGB, 4 CMYK/YCCK
    has_exif: bool


def scan_jpeg_header(data: bytes) -> JpegHeader | None:
    """The frame header of an 8-bit JPEG of a kind nvJPEG decodes, read by walking the markers
    (about a hundredth of the cost of Pillow's parser, which batch decoding paid per image);
    None for anything else (other formats, other JPEG kinds, damaged markers), which then
    takes the Pillow path and its error messages."""
    if data[:2] != b"\xff\xd8":
        return None
    position, end, has_exif = 2, len(data), False
    while position + 4 <= end:
        if data[position] != 0xFF:
            return None
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker in _STANDALONE:
            position += 2
            continue
        length = int.from_bytes(data[position + 2 : position + 4], "big")
        if length < 2 or marker in (0xDA, 0xD9) or marker in _OTHER_FRAMES:
            return None  # a scan or the end before any frame header, or a kind nvJPEG does not take
        if marker == 0xE1 and data[position + 4 : position + 10] == b"Exif\x00\x00":
            has_exif = True
        if marker in _NVJPEG_FRAMES:
            if length < 8 or position + 10 > end or data[position + 4] != 8:
                return None
            height = int.from_bytes(data[position + 5 : position + 7], "big")
            width = int.from_bytes(data[position + 7 : position + 9], "big")
            if not width or not height:
                return None
            return JpegHeader(width, height, data[position + 9], has_exif)
        position += 2 + length
    return None


def fits_pixel_limits(width: int, height: int, depth: int, limits: ImageLimits) -> bool:
    """Whether a width x height image of `depth` bits per channel is within the pixel limits."""
    return width * height * depth // 8 <= limits.max_pixels and max(width, height) <= limits.max_side


def jpeg_fits_limits(header: JpegHeader, size: int, limits: ImageLimits) -> bool:
    """Whether an 8-bit JPEG of ``size`` bytes with this header is within the limits that
    :func:`open_checked` enforces (which says why when it is not)."""
    return 0 < size <= limits.max_bytes and fits_pixel_limits(header.width, header.height, 8, limits)


def bits_per_channel(mode: str) -> int:
    """Bits per channel of a Pillow mode as decoded in memory (8 for the 8-bit and 1-bit modes)."""
    if mode.startswith("I;16"):
        return 16
    return 32 if mode in ("I", "F", "I;32", "RGBa;32") else 8


def exif_orientation(img: Image.Image) -> int:
    """The EXIF orientation tag (1 = upright; 2-8 = flips and rotations), 1 when absent."""
    try:
        value = img.getexif().get(EXIF_ORIENTATION, 1)
    except Exception:  # a malformed EXIF block must not make a readable image unreadable
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def decode_image(data: bytes, name: str = "image") -> DecodedImage:
    """Decode bytes under the policy; ImageDecodeError (an OSError) says why not."""
    notes: list[str] = []
    img = open_checked(data, name)
    frames = getattr(img, "n_frames", 1)
    if frames > 1:
        notes.append(f"animated image with {frames} frames: the first frame is used")
        img.seek(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            img.load()
        except Image.DecompressionBombError:
            raise ImageDecodeError(f"{name}: image dimensions are too large to decode safely.") from None
        except (OSError, SyntaxError, ValueError) as exc:
            raise ImageDecodeError(f"{name}: the image is damaged or truncated ({exc}).") from None
    return DecodedImage(to_rgb(upright(img), notes), notes)


def upright(img: Image.Image) -> Image.Image:
    """Apply the EXIF orientation (a no-op, without a copy, for upright images)."""
    if exif_orientation(img) == 1:
        return img
    return ImageOps.exif_transpose(img)


def to_rgb(img: Image.Image, notes: list[str]) -> Image.Image:
    """Convert any Pillow mode to 8-bit RGB, scaling high-bit-depth data instead of clipping."""
    mode = img.mode
    if mode == "RGB":
        return img
    if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I", "F"):
        # One buffer of the source's width (no float64 copies: a 20-megapixel 16-bit image stays
        # near 100 MB in all); 16-bit values map to 8 bits as v // 257 (65535 = 255 * 257).
        array = np.asarray(img)
        if mode.startswith("I;16"):
            scaled = (array.astype(np.uint16, copy=False) // 257).astype(np.uint8)
        else:
            top = max(float(array.max()), 1.0)
            scaled = np.clip(array * np.float32(255.0 / top), 0, 255).astype(np.uint8)
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


def load_image(image: ImageInput) -> Image.Image:
    """Upright RGB PIL image of any input; OSError naming the file when it is not an image."""
    if isinstance(image, Image.Image):
        return to_rgb(upright(image), [])
    data = read_image_bytes(image)
    where = "<bytes>" if isinstance(image, (bytes, bytearray, memoryview)) else str(image)
    try:
        return decode_image(data, Path(where).name if where != "<bytes>" else where).image
    except ImageDecodeError as exc:
        raise ImageDecodeError(f"cannot read image {where}: {exc}") from None


THUMBNAIL_PX = 64


def thumbnail_data_uri(img: Image.Image, size: int = THUMBNAIL_PX) -> str:
    """A small JPEG of `img` (its longer side `size` pixels) as a ``data:image/jpeg;base64,``
    URI: a picture a page can show beside its row without serving a file."""
    import base64

    small = to_rgb(img, []).copy()
    small.thumbnail((size, size))
    buffer = io.BytesIO()
    small.save(buffer, format="JPEG", quality=80)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
