"""What a server needs from the database before it serves: the schema, on a first run the
demo collection and one account to log in with, and the folders it must never hand to
browsers."""
from __future__ import annotations

import secrets
from dataclasses import dataclass

from sqlalchemy import select

from annotation.demo_seed import seed_demo_if_empty
from annotation.accounts import create_user
from annotation.database import database_session, open_database
from db.models import User
from scoring.paths import data_dir


@dataclass(frozen=True)
class FirstRun:
    """What a first run created (None: nothing, it was not a first run)."""

    demo_collection: str | None = None
    login_password: str | None = None


def create_first_login(name: str, role: str = "researcher") -> str | None:
    """On a database where nobody can log in yet, create account `name` with a random password
    and return the password (for the operator's console only); None when someone can log in."""
    with database_session() as session:
        if session.scalar(select(User).where(User.password_hash.is_not(None))) is not None:
            return None
        password = secrets.token_urlsafe(9)
        create_user(session, name, role, password)
        return password


def ensure_account(name: str, role: str, password: str) -> bool:
    """Create account `name` with `role` and `password` unless it exists (a Space's owner
    account from its secrets); True when it was created."""
    with database_session() as session:
        if session.scalar(select(User).where(User.name == name)) is not None:
            return False
        create_user(session, name, role, password)
        return True


def prepare_database(seed_demo: bool, login_name: str) -> FirstRun:
    """Create or migrate the schema; with `seed_demo`, fill the synthetic-world demo collection
    into an empty database and make researcher `login_name` so its tabs can be used."""
    open_database()
    if not seed_demo:
        return FirstRun()
    report = seed_demo_if_empty()
    if not report:
        return FirstRun()
    return FirstRun(report.get("collection", "world-demo"), create_first_login(login_name, "researcher"))


def unserved_folders() -> list[str]:
    """Folders a server must never serve or copy a file out of: the data directory (database,
    image store, configuration). A stored file reaches a browser only as a copy handed to one
    session (`annotation.auth_sessions.hand_out`)."""
    return [str(data_dir(create=True))]
