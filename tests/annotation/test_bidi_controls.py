"""Bidirectional embedding, override and isolate controls (U+202A-U+202E, U+2066-U+2069) are
refused in captions and collection names, like the C0 control characters, by code point and
position: they show a text in another order than it is stored and scored ("Trojan Source"), so
an annotator could rate words other than the ones stored."""
from __future__ import annotations

import json

import pytest

from annotation.captions import add_caption, get_or_create_collection, validate_caption_text
from annotation.errors import user_message
from annotation.image_store import add_image
from annotation.transfer.importers import ImportRejected, import_file
from db.session import session_scope

BIDI = [0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069]


@pytest.mark.parametrize("code", BIDI)
def test_a_caption_with_a_bidi_control_is_refused_naming_it(code):
    text = f"a dog {chr(code)}on grass"
    with pytest.raises(ValueError, match=f"^caption text holds the bidirectional control character U\\+{code:04X} "
                                         "at position 7$"):
        validate_caption_text(text)


def test_the_first_control_character_of_either_kind_is_named():
    with pytest.raises(ValueError, match="bidirectional control character U\\+2067 at position 3$"):
        validate_caption_text("a \u2067dog\x00")
    with pytest.raises(ValueError, match="holds the control character U\\+0000 at position 2$"):
        validate_caption_text("a\x00 \u2067dog")


@pytest.mark.parametrize("code", [0x80, 0x85, 0x9F])
def test_a_c1_control_character_is_refused_as_mojibake_would_be(code):
    """C1 codes (U+0080-U+009F) are what a cp1252 text read as Latin-1 leaves behind."""
    with pytest.raises(ValueError, match=f"holds the control character U\\+{code:04X} at position 3$"):
        validate_caption_text(f"a {chr(code)}dog")
    assert validate_caption_text("a \u00a0dog \u00e9t\u00e9") == "a \u00a0dog \u00e9t\u00e9"  # the first non-control


@pytest.mark.parametrize("mark", ["\u200e", "\u200f"])
def test_the_plain_direction_marks_stay_allowed(mark):
    text = f"\u05db\u05dc\u05d1 {mark}(2)"
    assert validate_caption_text(text) == text


def test_add_caption_refuses_a_reversed_caption(engine, accounts, make_png):
    with session_scope(engine) as s:
        rita = s.merge(accounts["rita"])
        image = add_image(s, make_png(), original_filename="a.png")
        with pytest.raises(ValueError) as refused:
            add_caption(s, rita, image, "a cat \u202egod a no\u202c")
    assert user_message(refused.value) == ("caption text holds the bidirectional control character U+202E "
                                           "at position 7")


def test_a_collection_name_with_a_bidi_control_is_refused(engine, accounts):
    with session_scope(engine) as s, pytest.raises(ValueError, match="^collection name holds the bidirectional "
                                                                      "control character U\\+2066 at position 6$"):
        get_or_create_collection(s, s.merge(accounts["rita"]), "study\u2066 1\u2069")


def test_an_import_with_a_bidi_control_is_refused_with_its_line(engine, accounts, tmp_path, make_png):
    (tmp_path / "a.png").write_bytes(make_png())
    rows = [{"image": "a.png", "caption": "a red square"},
            {"image": "a.png", "caption": "a red \u202esquare"}]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    with session_scope(engine) as s, pytest.raises(ImportRejected) as rejected:
        import_file(s, s.merge(accounts["rita"]), path, collection="bidi")
    assert rejected.value.errors == ["line 2: caption text holds the bidirectional control character U+202E "
                                     "at position 7"]


def test_an_import_into_a_collection_named_with_a_bidi_control_is_refused(engine, accounts, tmp_path, make_png):
    (tmp_path / "a.png").write_bytes(make_png())
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"image": "a.png", "caption": "a red square"}))
    with session_scope(engine) as s, pytest.raises(ValueError, match="^collection name holds the bidirectional "
                                                                      "control character U\\+202B at position 1$"):
        import_file(s, s.merge(accounts["rita"]), path, collection="\u202bbidi")
