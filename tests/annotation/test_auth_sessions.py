"""Server-side login sessions (random tokens stored hashed, expiry, revocation), login
throttling with backoff per account and per client, and files handed to one session."""
from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import delete, select

from annotation.people import auth_sessions
from annotation.people.accounts import create_user, get_user, login_account, set_password, set_role
from annotation.people.acting import NotLoggedIn
from annotation.people.auth_sessions import (
    FREE_FAILURES_PER_ACCOUNT,
    FREE_UNKNOWN_PER_CLIENT,
    MAX_WAIT_S,
    SESSION_LIFETIME,
    TooManyAttempts,
    account_sessions,
    hand_out,
    log_in,
    log_out,
    may_fetch,
    session_account,
)
from db.models import AuthSession, LoginFailure, User
from db.session import session_scope

PASSWORDS = {"amy": "amy-password-1", "rex": "rex-password-1"}


@pytest.fixture
def people(engine):
    with session_scope(engine) as session:
        create_user(session, "amy", "annotator", PASSWORDS["amy"])
        create_user(session, "rex", "researcher", PASSWORDS["rex"])


@pytest.fixture
def clock(monkeypatch):
    """The sessions' clock, frozen; `clock.advance(seconds)` moves it."""
    class Clock:
        now = datetime(2026, 11, 24, 9, 0, tzinfo=timezone.utc)

        def advance(self, seconds: float) -> None:
            self.now += timedelta(seconds=seconds)

    frozen = Clock()
    monkeypatch.setattr(auth_sessions, "utcnow", lambda: frozen.now)
    return frozen


@pytest.fixture
def password_checks(monkeypatch):
    """How often a password hash was verified (Argon2 runs inside `authenticate`)."""
    calls = []
    real = auth_sessions.authenticate

    def counted(session, name, password, spend_cpu=True):
        if spend_cpu or login_account(session, name) is not None:
            calls.append(name)
        return real(session, name, password, spend_cpu=spend_cpu)

    monkeypatch.setattr(auth_sessions, "authenticate", counted)
    return calls


def test_login_gives_a_random_token_that_only_its_hash_is_stored(engine, people, clock):
    first, second = log_in("amy", PASSWORDS["amy"], "10.0.0.1"), log_in(" amy ", PASSWORDS["amy"], "10.0.0.1")
    assert first.token != second.token and len(first.token) >= 40
    assert first.account.name == "amy" and first.account.role == "annotator"
    assert first.expires_at == clock.now + SESSION_LIFETIME
    with session_scope(engine) as session:
        rows = session.scalars(select(AuthSession)).all()
        stored = {row.token_hash for row in rows}
        assert stored == {hashlib.sha256(t.encode()).hexdigest() for t in (first.token, second.token)}
        assert all(row.client == "10.0.0.1" and row.revoked_at is None for row in rows)
    assert session_account(first.token) == first.account
    with pytest.raises(NotLoggedIn, match="Log in first"):
        session_account(None)
    with pytest.raises(NotLoggedIn, match="log in again"):
        session_account(first.token[:-1] + ("A" if first.token[-1] != "A" else "B"))


def test_expired_revoked_and_deleted_sessions_must_log_in_again(engine, people, clock):
    kept, ended = log_in("amy", PASSWORDS["amy"], None), log_in("amy", PASSWORDS["amy"], None)
    log_out(ended.token)
    with pytest.raises(NotLoggedIn, match="log in again"):
        session_account(ended.token)
    assert session_account(kept.token).name == "amy"  # logging out ends that session only
    clock.advance(SESSION_LIFETIME.total_seconds() - 1)
    assert session_account(kept.token).name == "amy"
    clock.advance(1)
    with pytest.raises(NotLoggedIn, match="log in again"):
        session_account(kept.token)
    fresh = log_in("rex", PASSWORDS["rex"], None)
    with session_scope(engine) as session:
        session.execute(delete(User).where(User.name == "rex"))
    with pytest.raises(NotLoggedIn, match="log in again"):
        session_account(fresh.token)


