"""Zip uploads under limits: bombs, path traversal and member floods are refused before
anything is unpacked, and a request's upload folder is removed however the request ends."""
from __future__ import annotations

import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from annotation.transfer.archives import (ArchiveError, ZipLimits, check_archive, extract_zip, gathered_uploads, upload_folder,
                                 zip_limits)


def _zip(path: Path, members: dict[str, bytes], method=zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression=method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


@pytest.fixture
def temp_root(tmp_path, monkeypatch):
    """The system temporary folder of these tests, to see what requests leave in it."""
    root = tmp_path / "system-tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def test_a_zip_bomb_is_refused_from_its_directory_before_anything_is_unpacked(tmp_path):
    bomb = _zip(tmp_path / "bomb.zip", {"data.csv": b"0" * (64 << 20), "readme.txt": b"hello"})
    assert bomb.stat().st_size < 1 << 20  # 64 MB packed into well under 1 MB
    out = tmp_path / "out"
    start = time.perf_counter()
    with pytest.raises(ArchiveError, match=r"bomb.zip: member 'data.csv' unpacks [\d,]+ times .* limit is 100"):
        extract_zip(bomb, out)
    assert time.perf_counter() - start < 2  # nothing was decompressed
    assert not out.exists() or not any(out.rglob("*"))


def test_small_members_may_compress_well(tmp_path):
    text = _zip(tmp_path / "text.zip", {"ratings.csv": b"a,b\n" * 100_000})  # 400 KB of text, ratio ~1000
    assert [p.name for p in extract_zip(text, tmp_path / "out")] == ["ratings.csv"]
    assert (tmp_path / "out" / "ratings.csv").read_bytes() == b"a,b\n" * 100_000


@pytest.mark.parametrize("name", ["../escape.txt", "a/../../escape.txt", "/etc/escape.txt", "..\\escape.txt",
                                  "C:/escape.txt", "ok/..\\..\\escape.txt"])
def test_members_leaving_the_folder_are_refused_not_remapped(tmp_path, name):
    evil = _zip(tmp_path / "evil.zip", {"fine.txt": b"fine", name: b"x"})
    out = tmp_path / "deep" / "out"
    with pytest.raises(ArchiveError, match="leaves the archive's folder"):
        extract_zip(evil, out)
    assert not (out / "fine.txt").exists()  # refused whole, before the first member
    assert not any(p.name.endswith("escape.txt") for p in tmp_path.rglob("*"))


def test_ordinary_member_names_are_kept(tmp_path):
    archive = _zip(tmp_path / "ok.zip", {"./a.txt": b"a", "sub/dir/b.txt": b"b", "sub/.hidden": b"h",
                                         "dots..in..name.txt": b"d"})
    extract_zip(archive, tmp_path / "out")
    assert sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file()) == [
        "a.txt", "dots..in..name.txt", "sub/.hidden", "sub/dir/b.txt"]


def test_member_count_and_total_size_limits(tmp_path):
    many = _zip(tmp_path / "many.zip", {f"f{i}.txt": b"x" for i in range(6)})
    with pytest.raises(ArchiveError, match="6 members; the limit is 5"):
        extract_zip(many, tmp_path / "a", ZipLimits(max_members=5, max_bytes=1 << 20, max_ratio=100))
    stored = _zip(tmp_path / "big.zip", {"a.bin": b"1" * 3000, "b.bin": b"2" * 3000}, zipfile.ZIP_STORED)
    with pytest.raises(ArchiveError, match="unpacks to"):
        extract_zip(stored, tmp_path / "b", ZipLimits(max_members=10, max_bytes=5000, max_ratio=100))
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())


def test_limits_come_from_the_environment_or_config_toml(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "data").mkdir()
    assert zip_limits().max_members == 20_000
    (tmp_path / "data" / "config.toml").write_text("[limits]\nzip_max_members = 3\nzip_max_ratio = 12.5\n")
    assert (zip_limits().max_members, zip_limits().max_ratio) == (3, 12.5)
    monkeypatch.setenv("CAPLENS_ZIP_MAX_MEMBERS", "2")
    assert zip_limits().max_members == 2
    with zipfile.ZipFile(_zip(tmp_path / "three.zip", {"a": b"", "b": b"", "c": b""})) as archive:
        with pytest.raises(ArchiveError, match="3 members; the limit is 2"):
            check_archive(archive, "three.zip")
    monkeypatch.setenv("CAPLENS_ZIP_MAX_MEMBERS", "many")
    with pytest.raises(ValueError, match=r"\$CAPLENS_ZIP_MAX_MEMBERS: 'many' is not a whole number"):
        zip_limits()


def test_a_corrupt_member_is_a_clear_error(tmp_path):
    path = _zip(tmp_path / "c.zip", {"a.txt": b"hello world " * 100})
    data = bytearray(path.read_bytes())
    start = data.index(b"a.txt") + len(b"a.txt")  # the local header's name; the deflated data follows
    data[start + 5:start + 15] = b"\xff" * 10
    path.write_bytes(bytes(data))
    with pytest.raises(ArchiveError, match="cannot be read"):
        extract_zip(path, tmp_path / "out")
    not_zip = tmp_path / "n.zip"
    not_zip.write_text("plain text")
    with pytest.raises(ArchiveError, match="not a readable zip"):
        extract_zip(not_zip, tmp_path / "out2")


def test_upload_folders_are_removed_after_success_and_after_errors(tmp_path, temp_root):
    good = _zip(tmp_path / "good.zip", {"x/a.txt": b"a"})
    plain = tmp_path / "b.txt"
    plain.write_text("b")
    with gathered_uploads([good, plain]) as folder:
        assert sorted(p.name for p in folder.rglob("*") if p.is_file()) == ["a.txt", "b.txt"]
        assert folder.parent == temp_root
    assert list(temp_root.iterdir()) == []
    bomb = _zip(tmp_path / "bomb.zip", {"a.bin": b"\0" * (8 << 20)})
    with pytest.raises(ArchiveError):
        with gathered_uploads([good, bomb]):
            pass
    assert list(temp_root.iterdir()) == []
    with pytest.raises(RuntimeError):
        with gathered_uploads([good]) as folder:
            raise RuntimeError("the measure failed")
    assert list(temp_root.iterdir()) == []
    with upload_folder() as folder:
        (folder / "f").write_text("x")
    assert list(temp_root.iterdir()) == []


def test_a_single_file_is_used_where_it_is_and_none_is_none(tmp_path, temp_root):
    plain = tmp_path / "only.json"
    plain.write_text("{}")
    with gathered_uploads([plain]) as path:
        assert path == plain
    with gathered_uploads([plain], folder=True) as path:
        assert path.parent == temp_root and (path / "only.json").read_text() == "{}"
    with gathered_uploads([]) as nothing:
        assert nothing is None
    assert plain.exists() and list(temp_root.iterdir()) == []
