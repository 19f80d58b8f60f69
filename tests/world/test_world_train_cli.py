"""`caplens world train`: a new folder in the data directory by default, never the shipped
checkpoints without --force."""
from __future__ import annotations

import hashlib

import pytest

from app.cli import main
from scoring.world.cli import CHECKPOINTS, training_folder


def _digest(folder) -> str:
    digest = hashlib.sha1()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def test_refuses_to_overwrite_the_shipped_checkpoints(capsys):
    before = _digest(CHECKPOINTS / "world-clip")
    code = main(["world", "train", "clip", "--out", str(CHECKPOINTS), "--clip-steps", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert "already holds world-clip (the shipped checkpoints): pass --force" in err
    assert _digest(CHECKPOINTS / "world-clip") == before


def test_default_is_a_new_folder_in_the_data_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    first = training_folder(None, ("world-clip",), force=False)
    assert first.parent == tmp_path / "data" / "world-models" and not first.exists()
    first.mkdir(parents=True)
    second = training_folder(None, ("world-clip",), force=False)
    assert second != first and not second.exists()
    # An explicit folder with models in it needs --force; an empty one does not.
    (first / "world-clip").mkdir()
    (first / "world-clip" / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="already holds world-clip: pass --force"):
        training_folder(first, ("world-clip",), force=False)
    assert training_folder(first, ("world-clip",), force=True) == first
    assert training_folder(first, ("world-mcs",), force=False) == first
