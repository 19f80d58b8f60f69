"""Engines, transactions and schema migrations.

SQLite connections run in WAL mode with foreign keys on and a busy timeout, and a writing
transaction starts with `BEGIN IMMEDIATE` so concurrent writers queue on the lock instead
of failing when a read lock cannot be upgraded. Reads use `session_scope(engine, read_only=True)`,
a deferred transaction that never takes the write lock: in WAL mode it reads its snapshot while
a writer (an import's batch, its publishing step) holds the lock. A writer that waits longer
than the busy timeout (`$CAPLENS_DB_BUSY_TIMEOUT_MS`, default 15 s) fails, and `is_busy` tells
that failure apart from others so that a user gets a short "try again" message.

Every function takes the database URL (or engine) from its caller: which database CapLens
uses is decided in `annotation.database`, so this package imports nothing of the others.
"""
from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

SQLITE_BUSY_TIMEOUT_MS = 15_000
# PostgreSQL: lock not available, serialization failure, deadlock detected.
_PG_BUSY_CODES = {"55P03", "40001", "40P01"}
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def busy_timeout_ms() -> int:
    """How long a SQLite writer waits for the write lock before failing as busy."""
    value = os.environ.get("CAPLENS_DB_BUSY_TIMEOUT_MS", "")
    return int(value) if value.strip().isdigit() else SQLITE_BUSY_TIMEOUT_MS


def is_busy(exc: BaseException) -> bool:
    """Whether `exc` (a database error) means only that the database was busy: another
    transaction held the lock too long. Trying again later succeeds."""
    if isinstance(exc, DatabaseBusy):
        return True
    original = getattr(exc, "orig", exc)
    if getattr(original, "sqlite_errorname", "") in ("SQLITE_BUSY", "SQLITE_LOCKED") or \
            "database is locked" in str(original) or "database table is locked" in str(original):
        return True
    code = getattr(original, "sqlstate", None) or getattr(original, "pgcode", None)
    return code in _PG_BUSY_CODES


def _configure_sqlite(engine: Engine, timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):
        # Let SQLAlchemy, not the driver, decide when transactions begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {timeout_ms}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection):
        mode = connection.get_execution_options().get("sqlite_begin", "IMMEDIATE")
        connection.exec_driver_sql(f"BEGIN {mode}")


def create_database_engine(url: str) -> Engine:
    """A new engine for `url`, with CapLens' SQLite settings where it is SQLite."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        timeout_ms = busy_timeout_ms()
        engine = create_engine(url, connect_args={"timeout": timeout_ms / 1000, "check_same_thread": False})
        _configure_sqlite(engine, timeout_ms)
        return engine
    return create_engine(url, pool_pre_ping=True)


def get_engine(url: str) -> Engine:
    """The process-wide engine for `url`."""
    with _engines_lock:
        engine = _engines.get(url)
        if engine is None:
            engine = _engines[url] = create_database_engine(url)
        return engine


def dispose_engines(close: bool = True) -> None:
    """Forget every cached engine. A forked child passes close=False: the parent's
    connections are the parent's to close, the child opens its own."""
    with _engines_lock:
        for engine in _engines.values():
            engine.dispose(close=close)
        _engines.clear()


class DatabaseBusy(Exception):
    """A writing transaction waited longer than the busy timeout for its turn."""


_writer_locks: dict[str, threading.RLock] = {}


@contextmanager
def _writer_turn(engine: Engine) -> Iterator[None]:
    """SQLite: the writing transactions of this process take turns on a lock of their own
    before asking SQLite for its write lock. SQLite's busy handler polls with growing sleeps, so
    many threads of one server contending for it can starve one of them past the busy timeout;
    waiting on a lock instead, each is woken when the previous one ends. (Another process, such
    as a CLI import, still meets them at SQLite's lock, where its short batches wait little.)"""
    if engine.dialect.name != "sqlite":
        yield
        return
    key = engine.url.render_as_string(hide_password=False)
    with _engines_lock:
        lock = _writer_locks.setdefault(key, threading.RLock())
    if not lock.acquire(timeout=busy_timeout_ms() / 1000):
        raise DatabaseBusy("the database stayed busy past the busy timeout")
    try:
        yield
    finally:
        lock.release()


@contextmanager
def session_scope(engine: Engine, *, read_only: bool = False) -> Iterator[Session]:
    """One transaction: committed when the block ends, rolled back if it raises. A
    `read_only` one never takes SQLite's write lock (and must not write)."""
    if read_only and engine.dialect.name == "sqlite":
        engine = engine.execution_options(sqlite_begin="DEFERRED")
    turn = nullcontext() if read_only else _writer_turn(engine)
    with turn:
        session = sessionmaker(bind=engine, expire_on_commit=False)()
        try:
            with session.begin():
                yield session
        finally:
            session.close()


def alembic_config(url: str):
    """An Alembic configuration that works from any working directory or installed package."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation: a literal % in a password must be doubled.
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Create or upgrade the schema (the only way CapLens creates tables)."""
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    from alembic import command

    command.downgrade(alembic_config(url), revision)


def current_revision(url: str) -> str | None:
    """The revision the database is at (None for an empty database)."""
    from alembic.runtime.migration import MigrationContext

    reading = get_engine(url).execution_options(sqlite_begin="DEFERRED")  # never waits for a writer
    with reading.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


@functools.cache
def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def ensure_schema(url: str) -> Engine:
    """The engine, after making sure the schema is current.

    An empty database is created through the migrations; a database at an older revision
    is left alone with a clear error, because upgrading user data should be deliberate.
    """
    engine = get_engine(url)
    current, head = current_revision(url), head_revision()
    if current is None:
        upgrade(url)
    elif current != head:
        raise ValueError(f"the database is at schema revision {current}, this CapLens needs {head}: "
                         "run `caplens db upgrade`")
    return engine
