"""Logins as server-side sessions, login throttling, and files handed to one session.

A login creates a random token (`secrets.token_urlsafe`); the caller gets the token, the
database keeps only its SHA-256 with the account, the client's address, the expiry and, after a
logout, the revocation time. Every action of a front end resolves the token again
(`session_account`): an expired or revoked session, or a deleted account, must log in again.

Throttling hits whoever guesses, not a crowd behind one address. Failed logins are written
down per account name as typed and per client address. Past `FREE_FAILURES_PER_ACCOUNT`
failures of one name within `FAILURE_MEMORY`, the next attempt for that name must wait
`FIRST_WAIT_S`, doubling with each further failure up to `MAX_WAIT_S` after the latest one; the
same holds for one address past `FREE_FAILURES_PER_CLIENT` failures on names of real accounts
(far above what a lab behind one router mistypes in a day). Made-up names never lock real
accounts: past `FREE_UNKNOWN_PER_CLIENT` of them from one address, further ones are answered
without computing a password hash, in the same time and words as a wrong password. An attempt
inside a wait is refused before any password hash is computed, and is not counted. A
successful login deletes its name's failures. Attempts for one name are checked one at a
time in a server process, so parallel guesses cannot all slip in before the first failure
is written; attempts for different names (a class logging in at once) run side by side. The
log lives in the database, so it holds across sessions, restarts and server processes.

Files (stored images, exports) reach a browser as copies in a folder of this session under a
root the front end names (`hand_out`); the front end serves a file from there only to a request
whose token belongs to that session (`may_fetch`). Logging out deletes the folder.
"""
from __future__ import annotations

import hashlib
import logging
import math
import os
import secrets
import shutil
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Sequence

from sqlalchemy import delete, func, select, update

from annotation.people.accounts import authenticate, rehashed, revoke_sessions
from annotation.people.acting import Account, NotLoggedIn
from annotation.database import database_session
from db.models import AuthSession, LoginFailure, User, utcnow

LOG = logging.getLogger(__name__)

SESSION_LIFETIME = timedelta(hours=12)
FREE_FAILURES_PER_ACCOUNT = 5
FREE_FAILURES_PER_CLIENT = 200  # wrong passwords of real accounts: one address can be a whole lab
FREE_UNKNOWN_PER_CLIENT = 20  # made-up names from one address answered with a password hash
FIRST_WAIT_S = 1
MAX_WAIT_S = 15 * 60
FAILURE_MEMORY = timedelta(hours=24)
_NAME_LENGTH = 100  # the columns' length: account names and client addresses are cut to it
_NAME_LOCKS = tuple(threading.Lock() for _ in range(64))  # attempts for one name, one at a time

SESSION_ENDED = "Your login has expired or was ended: log in again (Annotate tab)."


class TooManyAttempts(PermissionError):
    """Login refused without checking the password: too many recent failures."""

    def __init__(self, retry_after: int):
        super().__init__(f"Too many failed logins for this account or from this address: "
                         f"try again in {retry_after} s.")
        self.retry_after = retry_after


