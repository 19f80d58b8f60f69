"""Image files are read whole, in one read where the size is known, and a path that is no
file says "image not found" (the message the app and the CLI show)."""
from __future__ import annotations

import os
import threading

import pytest

from scoring.images import read_image_bytes


def test_a_file_is_read_whole_from_a_path_or_a_string(tmp_path):
    small, large, empty = tmp_path / "small.jpg", tmp_path / "large.bin", tmp_path / "empty.jpg"
    small.write_bytes(b"\xff\xd8jpeg bytes\xff\xd9")
    payload = os.urandom(3 * (1 << 20) + 17)  # more than one read's worth after the first
    large.write_bytes(payload)
    empty.write_bytes(b"")
    assert read_image_bytes(small) == b"\xff\xd8jpeg bytes\xff\xd9"
    assert read_image_bytes(str(large)) == payload
    assert read_image_bytes(empty) == b""
    assert read_image_bytes(b"raw") == b"raw" and read_image_bytes(memoryview(b"mv")) == b"mv"


@pytest.mark.parametrize("name", ["missing.jpg", "folder", "small.jpg/inside.jpg"])
def test_what_is_no_file_is_not_found(tmp_path, name):
    (tmp_path / "folder").mkdir()
    (tmp_path / "small.jpg").write_bytes(b"x")
    with pytest.raises(FileNotFoundError, match="image not found: .*" + name.split("/")[-1]):
        read_image_bytes(tmp_path / name)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_pipe_is_read_to_its_end_not_to_its_first_short_read(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    parts = [b"first part;", b"second part after a pause"]
    pause = threading.Event()

    def write():
        with open(fifo, "wb", buffering=0) as out:
            out.write(parts[0])
            pause.wait(0.2)
            out.write(parts[1])

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert read_image_bytes(fifo) == b"".join(parts)
    finally:
        writer.join()


def test_short_reads_lose_nothing(tmp_path, monkeypatch):
    """A network or FUSE file system may answer a read with fewer bytes than asked for."""
    import scoring.images

    payload = os.urandom(50_000)
    (tmp_path / "photo.jpg").write_bytes(payload)
    real_read = os.read
    monkeypatch.setattr(scoring.images.os, "read", lambda fd, n: real_read(fd, min(n, 1000)))
    assert read_image_bytes(tmp_path / "photo.jpg") == payload
