"""Accounts managed from the browser: an admin creates accounts or one-time invite links with a
role, disables and re-enables accounts, changes roles and forces password resets; every such
action is written to the audit log. Anyone changes their own password (knowing the current one).

Every function checks the acting account's role itself (an annotator's or researcher's request
is refused here, server-side, whatever the page shows). Links hold a random token
(`secrets.token_urlsafe`); the database keeps only its SHA-256 (`Invite.token_hash`), so a copy
of the database opens no link. A link works once, until it expires. A password reset removes
the account's password and ends its sessions at once; the link then sets a new one.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import select
from sqlalchemy.orm import Session

from annotation.people.accounts import (
    authenticate,
    create_user,
    hash_password,
    require_role,
    revoke_sessions,
    set_password,
    set_role,
    validate_name,
    validate_role,
)
from annotation.people.acting import acting
from annotation.people.auth_sessions import token_hash
from annotation.database import database_session
from db.models import AuditEvent, Invite, User, utcnow

DEFAULT_LINK_HOURS = 72
MAX_LINK_HOURS = 30 * 24
LINK_PARAMETER = "invite"  # the page's query parameter that carries a link's token


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def audit(session: Session, actor: User | None, action: str, target: str | None = None, **detail) -> None:
    """Write one admin action to the audit log (`actor` None: the server's command line)."""
    session.add(AuditEvent(actor=actor.name if actor is not None else "(command line)", action=action,
                           target=target, detail=detail, at=utcnow()))
    session.flush()


def _account(session: Session, name: str) -> User:
    user = session.scalar(select(User).where(User.name == (name or "").strip()))
    if user is None:
        raise LookupError(f"no account named {name!r}")
    return user


def _hours(hours: float) -> float:
    try:
        hours = float(hours)
    except (TypeError, ValueError):
        raise ValueError("the link's lifetime must be a number of hours") from None
    if not 0 < hours <= MAX_LINK_HOURS:
        raise ValueError(f"a link lives between 1 minute and {MAX_LINK_HOURS} hours, not {hours:g}")
    return hours


def _new_link(session: Session, admin: User, kind: str, role: str, hours: float, user: User | None = None) -> str:
    token = secrets.token_urlsafe(24)
    now = utcnow()
    session.add(Invite(token_hash=token_hash(token), kind=kind, role=role, user_id=user.id if user else None,
                       created_by_id=admin.id, created_at=now, expires_at=now + timedelta(hours=_hours(hours))))
    session.flush()
    return token


@dataclass(frozen=True)
class AccountRow:
    """An account as the admin page lists it."""

    name: str
    role: str
    status: str  # "active", "disabled", "no password" (a reset link is out, or imported ratings only)
    created: str

    def as_list(self) -> list[str]:
        return [self.name, self.role, self.status, self.created]


def list_accounts(session: Session, admin: User) -> list[AccountRow]:
    require_role(admin, "admin")
    rows = []
    for user in session.scalars(select(User).order_by(User.name)):
        status = ("disabled" if user.disabled_at is not None
                  else "no password" if user.password_hash is None else "active")
        rows.append(AccountRow(user.name, user.role, status, _aware(user.created_at).strftime("%Y-%m-%d %H:%M")))
    return rows


def create_account(session: Session, admin: User, name: str, role: str,
                   hours: float = DEFAULT_LINK_HOURS) -> str:
    """A new account `name` with `role` and no password yet; returns the token of a one-time
    link on which its owner sets the password (no password passes through the admin)."""
    require_role(admin, "admin")
    user = create_user(session, name, role, None, acting_user=admin)
    token = _new_link(session, admin, "reset", user.role, hours, user)
    audit(session, admin, "create account", user.name, role=user.role, hours=float(hours))
    return token


def create_invite(session: Session, admin: User, role: str, hours: float = DEFAULT_LINK_HOURS) -> str:
    """A one-time link's token: whoever opens the link within `hours` chooses a name and a
    password and gets an account with `role`."""
    require_role(admin, "admin")
    role = validate_role(role)
    token = _new_link(session, admin, "invite", role, hours)
    audit(session, admin, "invite", None, role=role, hours=float(hours))
    return token


def set_disabled(session: Session, admin: User, name: str, disabled: bool) -> User:
    """Disable (no login, every session ended, no action) or re-enable an account."""
    require_role(admin, "admin")
    user = _account(session, name)
    if user.id == admin.id and disabled:
        raise ValueError("You cannot disable your own account.")
    if disabled and user.disabled_at is None:
        user.disabled_at = utcnow()
        revoke_sessions(session, user)
    elif not disabled:
        user.disabled_at = None
    session.flush()
    audit(session, admin, "disable" if disabled else "enable", user.name)
    return user


def change_role(session: Session, admin: User, name: str, role: str) -> User:
    require_role(admin, "admin")
    user = _account(session, name)
    role = validate_role(role)
    if user.id == admin.id and role != "admin":
        raise ValueError("You cannot take the admin role from yourself; another admin can.")
    before = user.role
    set_role(session, user, role, acting_user=admin)  # its sessions end: no page acts with the old role
    audit(session, admin, "change role", user.name, before=before, after=role)
    return user


def force_password_reset(session: Session, admin: User, name: str, hours: float = DEFAULT_LINK_HOURS) -> str:
    """Remove the account's password, end its sessions, and return the token of a one-time
    link that sets a new one."""
    require_role(admin, "admin")
    user = _account(session, name)
    user.password_hash = None
    revoke_sessions(session, user)
    token = _new_link(session, admin, "reset", user.role, hours, user)
    audit(session, admin, "force password reset", user.name, hours=float(hours))
    return token


@dataclass(frozen=True)
class LinkInfo:
    """What a link is for, as its page shows it before it is used."""

    kind: str  # "invite" or "reset"
    role: str
    name: str | None  # the account a reset link is for

    @property
    def text(self) -> str:
        if self.kind == "reset":
            return f"Choose a new password for **{self.name}**."
        return f"You are invited as **{self.role}**: choose a user name and a password."


def _live_link(session: Session, token: str | None) -> Invite:
    link = session.scalar(select(Invite).where(Invite.token_hash == token_hash(token or "")))
    if link is None:
        raise PermissionError("This link is not valid.")
    if link.used_at is not None:
        raise PermissionError("This link was already used; ask your admin for a new one.")
    if _aware(link.expires_at) <= utcnow():
        raise PermissionError("This link has expired; ask your admin for a new one.")
    return link


def link_info(session: Session, token: str | None) -> LinkInfo:
    link = _live_link(session, token)
    user = session.get(User, link.user_id) if link.user_id else None
    return LinkInfo(link.kind, link.role, user.name if user else None)


def redeem_link(session: Session, token: str | None, name: str, password: str) -> User:
    """Use a link once: an invite creates the account `name` with the link's role and
    `password`; a reset sets `password` on its account (`name` must be that account's)."""
    link = _live_link(session, token)
    new_hash = hash_password(password or "")
    if link.kind == "reset":
        user = session.get(User, link.user_id)
        if user is None or validate_name(name) != user.name:
            raise PermissionError("This link is for another account.")
        user.password_hash = new_hash
        action = "password reset done"
    else:
        name = validate_name(name)
        if session.scalar(select(User.id).where(User.name == name)) is not None:
            raise ValueError(f"The user name {name!r} is taken; choose another.")
        user = User(name=name, role=link.role, password_hash=new_hash)
        session.add(user)
        action = "joined"
    link.used_at = utcnow()
    session.flush()
    audit(session, user, action, user.name, role=user.role)
    return user


def change_own_password(session: Session, user: User, current: str, new: str) -> None:
    """Anyone changes their own password, given the current one; every login of the account
    ends (`accounts.set_password`), this one included: log in again with the new password."""
    if authenticate(session, user.name, current or "") is None:
        raise PermissionError("The current password is wrong.")
    if current == new:
        raise ValueError("The new password is the same as the current one.")
    set_password(session, user, new or "", acting_user=user)


@dataclass(frozen=True)
class AuditRow:
    at: str
    actor: str
    action: str
    target: str
    detail: str

    def as_list(self) -> list[str]:
        return [self.at, self.actor, self.action, self.target, self.detail]


def audit_log(session: Session, admin: User, limit: int = 200) -> list[AuditRow]:
    """The latest admin actions, newest first."""
    require_role(admin, "admin")
    events = session.scalars(select(AuditEvent).order_by(AuditEvent.id.desc()).limit(limit))
    return [AuditRow(_aware(e.at).strftime("%Y-%m-%d %H:%M:%S"), e.actor, e.action, e.target or "",
                     ", ".join(f"{k}={v}" for k, v in sorted((e.detail or {}).items()))) for e in events]


# ---------------------------------------------------------------------------------------
# the admin page and the link page, each action one transaction as the acting account


@dataclass(frozen=True)
class AdminScreen:
    accounts: list[list[str]]
    audit: list[list[str]]
    message: str = ""
    link: str = ""  # a one-time link just made ("" when the action made none)


def link_url(page_url: str, token: str) -> str:
    """The link to hand out: the app's page with the token as its query parameter."""
    base = (page_url or "").split("?")[0].split("#")[0]
    return f"{base}?{LINK_PARAMETER}={token}"


def admin_screen(account_id: int | None, message: str = "", link: str = "") -> AdminScreen:
    with acting(account_id, read_only=True) as (session, admin):
        return AdminScreen([row.as_list() for row in list_accounts(session, admin)],
                           [row.as_list() for row in audit_log(session, admin)], message, link)


def admin_action(account_id: int | None, action: str, page_url: str = "", name: str = "", role: str = "annotator",
                 hours: float = DEFAULT_LINK_HOURS) -> AdminScreen:
    """One admin action by its page's name: "create", "invite", "disable", "enable", "role",
    "reset". Returns the page again with what happened (and the link, for those that make one)."""
    with acting(account_id) as (session, admin):
        token = ""
        if action == "create":
            token = create_account(session, admin, name, role, hours)
            message = f"Account {name.strip()} ({role}) created: send them this one-time link to set their password."
        elif action == "invite":
            token = create_invite(session, admin, role, hours)
            message = f"One-time invite link for a new {role}, valid {float(hours):g} hours:"
        elif action in ("disable", "enable"):
            user = set_disabled(session, admin, name, action == "disable")
            message = f"Account {user.name} {action}d."
        elif action == "role":
            user = change_role(session, admin, name, role)
            message = f"{user.name} is now {user.role}."
        elif action == "reset":
            token = force_password_reset(session, admin, name, hours)
            message = (f"{name.strip()}'s password is removed and their logins ended: send them this one-time link "
                       "to set a new one.")
        else:
            raise ValueError(f"unknown admin action {action!r}")
    return admin_screen(account_id, message, link_url(page_url, token) if token else "")


def link_page(token: str | None) -> LinkInfo:
    """What the link `token` is for (PermissionError when it is unknown, used or expired)."""
    with database_session(read_only=True) as session:
        return link_info(session, token)


def use_link(token: str | None, name: str, password: str) -> str:
    """Redeem a link (see `redeem_link`); returns the account's name, to log in with."""
    with database_session() as session:
        return redeem_link(session, token, name, password).name


def change_password(account_id: int | None, current: str, new: str) -> None:
    with acting(account_id) as (session, user):
        change_own_password(session, user, current, new)
