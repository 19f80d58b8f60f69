"""The account behind an interactive session (the web app, its API): logging in, and running
one action as that account in one transaction.

A front end keeps only the account's id between requests; every action re-reads the account
from the database (`acting`), so a deleted account or a changed role takes effect at once.
Role checks stay in the library functions each action calls.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from annotation.accounts import authenticate
from annotation.captions import list_collections
from annotation.database import database_session
from db.models import User


class NotLoggedIn(PermissionError):
    """The action needs a logged-in account and there is none (or it no longer exists)."""


@dataclass(frozen=True)
class Account:
    """What a front end may keep about the logged-in account between requests."""

    id: int
    name: str
    role: str


def log_in(name: str, password: str) -> Account:
    """The account for this name and password; PermissionError (one message for a wrong name
    or a wrong password) otherwise."""
    if not name or not password:
        raise PermissionError("Enter your user name and password.")
    with database_session() as session:
        user = authenticate(session, name.strip(), password)
        if user is None:
            raise PermissionError("Wrong user name or password.")
        return Account(user.id, user.name, user.role)


@contextmanager
def acting(account_id: int | None) -> Iterator[tuple]:
    """(session, user) of one transaction acting as the account `account_id`; NotLoggedIn when
    there is no such account."""
    if account_id is None:
        raise NotLoggedIn("Log in first (Annotate tab).")
    with database_session() as session:
        user = session.get(User, account_id)
        if user is None:
            raise NotLoggedIn("This account no longer exists; log in again.")
        yield session, user


def collection_names(account_id: int | None) -> list[str]:
    """Names of the collections this account may see, sorted."""

    with acting(account_id) as (session, user):
        return [c.name for c in list_collections(session, user)]
