"""Limits checked before any work: a caption's length (perturbing, scoring) and a zip's
unpacked size against its compressed size, each at the limit and one step past it."""
from __future__ import annotations

import zipfile

import pytest

from annotation.transfer.archives import ArchiveError, ZipLimits, check_archive, extract_zip
from app.perturb_lab import perturb_caption
from scoring.paths import DEFAULT_CAPTION_MAX_CHARS, TextTooLong, caption_max_chars, check_caption_length


def test_a_caption_at_the_limit_passes_and_one_character_more_is_refused_naming_field_and_limit(monkeypatch):
    assert caption_max_chars() == DEFAULT_CAPTION_MAX_CHARS
    text = "a" * DEFAULT_CAPTION_MAX_CHARS
    assert check_caption_length(text, "caption") is text
    with pytest.raises(TextTooLong, match=r"^references 2: 5,001 characters; the limit is 5,000 per caption "
                                          r"\(the server's caption_max_chars setting\)\.$"):
        check_caption_length(text + "a", "references 2")
    monkeypatch.setenv("CAPLENS_CAPTION_MAX_CHARS", "12")
    with pytest.raises(TextTooLong, match="^caption: 13 characters; the limit is 12"):
        perturb_caption("a red car yes", "masking", 0.4, 0, "en", None)
    assert perturb_caption("a red car ye", "masking", 0.4, 0, "en", None)[0].op == "masking"
    monkeypatch.setenv("CAPLENS_CAPTION_MAX_CHARS", "13")
    with pytest.raises(TextTooLong, match="^critical objects: 16 characters; the limit is 13"):
        perturb_caption("a red car yes", "substitution", None, 0, "en", ["red car", "car yes"])


def _zip(path, members: int, size: int, method=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", method) as archive:
        for n in range(members):
            archive.writestr(f"m{n}.bin", b"\0" * size)
    return path


def test_many_small_members_that_unpack_a_thousandfold_are_refused_before_anything_is_written(tmp_path):
    """The issue's bomb in small: members of exactly 1 MiB each (no single one is checked for
    its ratio), all zeros; the archive as a whole unpacks about a thousand times its size."""
    path = _zip(tmp_path / "bomb.zip", 40, 1 << 20)
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        ratio = sum(i.file_size for i in infos) / sum(i.compress_size for i in infos)
        assert ratio > 500
        at_limit = ZipLimits(max_members=100, max_bytes=1 << 30, max_ratio=ratio)
        assert len(check_archive(archive, "bomb.zip", at_limit)) == 40
        past = ZipLimits(max_members=100, max_bytes=1 << 30, max_ratio=ratio * 0.999)
        with pytest.raises(ArchiveError, match=r"bomb.zip: its 40 members unpack [\d,]+ times their compressed size; "
                                               r"the limit is"):
            check_archive(archive, "bomb.zip", past)
    out = tmp_path / "out"
    with pytest.raises(ArchiveError, match="zip bomb"):
        extract_zip(path, out)  # the default limits
    assert not out.exists() or not any(out.iterdir())


def test_unpacked_bytes_at_the_limit_pass_and_one_byte_more_is_refused(tmp_path):
    path = _zip(tmp_path / "stored.zip", 3, 1000, zipfile.ZIP_STORED)
    with zipfile.ZipFile(path) as archive:
        assert len(check_archive(archive, "stored.zip", ZipLimits(10, 3000, 100.0))) == 3
        with pytest.raises(ArchiveError, match="unpacks to"):
            check_archive(archive, "stored.zip", ZipLimits(10, 2999, 100.0))
