"""What a server needs from the database before it serves: the schema, on a first run one
account to log in with (and the demo collection, filled in beside the running server), and
the folders it must never hand to browsers."""
from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass
from typing import Callable

from sqlalchemy import func, select

from annotation.people.accounts import create_user
from annotation.database import database_session, open_database
from annotation.demo_seed import seed_demo_if_empty
from annotation.errors import user_message
from annotation.transfer.importers import gc_stagings
from db.models import Collection, User
from scoring.paths import data_dir



@dataclass(frozen=True)
class FirstRun:
    """What a first run needs: `seed_demo` (fill the demo collection, see
    `seed_demo_in_background`) and the password of the login it created (None: none made)."""

    seed_demo: bool = False
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
    """Create or migrate the schema. With `seed_demo` and a database without any collection (a
    first run), make researcher `login_name` so the demo's tabs can be used, and say that the
    demo collection is to be filled; filling it takes a while and is left to
    `seed_demo_in_background`, so the server need not wait for it. The staging rows of imports
    that a kill or crash left behind (idle for `STAGING_IDLE`) are deleted first."""
    open_database()
    with database_session() as session:
        gc_stagings(session)
    if not seed_demo:
        return FirstRun()
    with database_session(read_only=True) as session:
        if session.scalar(select(func.count()).select_from(Collection)):
            return FirstRun()
    return FirstRun(True, create_first_login(login_name, "researcher"))


def seed_demo_in_background(report: Callable[[str], None]) -> threading.Thread:
    """Fill the demo collection into an empty database on a daemon thread while the server
    starts and serves; `report` gets one line when it is done (or why it failed: the server
    stays up, and the details are in the log). The import is one transaction, so a server
    stopped halfway leaves no half-filled collection."""
    def work() -> None:
        try:
            created = seed_demo_if_empty()
        except Exception as exc:  # the demo is a convenience: the server goes on without it
            report(f"the demo collection could not be created: {user_message(exc)}")
            return
        if created:
            report(f"demo collection {created.get('collection')!r} created.")

    thread = threading.Thread(target=work, name="caplens-demo-seed", daemon=True)
    thread.start()
    return thread


def unserved_folders() -> list[str]:
    """Folders a server must never serve or copy a file out of: the data directory (database,
    image store, configuration). A stored file reaches a browser only as a copy handed to one
    session (`annotation.people.auth_sessions.hand_out`)."""
    return [str(data_dir(create=True))]
