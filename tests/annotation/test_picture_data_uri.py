"""The picture an API or MCP caller rates by: a JPEG data URI of the stored image, its longer
side at most 512 px, never enlarged."""
from __future__ import annotations

import base64
import io

from PIL import Image

from annotation.image_store import API_PICTURE_PX, picture_data_uri


def _size(uri: str) -> tuple[int, int]:
    assert uri.startswith("data:image/jpeg;base64,")
    with Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))) as img:
        return img.size


def test_a_large_image_is_scaled_to_512_px_on_its_longer_side_and_a_small_one_kept(tmp_path):
    Image.new("RGB", (1200, 800), (10, 200, 30)).save(tmp_path / "wide.png")
    Image.new("RGBA", (40, 90), (10, 200, 30, 128)).save(tmp_path / "small.png")
    assert API_PICTURE_PX == 512
    assert _size(picture_data_uri(tmp_path / "wide.png")) == (512, 341)
    assert _size(picture_data_uri(tmp_path / "small.png")) == (40, 90)
    assert picture_data_uri(None) is None