def test_200_wrong_guesses_are_refused_without_hashing_then_the_lockout_ends(people, clock, password_checks):
    answers = []
    for n in range(200):
        try:
            log_in("amy", f"guess-{n}", "10.0.0.2")
        except TooManyAttempts as exc:
            answers.append(("throttled", exc.retry_after))
        except PermissionError as exc:
            answers.append(("wrong", str(exc)))
    assert answers[:FREE_FAILURES_PER_ACCOUNT] == [("wrong", "Wrong user name or password.")] * 5
    assert answers[FREE_FAILURES_PER_ACCOUNT:] == [("throttled", 1)] * 195
    assert len(password_checks) == FREE_FAILURES_PER_ACCOUNT  # throttled guesses never reach Argon2
    with pytest.raises(TooManyAttempts, match=r"try again in 1 s"):
        log_in("amy", PASSWORDS["amy"], "10.0.0.3")  # the right password, another address: still refused
    clock.advance(1)
    with pytest.raises(PermissionError, match="Wrong"):
        log_in("amy", "guess-6", "10.0.0.2")  # the 6th failure doubles the wait …
    clock.advance(1)
    with pytest.raises(TooManyAttempts, match=r"try again in 1 s"):
        log_in("amy", PASSWORDS["amy"], "10.0.0.2")
    clock.advance(1)  # … to 2 s
    assert log_in("amy", PASSWORDS["amy"], "10.0.0.2").account.name == "amy"
    # A successful login forgets the account's failures: five free guesses again.
    for n in range(FREE_FAILURES_PER_ACCOUNT):
        with pytest.raises(PermissionError, match="Wrong"):
            log_in("amy", f"again-{n}", "10.0.0.2")
    with pytest.raises(TooManyAttempts):
        log_in("amy", "again-5", "10.0.0.2")


def test_the_wait_doubles_up_to_its_cap(people, clock):
    waits = []
    for n in range(FREE_FAILURES_PER_ACCOUNT + 14):
        try:
            log_in("amy", f"guess-{n}", f"10.1.0.{n}")
        except TooManyAttempts as exc:
            waits.append(exc.retry_after)
            clock.advance(exc.retry_after)
            with pytest.raises(PermissionError, match="Wrong"):
                log_in("amy", f"guess-{n}", f"10.1.0.{n}")
        except PermissionError:
            pass
    assert waits[:10] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert waits[10:] == [MAX_WAIT_S] * 4


def test_made_up_names_never_lock_real_accounts_and_cost_no_hash_past_their_allowance(engine, people, clock,
                                                                                      password_checks, monkeypatch):
    # Past the address's ceiling for wrong passwords (lowered from 200, so that the made-up
    # names cross it in 80 attempts rather than 220, each answered after the check's duration).
    monkeypatch.setattr(auth_sessions, "FREE_FAILURES_PER_CLIENT", 40)
    extra = 60
    answers = []
    for n in range(FREE_UNKNOWN_PER_CLIENT + extra):
        try:
            log_in(f"nobody-{n}", "some-password", "10.0.0.7")
        except TooManyAttempts:
            answers.append("throttled")
        except PermissionError as exc:
            answers.append(str(exc))
    assert answers == ["Wrong user name or password."] * (FREE_UNKNOWN_PER_CLIENT + extra)
    assert len(password_checks) == FREE_UNKNOWN_PER_CLIENT  # the rest answered without Argon2
    assert log_in("amy", PASSWORDS["amy"], "10.0.0.7").account.name == "amy"  # not locked by them
    with pytest.raises(PermissionError, match="Wrong"):
        log_in("rex", "wrong-password", "10.0.0.7")  # a real name is still checked for real
    assert len(password_checks) == FREE_UNKNOWN_PER_CLIENT + 2
    clock.advance(auth_sessions.FAILURE_MEMORY.total_seconds())
    log_in("amy", PASSWORDS["amy"], "10.0.0.9")  # old failures are forgotten, and deleted at the next failure
    with pytest.raises(PermissionError, match="Wrong"):
        log_in("nobody", "x", "10.0.0.9")
    with session_scope(engine) as session:
        assert [row.account_name for row in session.scalars(select(LoginFailure))] == ["nobody"]


def test_one_address_guessing_many_real_accounts_is_throttled_past_its_ceiling(engine, clock, monkeypatch):
    monkeypatch.setattr(auth_sessions, "FREE_FAILURES_PER_CLIENT", 8)
    with session_scope(engine) as session:
        for n in range(5):
            create_user(session, f"user{n}", "annotator", f"password-of-{n}")
    for n in range(8):  # two wrong guesses on each of four accounts: below each one's own limit
        with pytest.raises(PermissionError, match="Wrong"):
            log_in(f"user{n % 4}", "guess", "10.0.0.7")
    with pytest.raises(TooManyAttempts):
        log_in("user4", "password-of-4", "10.0.0.7")  # the 9th attempt from that address waits
    assert log_in("user4", "password-of-4", "10.0.0.8").account.name == "user4"  # another address may
    clock.advance(1)
    assert log_in("user4", "password-of-4", "10.0.0.7").account.name == "user4"


