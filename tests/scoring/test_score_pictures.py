"""The Score tab's pictures and its examples' CIDEr-D document frequencies, in the library
(`scoring.session_scoring`, `scoring.images.thumbnail_data_uri`): issue 25."""
from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from scoring.api import get_scorer
from scoring.images import thumbnail_data_uri
from scoring.session_scoring import EXAMPLES, ScoreRequest, ScoreRow, example_document_frequencies, row_thumbnails, \
    score_request
from tests.scoring.test_session_scoring import Upload


def upload(name: str, colour, size=(300, 200)) -> Upload:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return Upload(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"), buffer.getvalue(), name)


def decoded(uri: str) -> Image.Image:
    head, data = uri.split(",", 1)
    assert head == "data:image/jpeg;base64"
    return Image.open(io.BytesIO(base64.b64decode(data)))


def test_a_thumbnail_is_a_small_jpeg_of_the_image():
    picture = decoded(thumbnail_data_uri(Image.new("RGB", (300, 200), (200, 30, 30))))
    assert picture.format == "JPEG" and picture.size == (64, 43)  # the longer side 64, the shape kept
    red, green, blue = picture.convert("RGB").getpixel((30, 20))
    assert red > 180 and green < 60 and blue < 60
    assert decoded(thumbnail_data_uri(Image.new("RGB", (20, 30), (0, 0, 0)))).size == (20, 30)  # never enlarged


def test_each_row_gets_its_own_images_picture_and_a_blank_cell_the_only_image():
    red, blue = upload("red.png", (200, 30, 30)), upload("blue.png", (30, 30, 200))
    records = [["red.png", "a red square", ""], ["blue", "a blue square", ""], ["green.png", "a green one", ""],
               ["", "any image", ""]]
    pictures = row_thumbnails(records, [red, blue])
    assert pictures[0] == thumbnail_data_uri(red.image) and pictures[1] == thumbnail_data_uri(blue.image)
    assert pictures[0] != pictures[1]
    assert pictures[2:] == ["", ""]  # no such image; a blank cell with two images names neither
    assert row_thumbnails([["", "a red square", ""]], [red]) == [thumbnail_data_uri(red.image)]
    assert row_thumbnails([["", "text only", ""]], []) == [""]


def test_the_outcome_carries_each_scored_images_picture_by_name():
    red, blue = upload("red.png", (200, 30, 30)), upload("blue.png", (30, 30, 200))
    outcome = score_request(get_scorer("tiny"), ScoreRequest([red, blue], [ScoreRow("", "a square")], "en",
                                                            ["BLEU-1"]), {})
    assert list(outcome.frame["image"]) == ["red.png", "blue.png"]
    assert outcome.thumbnails == {"red.png": thumbnail_data_uri(red.image), "blue.png": thumbnail_data_uri(blue.image)}


@pytest.mark.java
def test_examples_count_document_frequencies_over_every_example_so_one_image_scores_cider(java):
    refs_a = ["a small green circle", "a green circle on the left"]
    refs_b = ["a big red square", "a red square at the top"]
    refs_c = ["a blue triangle under a yellow star", "a star above a triangle"]
    examples = [[["a.png", "a small green circle", " | ".join(refs_a)], ["a.png", "a red circle", " | ".join(refs_a)],
                 ["b.png", "a big red square", " | ".join(refs_b)]],
                [["c.png", "a blue triangle under a yellow star", " | ".join(refs_c)],
                 ["c.png", "a red circle", " | ".join(refs_c)]]]
    source = example_document_frequencies(examples)
    assert source.label == f"{EXAMPLES}' references" and source.frequencies.reference_sets == 3  # a.png once
    image = [upload("c.png", (30, 30, 200))]
    rows = [ScoreRow("c.png", "a blue triangle under a yellow star", refs_c), ScoreRow("c.png", "a red circle", refs_c)]
    alone = score_request(get_scorer("tiny"), ScoreRequest(image, rows, "en", ["CIDEr"]), {})
    assert list(alone.frame["CIDEr"]) == [0.0, 0.0]  # this batch: one image, every IDF 0
    counted = score_request(get_scorer("tiny"), ScoreRequest(image, rows, "en", ["CIDEr"], source), {})
    good, bad = counted.frame["CIDEr"]
    assert good > 1.0 and good > bad >= 0
    assert counted.availability[0]["status"] == ("available; document frequencies from the examples' references: "
                                                 "3 reference set(s)")


def test_a_rows_csv_takes_references_as_the_table_writes_them(tmp_path):
    """The references cell keeps one format: the table writes " | ", and a CSV cell written so
    reads back the same (it was refused as "not a JSON list"); JSON lists still read."""
    from scoring.session_scoring import rows_from_files

    rows = tmp_path / "rows.csv"
    rows.write_text("image,candidate,references\n"
                    'a.png,a red square,"[""a red square"", ""a red block""]"\n'
                    "a.png,a red box,a red box | a small red square\n"
                    "a.png,one reference,a red thing\n", encoding="utf-8")
    records, problems = rows_from_files([rows])
    assert problems == []
    assert [r[2] for r in records] == ["a red square | a red block", "a red box | a small red square", "a red thing"]
    broken = tmp_path / "broken.csv"
    broken.write_text('image,candidate,references\na.png,a red box,"[""unclosed"\n', encoding="utf-8")
    assert rows_from_files([broken])[1] == ['row 1: references must be a JSON list of strings or text separated by "|"']
