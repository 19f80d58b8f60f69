"""An annotator's rating screen when an image file is missing, and EXIF orientation at upload."""
from __future__ import annotations

import io

import pytest
from PIL import Image as PILImage
from sqlalchemy import func, select

from annotation.studies import queue_screens
from annotation.captions import add_caption, get_or_create_collection
from annotation.image_store import add_image, image_path
from db.models import Rating
from db.session import session_scope
from scoring.images import EXIF_ORIENTATION, load_image


def rotated_jpeg(orientation: int = 6) -> bytes:
    """A 40x20 JPEG (left half red, right half blue) whose EXIF says: turn it 90 degrees."""
    img = PILImage.new("RGB", (40, 20), (220, 20, 20))
    img.paste((20, 20, 220), (20, 0, 40, 20))
    exif = PILImage.Exif()
    exif[EXIF_ORIENTATION] = orientation
    buffer = io.BytesIO()
    img.save(buffer, "JPEG", exif=exif, quality=95)
    return buffer.getvalue()


def test_an_upload_is_stored_as_sent_with_its_upright_size(engine):
    data = rotated_jpeg(6)
    with session_scope(engine) as session:
        image = add_image(session, data, "phone.jpg")
        assert (image.width, image.height) == (20, 40)  # upright; the raw header says 40x20
        path = image_path(image)
    assert path.read_bytes() == data  # content-addressed: the bytes as sent, EXIF kept for browsers
    upright = load_image(path)
    assert upright.size == (20, 40)
    # Orientation 6: turned 90 degrees clockwise to be upright, the red left half is on top.
    assert upright.getpixel((10, 5))[0] > 150 and upright.getpixel((10, 35))[2] > 150


@pytest.fixture
def one_caption(engine, accounts, make_png):
    with session_scope(engine) as session:
        collection = get_or_create_collection(session, accounts["rita"], "gone")
        image = add_image(session, make_png(), "lost.png")
        caption = add_caption(session, accounts["rita"], image, "a red square", collection=collection)
        return caption.id, image_path(image)


def test_a_caption_whose_image_file_is_missing_cannot_be_rated(engine, accounts, one_caption):
    caption_id, path = one_caption
    ann = accounts["ann"].id
    assert queue_screens.rating_screen(ann, "gone").can_rate
    path.unlink()
    screen = queue_screens.rating_screen(ann, "gone")
    assert screen.caption_id == caption_id and screen.image_file is None and not screen.can_rate
    assert f"image of caption {caption_id} is missing" in screen.message and "Skip" in screen.message
    with pytest.raises(ValueError, match="missing from the image store"):
        queue_screens.rate(ann, caption_id, 0.8)
    with pytest.raises(ValueError, match="missing from the image store"):
        queue_screens.rate_and_next(ann, "gone", caption_id, 0.8)
    with session_scope(engine) as session:
        assert session.scalar(select(func.count()).select_from(Rating)) == 0
    skipped = queue_screens.skip_rating(ann, "gone", caption_id)  # Skip still moves on
    assert skipped.caption_id is None
