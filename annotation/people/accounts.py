"""Accounts, password hashing (Argon2id via argon2-cffi) and role checks.

Roles, least to most trusted: annotator (rates, transcreates, marks critical objects; sees
only their own work), researcher (also imports, exports, builds fine-tuning sets, deletes,
reads everyone's annotations), admin (also manages accounts).
"""
from __future__ import annotations

import functools
import time

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from db.models import ROLES, AuthSession, User, utcnow

MIN_PASSWORD_LENGTH = 8
ALL_ROLES = ROLES
RESEARCH_ROLES = ("researcher", "admin")
# Argon2id at OWASP's Password Storage Cheat Sheet configuration (19 MiB, 2 passes, 1 lane):
# about 20 ms per check on one core here, against 115 ms for argon2-cffi's default (64 MiB,
# 3 passes, 4 lanes), which made login the slowest call under a crowd on 2 cores; guessing
# is slowed by the login throttle (auth_sessions). Older hashes are replaced at their next login.
_hasher = PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)
_check_seconds = [0.02]  # how long the latest check of the dummy hash took


def hash_password(password: str) -> str:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise ValueError(f"password too short: at least {MIN_PASSWORD_LENGTH} characters")
    return _hasher.hash(password)


def require_role(user: User, *roles: str) -> None:
    """Raise PermissionError unless `user` has one of `roles`."""
    if user is None or user.role not in roles:
        who = "nobody" if user is None else f"{user.name} ({user.role})"
        raise PermissionError(f"{who} may not do this: needs role {' or '.join(roles)}")


def validate_role(role: str) -> str:
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}: choose one of {', '.join(ROLES)}")
    return role


def validate_name(name: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > 100 or any(ch.isspace() or not ch.isprintable() for ch in name):
        raise ValueError(f"invalid user name {name!r}: 1-100 printable characters, no spaces")
    return name


def create_user(session: Session, name: str, role: str, password: str | None = None,
                acting_user: User | None = None) -> User:
    """Add an account. `acting_user` must be an admin, except when None: the local
    command line, whose operator already owns the database file."""
    if acting_user is not None:
        require_role(acting_user, "admin")
    name, role = validate_name(name), validate_role(role)
    if session.scalar(select(User).where(User.name == name)) is not None:
        raise ValueError(f"user {name!r} already exists")
    user = User(name=name, role=role, password_hash=hash_password(password) if password is not None else None)
    session.add(user)
    session.flush()
    return user


def revoke_sessions(session: Session, user: User) -> int:
    """End every login of `user` at once (its tokens are refused from the next request); how
    many sessions it marked ended (expired ones not yet marked included). Changing an
    account's password or role, or disabling it, calls this."""
    result = session.execute(update(AuthSession)
                             .where(AuthSession.user_id == user.id, AuthSession.revoked_at.is_(None))
                             .values(revoked_at=utcnow()))
    return result.rowcount or 0


def set_password(session: Session, user: User, password: str, acting_user: User | None = None) -> None:
    """A new password; every session of the account ends (log in again with the new one)."""
    if acting_user is not None and acting_user.id != user.id:
        require_role(acting_user, "admin")
    user.password_hash = hash_password(password)
    revoke_sessions(session, user)
    session.flush()


def set_role(session: Session, user: User, role: str, acting_user: User | None = None) -> None:
    """A new role; every session of the account ends, so no page keeps acting with the old one."""
    if acting_user is not None:
        require_role(acting_user, "admin")
    role = validate_role(role)
    if role != user.role:
        user.role = role
        revoke_sessions(session, user)
    session.flush()


def get_user(session: Session, name: str) -> User:
    user = session.scalar(select(User).where(User.name == name))
    if user is None:
        raise LookupError(f"no user named {name!r} (add one with `caplens user add {name} --role ROLE`)")
    return user


def login_account(session: Session, name: str) -> User | None:
    """The account `name` when it can log in (it exists, has a password and is not disabled)."""
    user = session.scalar(select(User).where(User.name == name))
    if user is None or user.password_hash is None or user.disabled_at is not None:
        return None
    return user


def authenticate(session: Session, name: str, password: str, spend_cpu: bool = True) -> User | None:
    """The user when `password` is right, else None (same answer for unknown names and for
    disabled accounts). For a name that cannot log in the answer takes as long as a real check,
    so names cannot be probed by timing: a check of a dummy hash, or (`spend_cpu` False, for a
    caller sending many made-up names) a sleep as long as the latest such check."""
    user = login_account(session, name)
    if user is None:
        if not spend_cpu:
            time.sleep(_check_seconds[0])
            return None
        started = time.perf_counter()
        try:
            _hasher.verify(_dummy_hash(), password)
        except VerificationError:
            pass
        _check_seconds[0] = time.perf_counter() - started
        return None
    try:
        _hasher.verify(user.password_hash, password)
    except (VerificationError, InvalidHashError):
        return None
    return user


def rehashed(password_hash: str, password: str) -> str | None:
    """A new hash of the (verified) `password` when `password_hash` was made with other
    parameters than today's, else None: the caller stores it in its writing step."""
    return _hasher.hash(password) if _hasher.check_needs_rehash(password_hash) else None


@functools.cache
def _dummy_hash() -> str:
    return _hasher.hash("caplens-timing-equaliser")
