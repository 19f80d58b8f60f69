"""The decoding policy (EXIF orientation), the decoded-image cache, and fast preprocessing
against each checkpoint's own processor."""
from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from scoring.api import ScoreItem, Scorer
from scoring.images import EXIF_ORIENTATION, decode_image, load_image
from scoring.pixels import ImagePipeline, PreprocessConfig, orient, preprocess_fast

FAST_TOLERANCE = 2e-3  # docs/scoring.md: CLIP-S, fast vs reference


def jpeg_with_orientation(image: Image.Image, orientation: int) -> bytes:
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = orientation
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=95, exif=exif)
    return buffer.getvalue()


def marked_image(width: int = 60, height: int = 40) -> Image.Image:
    """Grey, with a red block in the top-left corner: where it lands shows the rotation."""
    image = Image.new("RGB", (width, height), (128, 128, 128))
    image.paste((255, 0, 0), (0, 0, 15, 10))
    return image


def test_exif_rotation_is_applied_by_every_decode_path(tmp_path):
    data = jpeg_with_orientation(marked_image(), 6)  # 6: the camera was turned 90° clockwise
    decoded = decode_image(data, "phone.jpg").image
    assert decoded.size == (40, 60)  # upright: portrait
    red, _, _ = decoded.getpixel((35, 3))  # the top-left block is now top-right
    assert red > 200 and decoded.getpixel((3, 3))[0] < 180
    path = tmp_path / "phone.jpg"
    path.write_bytes(data)
    assert np.array_equal(np.asarray(load_image(path)), np.asarray(decoded))
    assert np.array_equal(np.asarray(load_image(Image.open(path))), np.asarray(decoded))


def test_upload_decoding_uses_the_policy():
    pytest.importorskip("gradio")  # the app's upload module (not on the GPU machine)
    from app.uploads import load_upload

    loaded = load_upload(jpeg_with_orientation(marked_image(), 8), name="phone.jpg")
    assert loaded.image.size == (40, 60)
    assert loaded.image.getpixel((3, 55))[0] > 200  # 8: turned counter-clockwise, block at bottom-left


@pytest.mark.parametrize("orientation", range(1, 9))
def test_tensor_orientation_equals_pillow(orientation):
    """The GPU decode path rotates decoded tensors itself; it must agree with Pillow."""
    from PIL import ImageOps

    base = marked_image(7, 5)
    tagged = Image.open(io.BytesIO(jpeg_with_orientation(base, orientation)))
    tagged.load()
    expected = np.asarray(ImageOps.exif_transpose(tagged).convert("RGB"))
    tensor = torch.from_numpy(np.asarray(tagged.convert("RGB")).copy()).permute(2, 0, 1)
    assert np.array_equal(orient(tensor, orientation).permute(1, 2, 0).numpy(), expected)


def test_decoded_cache_is_bounded_in_bytes(make_image):
    one_image = 3 * 40 * 48  # uint8 bytes of one decoded 48x40 image
    pipeline = ImagePipeline("cpu", mode="fast", cache_bytes=3 * one_image)
    images = [make_image(seed) for seed in range(5)]
    keys = [f"k{seed}" for seed in range(5)]
    decoded = pipeline.decode(keys, images)
    assert [tuple(t.shape) for t in decoded] == [(3, 40, 48)] * 5
    assert len(pipeline.decoded) == 3 and pipeline.decoded.weight == 3 * one_image
    hits = pipeline.decoded.hits
    pipeline.decode(keys[-1:], images[-1:])  # recent: cached
    assert pipeline.decoded.hits == hits + 1
    pipeline.decode(keys[:1], images[:1])  # evicted: decoded again
    assert pipeline.decoded.hits == hits + 1


def test_fast_preprocessing_equals_the_pillow_processor(tiny_dir, make_image):
    """Pixel for pixel (to float rounding), for CLIP's crop recipe and BLIP's square resize."""
    from transformers import AutoImageProcessor

    for folder in ("clip", "blip-itm"):
        processor = AutoImageProcessor.from_pretrained(tiny_dir / folder, backend="pil")
        images = [make_image(1, (97, 61)), make_image(2, (33, 50)), make_image(3, (97, 61))]
        expected = processor(images=images, return_tensors="pt")["pixel_values"]
        tensors = [torch.from_numpy(np.asarray(im).copy()).permute(2, 0, 1) for im in images]
        fast = preprocess_fast(tensors, PreprocessConfig.of(processor))
        assert fast.shape == expected.shape
        assert torch.allclose(fast, expected, atol=1e-5), (folder, (fast - expected).abs().max())


def example_items() -> list[ScoreItem]:
    """World scenes with their captions, as PNG and as larger JPEG (a resize that crops)."""
    from scoring.world.captions import scene_captions
    from scoring.world.render import render_scene
    from scoring.world.scene import generate_scenes

    items = []
    for scene in generate_scenes(100, 6):
        caption = scene_captions(scene, langs=("en",))["short"]["en"].text
        for size, fmt in ((128, "PNG"), (300, "JPEG")):
            buffer = io.BytesIO()
            render_scene(scene, size=size).save(buffer, fmt)
            items.append(ScoreItem(buffer.getvalue(), caption))
    return items


