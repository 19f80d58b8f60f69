"""Which database and image folder CapLens uses, and sessions on that database.

The data directory comes from `scoring.paths.data_dir`. The database URL comes from
`CAPLENS_DATABASE_URL`, else from `[database] url` in `<data dir>/config.toml`, else a SQLite
file inside the data directory. `db` itself only takes URLs and engines from here.
"""
from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from db.session import ensure_schema, get_engine, session_scope
from scoring.paths import config_file, data_dir, read_config

SQLITE_FILE_NAME = "caplens.db"
IMAGE_STORE_DIR_NAME = "images"


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
    return f"sqlite:///{data_dir(create=True) / SQLITE_FILE_NAME}"


def image_store_dir() -> Path:
    """Root of the content-addressed image store."""
    path = data_dir(create=True) / IMAGE_STORE_DIR_NAME
    path.mkdir(parents=True, exist_ok=True)
    return path


SCHEMA_RECHECK_S = 30.0  # a database found current is not asked again for this long
_schema_current: dict[str, float] = {}


def open_database() -> Engine:
    """The configured database's engine, its schema created on first use (see
    db.session.ensure_schema). The schema check reads Alembic's version table on its own
    connection: done on every transaction it was a fifth of a rating's server time, so a
    database found current is checked again only after SCHEMA_RECHECK_S."""
    url = database_url()
    now = time.monotonic()
    if now - _schema_current.get(url, -SCHEMA_RECHECK_S) < SCHEMA_RECHECK_S:
        return get_engine(url)
    engine = ensure_schema(url)
    _schema_current[url] = now
    return engine


@contextmanager
def database_session(read_only: bool = False) -> Iterator[Session]:
    """One transaction on the configured database, its schema made current first."""
    with session_scope(open_database(), read_only=read_only) as session:
        yield session
