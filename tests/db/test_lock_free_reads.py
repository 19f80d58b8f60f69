"""While an import holds SQLite's write lock (a staging batch, its publishing step), reads answer
at once, and a write that waits past the busy timeout tells the user to try again: it never
hangs for a minute and never shows "database is locked"."""
from __future__ import annotations

import sqlite3
import time

import pytest
from sqlalchemy.exc import OperationalError

from annotation.people.accounts import create_user
from annotation.people.acting import collection_names
from annotation.people.auth_sessions import log_in, session_account
from annotation.captions import add_caption, get_or_create_collection
from annotation.errors import BUSY_MESSAGE, user_message
from annotation.image_store import add_image
from annotation.studies.queue_screens import critical_screen, rate, rating_screen
from db.session import dispose_engines, get_engine, session_scope

BUSY_MS = 400


@pytest.fixture
def sqlite_busy_db(data_dir, monkeypatch, make_png):
    """A migrated SQLite database with a short busy timeout, an annotator who has logged in,
    and a collection of two captions."""
    from db.session import upgrade

    monkeypatch.setenv("CAPLENS_DB_BUSY_TIMEOUT_MS", str(BUSY_MS))
    dispose_engines()
    url = f"sqlite:///{data_dir / 'caplens.db'}"
    monkeypatch.setenv("CAPLENS_DATABASE_URL", url)
    upgrade(url)
    engine = get_engine(url)
    with session_scope(engine) as s:
        rita = create_user(s, "rita", "researcher")
        ann = create_user(s, "ann", "annotator", "correct horse battery")
        col = get_or_create_collection(s, rita, "queue")
        image = add_image(s, make_png(), "a.png")
        captions = [add_caption(s, rita, image, f"a red square {i}", collection=col).id for i in range(2)]
    token = log_in("ann", "correct horse battery", "127.0.0.1").token
    yield url, data_dir / "caplens.db", ann.id, captions, token
    dispose_engines()


def _hold_write_lock(path) -> sqlite3.Connection:
    """Another process's open write transaction (an import batch that has not committed)."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO import_stagings (source_name, created_at, updated_at) "
                   "VALUES ('big.jsonl', '2026-01-01', '2026-01-01')")
    return holder


def test_reads_answer_while_an_import_holds_the_write_lock(sqlite_busy_db):
    _url, path, ann_id, captions, token = sqlite_busy_db
    holder = _hold_write_lock(path)
    try:
        # The lock is held throughout: a read that needed it would wait BUSY_MS and raise, so each
        # answer proves that read took no lock (a wall-time bound here failed once under load).
        assert session_account(token).name == "ann"  # every request resolves its session: a read
        assert collection_names(ann_id) == ["queue"]
        assert rating_screen(ann_id, "queue", caption_id=captions[0]).text == "a red square 0"
        assert critical_screen(ann_id, "queue").caption_id in captions
    finally:
        holder.rollback()
        holder.close()


def test_a_write_blocked_too_long_gives_a_short_retry_message(sqlite_busy_db):
    _url, path, ann_id, captions, _token = sqlite_busy_db
    holder = _hold_write_lock(path)
    try:
        started = time.perf_counter()
        with pytest.raises(OperationalError) as caught:
            rate(ann_id, captions[0], 0.5)
        waited = time.perf_counter() - started
        message = user_message(caught.value)
        assert message == BUSY_MESSAGE and "locked" not in message and "SQL" not in message
        assert BUSY_MS / 1000 * 0.8 <= waited < 5  # it waited the busy timeout, not a minute
        with pytest.raises(OperationalError) as caught:
            log_in("ann", "correct horse battery", "127.0.0.1")
        assert user_message(caught.value) == BUSY_MESSAGE
    finally:
        holder.rollback()
        holder.close()
    # once the import's transaction ends, the same actions work
    assert rate(ann_id, captions[0], 0.5)["overall"] == 0.5
    assert log_in("ann", "correct horse battery", "127.0.0.1").account.name == "ann"


def test_other_database_errors_still_get_an_error_id():
    from sqlalchemy.exc import IntegrityError

    error = IntegrityError("INSERT INTO ratings ...", {}, Exception("UNIQUE constraint failed: ratings.id"))
    message = user_message(error)
    assert message != BUSY_MESSAGE and "error id" in message and "INSERT" not in message