@dataclass(frozen=True)
class Login:
    """A new session: the token goes to the client (and nowhere else), with its account."""

    token: str
    account: Account
    expires_at: datetime


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _aware(moment: datetime) -> datetime:
    """SQLite gives back naive datetimes; every stored one is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _wait_s(session, column, value: str | None, free: int, now: datetime, *where) -> int:
    """Seconds the next attempt for `column == value` (and `where`) must still wait (0: none)."""
    if not value:
        return 0
    count, latest = session.execute(
        select(func.count(), func.max(LoginFailure.failed_at))
        .where(column == value, LoginFailure.failed_at > now - FAILURE_MEMORY, *where)).one()
    if count < free:
        return 0
    wait = min(FIRST_WAIT_S * 2 ** (count - free), MAX_WAIT_S)
    remaining = (_aware(latest) + timedelta(seconds=wait) - now).total_seconds()
    return max(0, math.ceil(remaining))


def _unknown_names(session, client: str | None, now: datetime) -> int:
    """Failures of `client` within FAILURE_MEMORY on names that are no account."""
    if not client:
        return 0
    return session.scalar(select(func.count()).where(
        LoginFailure.client == client, LoginFailure.failed_at > now - FAILURE_MEMORY,
        LoginFailure.account_name.not_in(select(User.name))))


def log_in(name: str, password: str, client: str | None) -> Login:
    """A new session for this name and password, tried from `client` (an address; None when
    unknown). PermissionError with one message for a wrong name or a wrong password;
    TooManyAttempts (a PermissionError) while throttled."""
    name = (name or "").strip()
    if not name or not password:
        raise PermissionError("Enter your user name and password.")
    account_name, client = name[:_NAME_LENGTH], (client or None) and client[:_NAME_LENGTH]
    with _NAME_LOCKS[hash(account_name) % len(_NAME_LOCKS)]:
        return _log_in(name, account_name, password, client)


def _log_in(name: str, account_name: str, password: str, client: str | None) -> Login:
    now = utcnow()
    with database_session(read_only=True) as session:  # decide without the write lock
        real_account = LoginFailure.account_name.in_(select(User.name))
        wait = max(_wait_s(session, LoginFailure.account_name, account_name, FREE_FAILURES_PER_ACCOUNT, now),
                   _wait_s(session, LoginFailure.client, client, FREE_FAILURES_PER_CLIENT, now, real_account))
        spend_cpu = not wait and _unknown_names(session, client, now) < FREE_UNKNOWN_PER_CLIENT
    if wait:
        LOG.warning("login refused: %r from %s: too many failed attempts, next try in %d s", account_name,
                    client or "an unknown client", wait)
        raise TooManyAttempts(wait)
    with database_session(read_only=True) as session:  # the slow password hash holds no write lock
        user = authenticate(session, name, password, spend_cpu=spend_cpu)
        account = user and Account(user.id, user.name, user.role)
        new_hash = user and rehashed(user.password_hash, password)
    if account is None:  # the user's mistake: one line for the operator, no traceback
        with database_session() as session:
            session.execute(delete(LoginFailure).where(LoginFailure.failed_at <= now - FAILURE_MEMORY))
            session.add(LoginFailure(account_name=account_name, client=client, failed_at=now))
        LOG.warning("login refused: %r from %s: wrong user name or password", account_name,
                    client or "an unknown client")
        raise PermissionError("Wrong user name or password.")
    token = secrets.token_urlsafe(32)
    with database_session() as session:  # short: what a login must write
        session.execute(delete(LoginFailure).where(LoginFailure.account_name == account_name))
        session.execute(delete(AuthSession).where(AuthSession.expires_at <= now))
        started = utcnow()
        expires = started + SESSION_LIFETIME
        session.add(AuthSession(token_hash=token_hash(token), user_id=account.id, client=client, created_at=started,
                                expires_at=expires))
        if new_hash:  # a hash of older parameters: replaced now that the password is known
            session.execute(update(User).where(User.id == account.id).values(password_hash=new_hash))
    return Login(token, account, expires)


def _live_session(session, token: str | None) -> AuthSession:
    if not token:
        raise NotLoggedIn("Log in first (Annotate tab).")
    row = session.scalar(select(AuthSession).where(AuthSession.token_hash == token_hash(token)))
    if row is None or row.revoked_at is not None or _aware(row.expires_at) <= utcnow():
        raise NotLoggedIn(SESSION_ENDED)
    return row


def session_account(token: str | None) -> Account:
    """The account of a live session; NotLoggedIn when there is no token, or its session
    expired, was ended, or its account was deleted or disabled."""
    with database_session(read_only=True) as session:
        user = session.get(User, _live_session(session, token).user_id)
        if user is None or user.disabled_at is not None:
            raise NotLoggedIn(SESSION_ENDED)
        return Account(user.id, user.name, user.role)


@dataclass(frozen=True)
class SessionInfo:
    """One login of an account, as `caplens user sessions` lists it (never its token)."""

    created_at: datetime
    expires_at: datetime
    client: str | None
    live: bool


def account_sessions(session, user: User, revoke: bool = False) -> list[SessionInfo]:
    """The account's sessions not yet expired, newest first, with whether each is live; with
    `revoke`, every one of them is ended first (`annotation.people.accounts.revoke_sessions`)."""
    if revoke:
        revoke_sessions(session, user)
        session.flush()
    now = utcnow()
    rows = session.scalars(select(AuthSession).where(AuthSession.user_id == user.id)
                           .order_by(AuthSession.created_at.desc(), AuthSession.id.desc())).all()
    return [SessionInfo(_aware(row.created_at), _aware(row.expires_at), row.client, row.revoked_at is None)
            for row in rows if _aware(row.expires_at) > now]


def log_out(token: str | None, files_root: Path | None = None) -> None:
    """End the session of `token` (nothing when there is none) and delete the files handed to it."""
    if not token:
        return
    digest = token_hash(token)
    with database_session() as session:
        row = session.scalar(select(AuthSession).where(AuthSession.token_hash == digest))
        if row is not None and row.revoked_at is None:
            row.revoked_at = utcnow()
    if files_root is not None:
        shutil.rmtree(Path(files_root) / _files_folder(digest), ignore_errors=True)


def _files_folder(digest: str) -> str:
    """The folder of a session's files: derived from its token, so it names no account."""
    return hashlib.sha256(f"files:{digest}".encode("utf-8")).hexdigest()[:32]


def hand_out(token: str | None, paths: Sequence[str | None], files_root: Path) -> list[str | None]:
    """Copies of `paths` (None stays None) in a folder of this live session under `files_root`,
    for a front end to serve to this session only. NotLoggedIn when the session is not live."""
    with database_session(read_only=True) as session:
        digest = _live_session(session, token).token_hash
    return [None if path is None else str(_copy_once(Path(path), Path(files_root) / _files_folder(digest)))
            for path in paths]


def _copy_once(source: Path, folder: Path) -> Path:
    """`source` copied into `folder`, once per file version (a stored image shown again is not
    copied again; a new export, a new temporary file, is), written whole before it appears."""
    stat = source.stat()
    version = hashlib.sha256(f"{source.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode("utf-8"))
    target = folder / version.hexdigest()[:16] / source.name
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{secrets.token_hex(4)}.part")
        shutil.copyfile(source, partial)
        os.replace(partial, target)
    return target


def may_fetch(token: str | None, path: str | Path, files_root: Path) -> bool:
    """Whether the session of `token` is live and `path` is one of the files handed to it."""
    try:
        with database_session(read_only=True) as session:
            digest = _live_session(session, token).token_hash
    except NotLoggedIn:
        return False
    own = (Path(files_root) / _files_folder(digest)).resolve()
    return Path(path).resolve().is_relative_to(own)