@pytest.mark.parametrize("profile", ["tiny", "world"])
def test_fast_clip_s_within_tolerance_of_reference(tiny_dir, profile):
    items = example_items()
    values = {
        mode: np.array(Scorer(profile, device="cpu", preprocess=mode).score(items, ["CLIP-S"])["CLIP-S"].values)
        for mode in ("reference", "fast")
    }
    assert values["reference"].max() > 0  # clipped-to-zero scores would hide a difference
    assert np.abs(values["fast"] - values["reference"]).max() <= FAST_TOLERANCE


def test_preprocessing_mode_defaults_and_validation(monkeypatch):
    assert ImagePipeline("cpu").mode == "reference"
    assert ImagePipeline(torch.device("cuda")).mode == "fast"  # no CUDA call needed to decide
    monkeypatch.setenv("CAPLENS_PREPROCESS", "fast")
    assert ImagePipeline("cpu").mode == "fast"
    with pytest.raises(ValueError, match="preprocessing mode"):
        ImagePipeline("cpu", mode="quick")


@pytest.mark.parametrize("resample", [0, 1, 2, 3, 4, 5])  # nearest, Lanczos, bilinear, bicubic, box, Hamming
def test_device_resize_equals_pillow_for_every_filter(make_image, resample):
    from scoring.pixels import _resize

    image = make_image(7, (53, 37))
    tensor = torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1)
    for width, height in ((20, 13), (80, 60), (7, 91)):  # down, up, mixed
        expected = np.asarray(image.resize((width, height), resample=resample))
        got = _resize([tensor], (height, width), resample)[0].permute(1, 2, 0).numpy().astype(np.uint8)
        assert np.array_equal(got, expected), (resample, width, height)
        # Only a window computed (what a centre crop keeps), from a band of the input: the same pixels.
        top, left = height // 3, width // 4
        window = (top, left, height - top - 1, max(1, width // 2))
        cut = _resize([tensor], (height, width), resample, window)[0].permute(1, 2, 0).numpy().astype(np.uint8)
        assert np.array_equal(cut, expected[top : top + window[2], left : left + window[3]]), (resample, width, height)


def _jpeg(mode="RGB", size=(96, 64), **save) -> bytes:
    rng = np.random.RandomState(size[0])
    channels = {"RGB": 3, "L": 1, "CMYK": 4}[mode]
    array = rng.randint(0, 255, (size[1], size[0], channels)).astype(np.uint8)
    image = Image.fromarray(array[..., 0] if channels == 1 else array, mode=mode)
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", **save)
    return buffer.getvalue()


def _with_orientation(data: bytes, orientation: int) -> bytes:
    image = Image.open(io.BytesIO(data))
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = orientation
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", exif=exif.tobytes())
    return buffer.getvalue()


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(buffer, "PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("name, data, expected", [
    ("baseline colour", _jpeg(), (96, 64, 3, 1)),
    ("greyscale", _jpeg("L", (40, 50)), (40, 50, 1, 1)),
    ("progressive", _jpeg(progressive=True), (96, 64, 3, 1)),
    ("restart intervals", _jpeg(restart_marker_blocks=1), (96, 64, 3, 1)),
    ("EXIF rotated", _with_orientation(_jpeg(size=(70, 30)), 6), (70, 30, 3, 6)),
    ("EXIF upright", _with_orientation(_jpeg(size=(70, 30)), 1), (70, 30, 3, 1)),
    ("CMYK", _jpeg("CMYK"), None),
    ("PNG", _png(), None),
    ("markers cut short", _jpeg()[:20], None),
    ("not an image", b"\xff\xd8hello", None),
])
def test_jpeg_header_scan_routes_images_as_pillows_parser_would(name, data, expected):
    """The marker scan decides which bytes nvJPEG gets and with which orientation: for each kind
    of file it agrees with Pillow's parser (size, channels, EXIF orientation), and what it
    refuses goes to the Pillow path."""
    from scoring.images import exif_orientation, image_limits, open_checked, scan_jpeg_header
    from scoring.pixels import _nvjpeg_candidate

    header = scan_jpeg_header(data)
    routed = _nvjpeg_candidate(data, image_limits())
    if expected is None:
        assert routed is None, name
        return
    width, height, components, orientation = expected
    assert (header.width, header.height, header.components) == (width, height, components)
    pillow = open_checked(data)
    assert pillow.size == (width, height) and pillow.mode == ("L" if components == 1 else "RGB")
    assert routed == (data, orientation) and exif_orientation(pillow) == orientation


def test_jpeg_over_the_limits_goes_to_pillow_which_says_why(monkeypatch):
    from scoring.images import ImageDecodeError, image_limits, open_checked
    from scoring.pixels import _nvjpeg_candidate

    data = _jpeg(size=(96, 64))
    assert _nvjpeg_candidate(data, image_limits()) is not None
    monkeypatch.setenv("CAPLENS_IMAGE_MAX_PIXELS", str(96 * 64 - 1))
    assert _nvjpeg_candidate(data, image_limits()) is None
    with pytest.raises(ImageDecodeError, match="too large"):
        open_checked(data)
    monkeypatch.setenv("CAPLENS_IMAGE_MAX_PIXELS", str(96 * 64))
    monkeypatch.setenv("CAPLENS_IMAGE_MAX_SIDE", "95")
    assert _nvjpeg_candidate(data, image_limits()) is None
    monkeypatch.setenv("CAPLENS_IMAGE_MAX_SIDE", "96")
    monkeypatch.setenv("CAPLENS_IMAGE_MAX_BYTES", str(len(data) - 1))
    assert _nvjpeg_candidate(data, image_limits()) is None
