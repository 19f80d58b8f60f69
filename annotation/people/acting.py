"""The account behind an interactive session (the web app, its API): running one action as
that account in one transaction.

A front end resolves its session token to the account on every request
(`annotation.people.auth_sessions`, which also logs in and out) and passes the account's id here;
every action re-reads the account from the database (`acting`), so a deleted or disabled
account or a changed role takes effect at once. Role checks stay in the library functions each action calls.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from annotation.captions import list_collections
from annotation.database import database_session
from db.models import User


LOG_IN_FIRST = "Log in first (Annotate tab)."


class NotLoggedIn(PermissionError):
    """The action needs a logged-in account and there is none (or it no longer exists)."""


@dataclass(frozen=True)
class Account:
    """The logged-in account of a session, as a front end shows it."""

    id: int
    name: str
    role: str


@contextmanager
def acting(account_id: int | None, read_only: bool = False) -> Iterator[tuple]:
    """(session, user) of one transaction acting as the account `account_id`; NotLoggedIn when
    there is no such account. An action that only reads passes `read_only`: it then never waits
    for (or holds) the database's write lock."""
    if account_id is None:
        raise NotLoggedIn(LOG_IN_FIRST)
    with database_session(read_only=read_only) as session:
        user = session.get(User, account_id)
        if user is None:
            raise NotLoggedIn("This account no longer exists; log in again.")
        if user.disabled_at is not None:
            raise NotLoggedIn("This account is disabled; ask your admin.")
        yield session, user


def chosen_collection(account_id: int | None, name: str) -> str:
    """`name`, the collection an action of `account_id` works on: logged out, NotLoggedIn first
    (there is nothing to choose from before a login), else ValueError when none is chosen."""
    if account_id is None:
        raise NotLoggedIn(LOG_IN_FIRST)
    if not name:
        raise ValueError("Choose a collection.")
    return name


def collection_names(account_id: int | None) -> list[str]:
    """Names of the collections this account may see, sorted."""

    with acting(account_id, read_only=True) as (session, user):
        return [c.name for c in list_collections(session, user)]
