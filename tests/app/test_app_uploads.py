"""Bad and odd uploads: clear UploadError messages, or a correct RGB conversion with a note."""
import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from app.uploads import UploadError, load_upload
from scoring.images import image_limits


def encode(img: Image.Image, fmt: str = "PNG", **kwargs) -> bytes:
    buffer = io.BytesIO()
    img.save(buffer, format=fmt, **kwargs)
    return buffer.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height but holds almost no data (a decompression bomb's shape)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b"")


def test_plain_rgb_passes_unchanged():
    loaded = load_upload(encode(Image.new("RGB", (20, 10), (10, 200, 30))), name="ok.png")
    assert loaded.image.mode == "RGB" and loaded.image.size == (20, 10)
    assert loaded.notes == []
    assert loaded.image.getpixel((3, 3)) == (10, 200, 30)


@pytest.mark.parametrize("data, expected", [
    (b"this is not an image at all", "not an image"),
    (b"", "empty"),
])
def test_non_images_are_rejected_with_a_reason(data, expected):
    with pytest.raises(UploadError, match=expected):
        load_upload(data, name="notes.txt")


def test_truncated_file_is_rejected():
    data = encode(Image.effect_noise((64, 64), 40).convert("RGB"), "JPEG")
    with pytest.raises(UploadError, match="damaged or truncated"):
        load_upload(data[: len(data) // 2], name="cut.jpg")


@pytest.mark.parametrize("width, height", [(30_000, 30_000), (100_000, 10), (9000, 9000)])
def test_huge_dimensions_are_refused_before_decoding(width, height):
    with pytest.raises(UploadError, match="too large"):
        load_upload(png_header_only(width, height), name="bomb.png")
    assert width * height > image_limits().max_pixels or max(width, height) > image_limits().max_side


def test_cmyk_is_converted_with_a_note():
    data = encode(Image.new("CMYK", (8, 8), (0, 255, 255, 0)), "JPEG")
    loaded = load_upload(data, name="print.jpg")
    assert loaded.image.mode == "RGB"
    assert any("CMYK" in note for note in loaded.notes)
    r, g, b = loaded.image.getpixel((4, 4))
    assert r > 200 and g < 60 and b < 60  # cyan 0, magenta+yellow full = red


def test_sixteen_bit_is_scaled_not_clipped():
    array = np.full((6, 6), 32768, dtype=np.uint16)  # half of full scale
    data = encode(Image.fromarray(array), "PNG")
    loaded = load_upload(data, name="depth.png")
    assert loaded.image.mode == "RGB"
    assert any("16-bit" in note for note in loaded.notes)
    assert 120 <= loaded.image.getpixel((0, 0))[0] <= 135


def test_palette_with_transparency_composites_on_white():
    img = Image.new("P", (4, 4), 0)
    img.putpalette([0, 0, 0] * 256)
    data = encode(img, "PNG", transparency=0)
    loaded = load_upload(data, name="icon.png")
    assert loaded.image.getpixel((0, 0)) == (255, 255, 255)
    assert loaded.notes


def test_animated_gif_uses_first_frame():
    frames = [Image.new("RGB", (5, 5), colour) for colour in [(255, 0, 0), (0, 0, 255)]]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    loaded = load_upload(buffer.getvalue(), name="anim.gif")
    assert loaded.image.mode == "RGB"
    assert any("animated" in note and "2 frames" in note for note in loaded.notes)
    r, g, b = loaded.image.getpixel((2, 2))
    assert r > 200 and b < 50


def test_path_input_and_missing_file(tmp_path):
    path = tmp_path / "x.png"
    path.write_bytes(encode(Image.new("L", (3, 3), 80)))
    loaded = load_upload(path)
    assert loaded.name == "x.png" and loaded.image.mode == "RGB"
    with pytest.raises(UploadError, match="could not be read"):
        load_upload(tmp_path / "missing.png")


def test_limits_are_configurable_and_checked_before_decoding(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path))
    image = encode(Image.new("RGB", (300, 200), (1, 2, 3)))
    assert load_upload(image, name="ok.png").image.size == (300, 200)
    (tmp_path / "config.toml").write_text("[limits]\nimage_max_pixels = 50_000\nimage_max_side = 250\n")
    assert (image_limits().max_pixels, image_limits().max_side) == (50_000, 250)
    with pytest.raises(UploadError, match=r"300x200 pixels is too large \(limit 0.05 megapixels at 8 bits per "
                                          r"channel, 250 px per side\)"):
        load_upload(image, name="big.png")
    monkeypatch.setenv("CAPLENS_IMAGE_MAX_BYTES", str(len(image) - 1))  # the environment wins over the file
    path = tmp_path / "big.png"
    path.write_bytes(image)
    with pytest.raises(UploadError, match=rf"big.png: file is {len(image)} bytes; the limit is {len(image) - 1} bytes"):
        load_upload(path)
    monkeypatch.setenv("CAPLENS_IMAGE_MAX_BYTES", "0")
    with pytest.raises(ValueError, match=r"\$CAPLENS_IMAGE_MAX_BYTES: must be a positive number"):
        image_limits()
    monkeypatch.delenv("CAPLENS_IMAGE_MAX_BYTES")
    (tmp_path / "config.toml").write_text("[limits]\nimage_max_pixels = 'lots'\n")
    with pytest.raises(ValueError, match=r"config.toml: \[limits\] image_max_pixels: 'lots' is not a whole number"):
        image_limits()


def test_a_sixteen_bit_image_counts_twice_its_pixels_and_is_refused_from_its_header(monkeypatch):
    """Pixels x bit depth: at a limit of 200 (8-bit) pixels, a 16-bit image of 100 pixels is
    accepted and one of 110 is refused before any pixel is decoded (its header only)."""
    monkeypatch.setenv("CAPLENS_IMAGE_MAX_PIXELS", "200")
    grey = Image.fromarray(np.full((10, 20), 51400, dtype=np.uint16))  # 8-bit: 200 pixels, accepted
    assert load_upload(encode(grey.convert("L")), name="eight.png").image.size == (20, 10)
    at_limit = encode(Image.fromarray(np.full((10, 10), 51400, dtype=np.uint16)))
    loaded = load_upload(at_limit, name="deep.png")
    assert loaded.image.size == (10, 10) and loaded.image.getpixel((0, 0)) == (200, 200, 200)  # 51400 // 257
    past = encode(Image.fromarray(np.full((10, 11), 51400, dtype=np.uint16)))
    decoded = []
    monkeypatch.setattr(Image.Image, "load", lambda self: decoded.append(self) or None)
    with pytest.raises(UploadError, match=r"deep.png: 11x10 pixels at 16 bits per channel \(it counts 2 times\) is too "
                                          r"large \(limit 0.0002 megapixels at 8 bits per channel"):
        load_upload(past, name="deep.png")
    assert decoded == []


def test_a_forty_megapixel_sixteen_bit_png_is_refused_by_default():
    """The issue's 78 KB file: 40 megapixels of 16-bit grey, refused from its header."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 8000, 5000, 16, 0, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b"")
    with pytest.raises(UploadError, match="8000x5000 pixels at 16 bits per channel"):
        load_upload(data, name="deep.png")
    assert 8000 * 5000 <= image_limits().max_pixels  # the pixel count alone is within the limit
