"""Accounts from the browser (issue 24): invites and reset links that work once and expire,
disable/enable, roles, the audit log, own password changes, and the refusal of every admin
action to anyone but an admin, in the library (server-side)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from annotation.people import admin
from annotation.people.acting import NotLoggedIn, acting
from annotation.people.accounts import authenticate
from annotation.people.auth_sessions import log_in, session_account
from db.models import Invite, User
from db.session import session_scope

PASSWORD = "a-good-password"


def _user(session, name):
    return session.scalar(select(User).where(User.name == name))


def test_an_invite_makes_one_account_with_its_role_once(engine, accounts):
    with session_scope(engine) as session:
        token = admin.create_invite(session, _user(session, "root"), "researcher", hours=2)
        assert session.scalar(select(Invite.token_hash)) != token  # only its digest is stored
        assert admin.link_info(session, token).role == "researcher"
    assert admin.use_link(token, "nadia", PASSWORD) == "nadia"
    with session_scope(engine) as session:
        assert _user(session, "nadia").role == "researcher"
        assert authenticate(session, "nadia", PASSWORD) is not None
    with pytest.raises(PermissionError, match="already used"):
        admin.use_link(token, "nadia2", PASSWORD)
    with pytest.raises(PermissionError, match="not valid"):
        admin.use_link("made-up", "nadia3", PASSWORD)


def test_an_expired_link_is_refused(engine, accounts):
    with session_scope(engine) as session:
        token = admin.create_invite(session, _user(session, "root"), "annotator", hours=1)
        link = session.scalar(select(Invite))
        link.expires_at = link.created_at - timedelta(seconds=1)
    with pytest.raises(PermissionError, match="expired"):
        admin.use_link(token, "late", PASSWORD)
    with session_scope(engine) as session:
        assert _user(session, "late") is None


def test_created_account_sets_its_password_on_its_link_only(engine, accounts):
    with session_scope(engine) as session:
        token = admin.create_account(session, _user(session, "root"), "omar", "annotator")
        assert _user(session, "omar").password_hash is None
    with pytest.raises(PermissionError, match="another account"):
        admin.use_link(token, "ann", PASSWORD)
    admin.use_link(token, "omar", PASSWORD)
    with session_scope(engine) as session:
        assert authenticate(session, "omar", PASSWORD).role == "annotator"


def test_disable_ends_logins_and_actions_and_enable_restores_them(engine, accounts):
    with session_scope(engine) as session:
        token = admin.create_account(session, _user(session, "root"), "dana", "annotator")
    admin.use_link(token, "dana", PASSWORD)
    login = log_in("dana", PASSWORD, "127.0.0.1")
    with session_scope(engine) as session:
        admin.set_disabled(session, _user(session, "root"), "dana", True)
    with pytest.raises(PermissionError):
        session_account(login.token)  # the live session was ended
    with pytest.raises(PermissionError, match="Wrong user name or password"):
        log_in("dana", PASSWORD, "127.0.0.1")
    with pytest.raises(NotLoggedIn, match="disabled"):
        with acting(login.account.id):
            pass
    with session_scope(engine) as session:
        admin.set_disabled(session, _user(session, "root"), "dana", False)
    assert log_in("dana", PASSWORD, "127.0.0.1").account.name == "dana"


def test_force_reset_removes_the_password_and_the_link_sets_a_new_one(engine, accounts):
    with session_scope(engine) as session:
        token = admin.create_account(session, _user(session, "root"), "eve", "annotator")
    admin.use_link(token, "eve", PASSWORD)
    login = log_in("eve", PASSWORD, None)
    with session_scope(engine) as session:
        reset = admin.force_password_reset(session, _user(session, "root"), "eve")
    with pytest.raises(PermissionError):
        session_account(login.token)
    with session_scope(engine) as session:
        assert authenticate(session, "eve", PASSWORD) is None
    admin.use_link(reset, "eve", "a-new-password")
    assert log_in("eve", "a-new-password", None).account.role == "annotator"


def test_roles_and_the_audit_log(engine, accounts):
    with session_scope(engine) as session:
        root = _user(session, "root")
        admin.change_role(session, root, "ann", "researcher")
        admin.set_disabled(session, root, "bea", True)
        with pytest.raises(ValueError, match="from yourself"):
            admin.change_role(session, root, "root", "annotator")
        with pytest.raises(ValueError, match="your own account"):
            admin.set_disabled(session, root, "root", True)
        assert _user(session, "ann").role == "researcher"
        log = admin.audit_log(session, root)
        assert [(row.actor, row.action, row.target) for row in log] == [
            ("root", "disable", "bea"), ("root", "change role", "ann")]
        assert log[1].detail == "after=researcher, before=annotator"
        statuses = {row.name: row.status for row in admin.list_accounts(session, root)}
        assert statuses["bea"] == "disabled"


@pytest.mark.parametrize("who", ["ann", "rita"])
def test_only_an_admin_may_manage_accounts(engine, accounts, who):
    with session_scope(engine) as session:
        actor = _user(session, who)
        for call in (lambda: admin.create_invite(session, actor, "admin"),
                     lambda: admin.create_account(session, actor, "x1", "admin"),
                     lambda: admin.set_disabled(session, actor, "cal", True),
                     lambda: admin.change_role(session, actor, who, "admin"),
                     lambda: admin.force_password_reset(session, actor, "cal"),
                     lambda: admin.list_accounts(session, actor),
                     lambda: admin.audit_log(session, actor)):
            with pytest.raises(PermissionError):
                call()
        assert _user(session, who).role != "admin" and _user(session, "cal").disabled_at is None


def test_own_password_change_needs_the_current_one(engine, accounts):
    with session_scope(engine) as session:
        token = admin.create_account(session, _user(session, "root"), "fay", "annotator")
    admin.use_link(token, "fay", PASSWORD)
    fay = log_in("fay", PASSWORD, None).account.id
    with pytest.raises(PermissionError, match="current password is wrong"):
        admin.change_password(fay, "not-it-at-all", "another-password")
    admin.change_password(fay, PASSWORD, "another-password")
    with session_scope(engine) as session:
        assert authenticate(session, "fay", "another-password") is not None
        assert authenticate(session, "fay", PASSWORD) is None


def test_admin_page_actions_by_account_id_and_link_urls(engine, accounts):
    with session_scope(engine) as session:
        root_id, ann_id = _user(session, "root").id, _user(session, "ann").id
    screen = admin.admin_action(root_id, "invite", "https://host/app/?x=1#frag", role="annotator", hours=1)
    assert screen.link.startswith("https://host/app/?invite=") and "x=1" not in screen.link
    assert admin.link_page(screen.link.split("invite=")[1]).kind == "invite"
    assert screen.audit[0][2] == "invite"
    with pytest.raises(PermissionError):
        admin.admin_action(ann_id, "role", name="ann", role="admin")
