"""Seed the offline demo collection (`world-demo`) into the database on first run: the world's
importer rows (`scoring.world.demo.demo_rows`) through the normal all-or-nothing importer."""
from __future__ import annotations

import tempfile
from pathlib import Path

from sqlalchemy import func, select

from annotation.people.accounts import create_user
from annotation.database import database_session
from annotation.transfer.importers import import_rows
from db.models import Collection, User
from scoring.world.demo import DEMO_COLLECTION, demo_rows

SEED_USER = "world-seed"


def seed_demo(scenes: int = 12, force: bool = False) -> dict:
    """Import the demo collection into the configured database; skipped if it already exists."""
    if scenes < 1:
        raise ValueError("the demo needs at least one scene")
    if not force and _seeded():
        return {"collection": DEMO_COLLECTION, "skipped": "already seeded"}
    with tempfile.TemporaryDirectory(prefix="caplens-world-") as tmp:
        # built before the write transaction opens: rendering takes seconds to minutes on a busy
        # machine, and SQLite holds its one write lock from the first write to the commit, so a
        # login or rating meanwhile would wait and then fail as "database busy"
        rows = demo_rows(scenes, Path(tmp))
        with database_session() as session:
            if not force and session.scalar(select(Collection).where(Collection.name == DEMO_COLLECTION)) is not None:
                return {"collection": DEMO_COLLECTION, "skipped": "already seeded"}
            user = session.scalar(select(User).where(User.name == SEED_USER))
            if user is None:
                user = create_user(session, SEED_USER, "researcher")
            report = import_rows(session, user, rows, collection=DEMO_COLLECTION, base_dir=tmp,
                                 source_name=f"caplens world seed ({scenes} scenes)")
        return report.to_dict()


def _seeded() -> bool:
    with database_session(read_only=True) as session:
        return session.scalar(select(Collection).where(Collection.name == DEMO_COLLECTION)) is not None


def seed_demo_if_empty(scenes: int = 12) -> dict | None:
    """Seed on first run: only when the database has no collection at all."""
    with database_session(read_only=True) as session:
        if session.scalar(select(func.count()).select_from(Collection)):
            return None
    return seed_demo(scenes)
