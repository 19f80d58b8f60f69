"""Schema comes only from migrations: fresh upgrade == models, downgrade empties, SQLite settings."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from annotation import database
from db.models import Base
from db.session import current_revision, downgrade, get_engine, head_revision, session_scope, upgrade
from scoring.paths import data_dir

REPO = Path(__file__).resolve().parents[2]


def _schema_diff(url: str) -> list:
    with get_engine(url).connect() as connection:
        return compare_metadata(MigrationContext.configure(connection), Base.metadata)


def test_upgrade_from_empty_matches_models_and_downgrade_empties(empty_db_url):
    engine = get_engine(empty_db_url)
    assert inspect(engine).get_table_names() == []
    upgrade(empty_db_url)
    assert current_revision(empty_db_url) == head_revision()
    assert set(inspect(engine).get_table_names()) == set(Base.metadata.tables) | {"alembic_version"}
    assert _schema_diff(empty_db_url) == []
    downgrade(empty_db_url, "base")
    assert inspect(engine).get_table_names() == ["alembic_version"]
    assert current_revision(empty_db_url) is None
    upgrade(empty_db_url)  # and up again: the round trip is repeatable
    assert _schema_diff(empty_db_url) == []


def test_downgrade_step_by_step_keeps_every_row_it_can(empty_db_url):
    """SQLite alters a table by copying it and dropping the old one; with foreign keys on, the
    drop cascaded: 0008 -> 0007 emptied collection_captions, 0007 -> 0006 ratings and revisions."""
    upgrade(empty_db_url)
    engine = get_engine(empty_db_url)
    with engine.begin() as connection:
        for statement in (
                "INSERT INTO users(id,name,role,created_at) VALUES (1,'ann','annotator','2025-01-01')",
                "INSERT INTO images(id,sha256,format,width,height,size_bytes,created_at) "
                "VALUES (1,'aa','png',1,1,1,'2025-01-01')",
                "INSERT INTO collections(id,name,created_at,queue_order) VALUES (1,'A','2025-01-01','least-rated')",
                "INSERT INTO captions(id,image_id,text,language,kind,created_at) "
                "VALUES (1,1,'a red dog','en','candidate','2025-01-01')",
                "INSERT INTO collection_captions VALUES (1,1)",
                "INSERT INTO ratings(id,caption_id,annotator_id,overall,version,created_at,updated_at) "
                "VALUES (1,1,1,0.7,2,'2025-01-01','2025-01-02')",
                "INSERT INTO rating_revisions(id,rating_id,version,overall,valid_from,replaced_at) "
                "VALUES (1,1,1,0.6,'2025-01-01','2025-01-02')"):
            connection.exec_driver_sql(statement)
    tables = ("users", "captions", "collection_captions", "ratings", "rating_revisions")

    def counts():
        with engine.connect() as connection:
            return {t: connection.exec_driver_sql(f"SELECT count(*) FROM {t}").scalar() for t in tables}

    assert counts() == dict.fromkeys(tables, 1)
    for revision in ("0010", "0009", "0008", "0007", "0006", "0005", "0004"):
        downgrade(empty_db_url, revision)
        assert counts() == dict.fromkeys(tables, 1), revision
    upgrade(empty_db_url)
    assert counts() == dict.fromkeys(tables, 1)
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:  # the app's connections still enforce foreign keys
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_models_drift_is_detected(db_url):
    """The comparison above can fail: a column the migrations lack shows up as a difference."""
    from sqlalchemy import Column, Integer, MetaData, Table

    drifted = MetaData()
    for table in Base.metadata.tables.values():
        table.to_metadata(drifted)
    Table("images", drifted, Column("extra", Integer), extend_existing=True)
    with get_engine(db_url).connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), drifted)
    assert any(entry[0] == "add_column" and entry[3].name == "extra" for entry in diff)


def test_sqlite_connections_use_wal_foreign_keys_and_busy_timeout(data_dir, monkeypatch):
    url = f"sqlite:///{data_dir / 'caplens.db'}"
    upgrade(url)
    with get_engine(url).connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000
    with pytest.raises(IntegrityError, match="FOREIGN KEY constraint failed"):
        with session_scope(get_engine(url)) as session:
            session.execute(text("INSERT INTO captions (image_id, text, language, kind, created_at) "
                                 "VALUES (999, 'x', 'en', 'candidate', '2024-01-01')"))


def test_data_dir_and_url_resolution(tmp_path, monkeypatch):
    monkeypatch.delenv("CAPLENS_DATABASE_URL", raising=False)
    monkeypatch.delenv("CAPLENS_DATA_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_dir() == tmp_path / "home" / ".caplens"
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "d"))
    assert database.database_url() == f"sqlite:///{tmp_path / 'd' / 'caplens.db'}"
    (tmp_path / "d" / "config.toml").write_text('[database]\nurl = "sqlite:////tmp/from-config.db"\n')
    assert database.database_url() == "sqlite:////tmp/from-config.db"
    monkeypatch.setenv("CAPLENS_DATABASE_URL", "postgresql+psycopg://u@h/db")
    assert database.database_url() == "postgresql+psycopg://u@h/db"
    (tmp_path / "d" / "config.toml").write_text("[database\n")
    monkeypatch.delenv("CAPLENS_DATABASE_URL")
    with pytest.raises(ValueError, match="not valid TOML"):
        database.database_url()


def test_cli_upgrade_honours_data_dir_from_any_cwd(tmp_path, monkeypatch):
    monkeypatch.delenv("CAPLENS_DATABASE_URL", raising=False)
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "elsewhere"))
    target = tmp_path / "chosen"
    env = {**__import__("os").environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "app.cli", "db", "upgrade", "--data-dir", str(target)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (target / "caplens.db").is_file()
    assert not (tmp_path / "elsewhere" / "caplens.db").exists()
    assert current_revision(f"sqlite:///{target / 'caplens.db'}") == head_revision()
