"""Database fixtures: every database test gets a fresh, migrated database on SQLite and, when
CAPLENS_TEST_PG_URL is set, on its own throwaway PostgreSQL database as well."""
from __future__ import annotations

import os
import io
import uuid

import pytest
from PIL import Image as PILImage
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from annotation.people.accounts import create_user
from db.session import dispose_engines, get_engine, session_scope, upgrade

PG_URL = os.environ.get("CAPLENS_TEST_PG_URL")
BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=[
        pytest.mark.postgres,
        pytest.mark.skipif(not PG_URL, reason="CAPLENS_TEST_PG_URL is not set"),
    ]),
]


def _pg_admin_engine():
    return create_engine(PG_URL, isolation_level="AUTOCOMMIT")


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """A private data directory (images, SQLite file) for one test."""
    path = tmp_path / "data"
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(path))
    monkeypatch.delenv("CAPLENS_DATABASE_URL", raising=False)
    return path


@pytest.fixture(params=BACKENDS)
def empty_db_url(request, data_dir, monkeypatch):
    """URL of an empty database (not migrated), also exported as CAPLENS_DATABASE_URL."""
    if request.param == "sqlite":
        url = f"sqlite:///{data_dir / 'caplens.db'}"
        monkeypatch.setenv("CAPLENS_DATABASE_URL", url)
        yield url
        dispose_engines()
        return
    name = f"caplens_t_{uuid.uuid4().hex[:12]}"
    admin = _pg_admin_engine()
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    monkeypatch.setenv("CAPLENS_DATABASE_URL", url)
    try:
        yield url
    finally:
        dispose_engines()
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def db_url(empty_db_url):
    upgrade(empty_db_url)
    return empty_db_url


@pytest.fixture
def engine(db_url):
    return get_engine(db_url)


@pytest.fixture
def accounts(engine):
    """admin, researcher and three annotators (name -> User, detached but usable)."""
    with session_scope(engine) as session:
        users = {name: create_user(session, name, role, None) for name, role in [
            ("root", "admin"), ("rita", "researcher"), ("ann", "annotator"), ("bea", "annotator"),
            ("cal", "annotator")]}
    return users


def png_bytes(color=(200, 10, 10), size=(12, 9), fmt="PNG") -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", size, color).save(buffer, fmt)
    return buffer.getvalue()


@pytest.fixture
def make_png():
    return png_bytes
