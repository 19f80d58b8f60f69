"""Where CapLens keeps its data, and which database it talks to.

Resolution order for the data directory: `--data-dir` (the CLI copies it into
`CAPLENS_DATA_DIR`), then `CAPLENS_DATA_DIR`, then `~/.caplens`. The database URL comes
from `CAPLENS_DATABASE_URL`, else from `[database] url` in `<data dir>/config.toml`, else a
SQLite file inside the data directory.
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path

CONFIG_FILE_NAME = "config.toml"
SQLITE_FILE_NAME = "caplens.db"
IMAGE_STORE_DIR_NAME = "images"


def data_dir(create: bool = True) -> Path:
    """The data directory (created on first use so every command can rely on it)."""
    configured = os.environ.get("CAPLENS_DATA_DIR")
    path = Path(configured).expanduser() if configured else Path.home() / ".caplens"
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def config_file() -> Path:
    return data_dir(create=False) / CONFIG_FILE_NAME


def read_config() -> dict:
    """The parsed `config.toml` of the data directory ({} when there is none)."""
    path = config_file()
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from exc


def database_url() -> str:
    """The SQLAlchemy URL of the CapLens database."""
    url = os.environ.get("CAPLENS_DATABASE_URL")
    if url:
        return url
    section = read_config().get("database", {})
    if not isinstance(section, dict):
        raise ValueError(f"{config_file()}: [database] must be a table")
    url = section.get("url")
    if url:
        return str(url)
    return f"sqlite:///{data_dir() / SQLITE_FILE_NAME}"


def image_store_dir() -> Path:
    """Root of the content-addressed image store."""
    path = data_dir() / IMAGE_STORE_DIR_NAME
    path.mkdir(parents=True, exist_ok=True)
    return path