def test_forty_simultaneous_correct_logins_from_one_address_all_succeed(engine, clock):
    from concurrent.futures import ThreadPoolExecutor

    with session_scope(engine) as session:
        for n in range(20):
            create_user(session, f"lab{n}", "annotator", f"lab-password-{n}")
    names = [f"lab{n % 20}" for n in range(40)]  # twenty people, each logging in twice at once

    def attempt(name):
        try:
            return log_in(name, f"lab-password-{name[3:]}", "192.168.1.1").account.name
        except PermissionError as exc:
            return str(exc)

    with ThreadPoolExecutor(40) as pool:
        assert list(pool.map(attempt, names)) == names


def test_a_new_password_a_new_role_or_a_revocation_ends_every_session_of_the_account(engine, people, clock):
    amy = [log_in("amy", PASSWORDS["amy"], "10.0.0.1") for _ in range(2)]
    rex = log_in("rex", PASSWORDS["rex"], "10.0.0.2")
    with session_scope(engine) as session:
        set_password(session, get_user(session, "amy"), "amy-password-2")
    for login in amy:
        with pytest.raises(NotLoggedIn, match="log in again"):
            session_account(login.token)
    assert session_account(rex.token).name == "rex"  # other accounts keep theirs
    again = log_in("amy", "amy-password-2", "10.0.0.1")
    with session_scope(engine) as session:
        set_role(session, get_user(session, "amy"), "annotator")  # the same role: nothing ends
    assert session_account(again.token).role == "annotator"
    with session_scope(engine) as session:
        set_role(session, get_user(session, "amy"), "researcher")
    with pytest.raises(NotLoggedIn):
        session_account(again.token)
    third = log_in("amy", "amy-password-2", "10.0.0.3")
    assert session_account(third.token).role == "researcher"
    with session_scope(engine) as session:
        listed = account_sessions(session, get_user(session, "amy"))
        assert [(info.client, info.live) for info in listed] == [("10.0.0.3", True), ("10.0.0.1", False),
                                                                 ("10.0.0.1", False), ("10.0.0.1", False)]
        assert [info.live for info in account_sessions(session, get_user(session, "amy"), revoke=True)] == [False] * 4
    with pytest.raises(NotLoggedIn):
        session_account(third.token)
    with session_scope(engine) as session:
        get_user(session, "rex").disabled_at = clock.now
    with pytest.raises(NotLoggedIn):
        session_account(rex.token)  # a disabled account's sessions stop at once


def test_files_are_handed_to_one_live_session_only(people, clock, tmp_path):
    source = tmp_path / "stored.png"
    source.write_bytes(b"pixels")
    root = tmp_path / "served"
    amy, rex = log_in("amy", PASSWORDS["amy"], None), log_in("rex", PASSWORDS["rex"], None)
    copy, nothing = hand_out(amy.token, [str(source), None], root)
    assert nothing is None and open(copy, "rb").read() == b"pixels"
    assert hand_out(amy.token, [str(source)], root) == [copy]  # shown again: the same copy
    assert copy.startswith(str(root)) and "amy" not in copy and amy.token not in copy
    theirs = hand_out(rex.token, [str(source)], root)[0]
    assert may_fetch(amy.token, copy, root)
    assert not may_fetch(rex.token, copy, root) and not may_fetch(amy.token, theirs, root)
    assert not may_fetch(None, copy, root)
    assert not may_fetch(amy.token, source, root)
    log_out(amy.token, root)
    assert not may_fetch(amy.token, copy, root)
    assert not Path(copy).exists() and may_fetch(rex.token, theirs, root)
    with pytest.raises(NotLoggedIn, match="log in again"):
        hand_out(amy.token, [str(source)], root)
    source.write_bytes(b"other pixels")  # a new version of the file is a new copy
    again = hand_out(rex.token, [str(source)], root)[0]
    assert again != theirs and open(again, "rb").read() == b"other pixels" and open(theirs, "rb").read() == b"pixels"


def test_a_hash_of_older_parameters_is_replaced_at_login(engine, people, clock):
    """Accounts made before the hasher's parameters changed keep working, and their hash is
    rewritten with today's parameters in the login's short writing step."""
    from argon2 import PasswordHasher

    old = PasswordHasher()  # argon2-cffi's default: 64 MiB, 3 passes, 4 lanes
    with session_scope(engine) as session:
        session.scalar(select(User).where(User.name == "amy")).password_hash = old.hash(PASSWORDS["amy"])
    log_in("amy", PASSWORDS["amy"], "10.0.0.1")
    with session_scope(engine) as session:
        stored = session.scalar(select(User).where(User.name == "amy")).password_hash
    assert stored.startswith("$argon2id$v=19$m=19456,t=2,p=1$")
    assert log_in("amy", PASSWORDS["amy"], "10.0.0.1").account.name == "amy"
