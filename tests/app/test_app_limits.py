"""What one request may cost, over raw HTTP against the live server as a stranger or a crowd
would send it: limits answered in words before any work, malformed arguments named, heavy
work of one client kept from the annotators, logins that a lab behind one address all get,
and sessions that end when their account's password or role changes."""
from __future__ import annotations

import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from gradio_client import Client

from app.session import TOKEN_HEADER
from scoring.paths import DEFAULT_CAPTION_MAX_CHARS


def call(server, api_name: str, data: list, headers: dict | None = None) -> tuple[str, object, float]:
    """POST /gradio_api/call/<api_name>, then read its event stream: (event, data, seconds);
    an error's data is the message the caller is shown (None when Gradio shows no text)."""
    started = time.perf_counter()
    http = httpx.Client(timeout=120, headers=headers or {})
    posted = http.post(f"{server.url}gradio_api/call/{api_name}", json={"data": data})
    assert posted.status_code == 200, posted.text
    event = None
    with http.stream("GET", f"{server.url}gradio_api/call/{api_name}/{posted.json()['event_id']}") as stream:
        for line in stream.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event in ("complete", "error"):
                data = json.loads(line[5:])
                if event == "error" and isinstance(data, dict):
                    data = data.get("error")
                return event, data, time.perf_counter() - started
    raise AssertionError(f"no answer from /{api_name}")


@pytest.fixture
def annotator_token(server):
    return Client(server.url, verbose=False).predict(*server.annotator, api_name="/login")["token"]


@pytest.fixture
def forget_failures():
    """Every test here logs in from 127.0.0.1: its failures are forgotten afterwards."""
    yield
    from sqlalchemy import delete

    from annotation.database import database_session
    from db.models import LoginFailure

    with database_session() as session:
        session.execute(delete(LoginFailure))


def test_a_caption_at_the_limit_is_perturbed_and_one_past_it_is_refused_in_words(server):
    unit = "a man rides a brown horse on the beach. "
    at_limit = (unit * (DEFAULT_CAPTION_MAX_CHARS // len(unit) + 1))[:DEFAULT_CAPTION_MAX_CHARS]
    event, results, _ = call(server, "perturb", [at_limit, "masking", 0.4, 0, "en", ""])
    assert event == "complete" and results[0][0]["op"] == "masking" and len(results[0][0]["text"]) > 1000
    event, message, _ = call(server, "perturb", [at_limit + "x", "masking", 0.4, 0, "en", ""])
    assert (event, message) == ("error", f"text: {DEFAULT_CAPTION_MAX_CHARS + 1:,} characters; the limit is "
                                         f"{DEFAULT_CAPTION_MAX_CHARS:,}")
    event, message, seconds = call(server, "perturb", ["a horse " * 50_000, "all", None, 0, "auto", ""])
    assert event == "error" and message.startswith("text: 400,000 characters; the limit is") and seconds < 3


@pytest.mark.parametrize("api_name, data, expected", [
    ("rate", ["abc", 0.5, None, None, None], "caption_id: expected a whole number, got str 'abc'"),
    ("rate", [[1], 0.5, None, None, None], "caption_id: expected a whole number, got list [1]"),
    ("rate", [{"id": 1}, 0.5, None, None, None], "caption_id: expected a whole number, got dict {'id': 1}"),
    ("rate", [74.9, 0.5, None, None, None], "caption_id: expected a whole number, got 74.9"),
    ("rate", [1, "high", None, None, None], "overall: expected a number, got str 'high'"),
    ("rate", [1], "rate: 1 argument(s) given, 5 needed; missing: overall, fluency, relevance, descriptiveness"),
    ("score", ["", "a red car"], "score: 2 argument(s) given, 6 needed; missing: references, lang, metrics, the "
                                 "session's state (send null)"),
    ("score", [{"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}}, "a red car", "", "en", "", None],
     "image: upload the file (gradio_client's handle_file does it, or POST it to /gradio_api/upload first); a path "
     "on the server is not read"),
    ("perturb", ["a red car", "masking", 0.4, 1e20, "en", ""],
     "seed: 1e+20 is out of range (0 to 4,294,967,295)"),
    ("perturb", ["a red car", "masking", 0.4, -1, "en", ""], "seed: -1 is out of range (0 to 4,294,967,295)"),
    ("perturb", [["a red car"], "masking", 0.4, 0, "en", ""], "text: expected text, got list ['a red car']"),
    ("next_item", [{"name": "x"}], "collection: expected text, got dict {'name': 'x'}"),
])
def test_malformed_arguments_are_named_with_what_was_expected(server, annotator_token, api_name, data, expected,
                                                              caplog):
    event, message, _ = call(server, api_name, data, {TOKEN_HEADER: annotator_token})
    assert (event, message) == ("error", expected)
    assert "Traceback" not in caplog.text


def test_the_largest_seed_is_accepted(server):
    event, results, _ = call(server, "perturb", ["a red car on the road", "masking", 0.4, 2**32 - 1, "en", ""])
    assert event == "complete" and results[0][0]["seed"] == 2**32 - 1


def test_one_client_runs_one_heavy_request_at_a_time_and_annotators_are_not_kept_waiting(
        server, annotator_token, monkeypatch):
    import app.api

    running, most = [0], [0]
    lock = threading.Lock()

    def slow_perturb(*args, **kwargs):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(3)
        with lock:
            running[0] -= 1
        return []

    monkeypatch.setattr(app.api, "perturb_caption", slow_perturb)
    with ThreadPoolExecutor(6) as pool:
        floods = [pool.submit(call, server, "perturb", ["a red car", "masking", 0.4, n, "en", ""]) for n in range(4)]
        time.sleep(0.5)
        event, item, annotator_seconds = call(server, "next_item", [server.collection], {TOKEN_HEADER: annotator_token})
        answers = [future.result() for future in floods]
    assert event == "complete" and item[0]["caption_id"] is not None
    assert annotator_seconds < 2.0  # not queued behind the flood's 3 s of work
    assert most[0] == 1
    assert sorted(a[0] for a in answers) == ["complete", "error", "error", "error"]
    refused = [a for a in answers if a[0] == "error"]
    assert all(a[1].startswith("You already have 1 scoring or analysis request(s) running") for a in refused)
    assert all(a[2] < 2.0 for a in refused), answers  # refused at once, not after the first one's 3 s of work


def test_forty_simultaneous_correct_logins_from_one_address_all_succeed(server, forget_failures):
    from annotation.people.accounts import create_user
    from annotation.database import database_session

    with database_session() as session:
        for n in range(20):
            create_user(session, f"crowd{n}-{uuid.uuid4().hex[:6]}", "annotator", f"crowd-password-{n}")
        from sqlalchemy import select

        from db.models import User
        names = sorted(session.scalars(select(User.name).where(User.name.like("crowd%"))))[:20]

    def log_in(name):
        return httpx.post(f"{server.url}caplens/login", timeout=60,
                          json={"name": name, "password": f"crowd-password-{name[5:].split('-')[0]}"}).status_code

    with ThreadPoolExecutor(40) as pool:
        codes = list(pool.map(log_in, names + names))
    assert codes == [200] * 40


def test_made_up_names_do_not_lock_real_accounts_out_of_an_address(server, forget_failures):
    from annotation.people.auth_sessions import FREE_UNKNOWN_PER_CLIENT

    codes = [httpx.post(f"{server.url}caplens/login", timeout=60,
                        json={"name": f"made-up-{n}", "password": "whatever-1"}).status_code
             for n in range(FREE_UNKNOWN_PER_CLIENT + 10)]
    assert codes == [401] * (FREE_UNKNOWN_PER_CLIENT + 10)
    right = httpx.post(f"{server.url}caplens/login", timeout=60,
                       json={"name": server.annotator[0], "password": server.annotator[1]})
    assert right.status_code == 200 and right.json()["ok"]


def test_a_token_is_refused_at_once_after_its_password_or_role_changes(server):
    from annotation.people.accounts import create_user, get_user, set_password, set_role
    from annotation.database import database_session

    name = f"temp-{uuid.uuid4().hex[:8]}"
    with database_session() as session:
        create_user(session, name, "annotator", "first-password")
    tokens = [Client(server.url, verbose=False).predict(name, "first-password", api_name="/login")["token"]
              for _ in range(2)]
    for token in tokens:
        assert call(server, "next_item", [server.collection], {TOKEN_HEADER: token})[0] == "complete"
    with database_session() as session:
        set_password(session, get_user(session, name), "second-password")
    for token in tokens:
        message = call(server, "next_item", [server.collection], {TOKEN_HEADER: token})[1]
        assert message.startswith("Your login has expired or was ended. Not logged in: call the login tool")
    token = Client(server.url, verbose=False).predict(name, "second-password", api_name="/login")["token"]
    assert call(server, "next_item", [server.collection], {TOKEN_HEADER: token})[0] == "complete"
    with database_session() as session:
        set_role(session, get_user(session, name), "researcher")
    assert "Your login has expired or was ended" in call(server, "next_item", [server.collection], {TOKEN_HEADER: token})[1]


def test_monitoring_is_closed(server):
    for path in ("monitoring", "monitoring/summary"):
        assert httpx.get(f"{server.url}{path}").status_code in (403, 404)


def test_the_queue_keeps_no_record_of_past_events_and_never_summarises_them(server, annotator_token):
    """Gradio's queue would keep 10,000 events with their sessions and rebuild a pandas summary of
    all of them after each event: time per rating that grew with the server's age."""
    queue = server.demo._queue
    before = queue.events_recorded
    for _ in range(5):
        assert call(server, "next_item", [server.collection], {TOKEN_HEADER: annotator_token})[0] == "complete"
    assert queue.events_recorded >= before + 5
    assert len(queue.event_analytics) <= 1
    assert queue.cached_event_analytics_summary == {"functions": {}}


def test_uploads_without_a_login_are_capped_per_address_and_a_login_is_not(server, annotator_token, monkeypatch):
    import app.access

    monkeypatch.setattr(app.access, "ANONYMOUS_UPLOADS", 3)
    monkeypatch.setattr(app.access, "UPLOADS", app.access.UploadQuota())

    def upload(headers=None):
        return httpx.post(f"{server.url}gradio_api/upload", headers=headers or {}, timeout=60,
                          files={"files": ("x.png", b"\x89PNG" + uuid.uuid4().bytes)})

    assert [upload().status_code for _ in range(3)] == [200] * 3
    refused = upload()
    assert refused.status_code == 429 and refused.text.startswith("Too many uploads from your address without a login: "
                                                                  "at most 3 files")
    assert upload({TOKEN_HEADER: annotator_token}).status_code == 200  # a live session is not counted
    assert upload({TOKEN_HEADER: "made-up"}).status_code == 429  # a made-up token is no session


def test_copies_handed_to_sessions_are_swept_when_old_and_all_at_start(server, tmp_path):
    import os

    from app.serve import sweep_own_files
    from app.session import private_files_root

    from gradio.utils import get_upload_folder

    from app.uploads import DOWNLOAD_PREFIX

    # The session's server has handed out copies since the suite began, which a long run makes
    # older than 900 s: they are made fresh, so this file is the one old file the sweep must find.
    earlier = [p for root in (private_files_root(), *Path(get_upload_folder()).glob(f"{DOWNLOAD_PREFIX}*"))
               for p in root.rglob("*") if p.is_file()]
    for path in earlier:
        os.utime(path)
    old, fresh = private_files_root() / "a" / "old.csv", private_files_root() / "b" / "fresh.csv"
    for path in (old, fresh):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    os.utime(old, (time.time() - 901, time.time() - 901))
    assert sweep_own_files(900) == 1
    assert not old.exists() and not old.parent.exists() and fresh.exists()
    assert sweep_own_files(None) >= 1 and not private_files_root().exists()


def test_what_is_alive_at_start_is_frozen_so_full_collections_walk_only_newer_objects(server):
    """A full garbage collection walked the ~700,000 objects of Gradio, torch and SQLAlchemy (0.4 s
    with the GIL held, every 5-30 s under a crowd: every request in flight stalled with it)."""
    import gc

    assert gc.get_freeze_count() > 100_000


def test_the_warm_up_freezes_what_it_loaded(monkeypatch):
    import gc

    import annotation.warmup
    from app import serve

    captured = {}
    monkeypatch.setattr(annotation.warmup, "start_warm_up", lambda *args: captured.setdefault("report", args[-1]))
    serve._warm_up("tiny", None)
    loaded = [[i] for i in range(5_000)]  # what a warm-up leaves alive (lists: gc never untracks them)
    before = gc.get_freeze_count()
    captured["report"]("warmed up in 3 s: models loaded.")
    assert gc.get_freeze_count() >= before + len(loaded)


def test_a_session_shares_the_pages_config_until_it_changes_a_component(server):
    """Each API call's session copied the page's dicts of ~430 components and their events: 27 KB
    of the 56 KB it kept. Now it shares them until it stores a changed component, which then goes
    into its own copy and never into the page's or another session's."""
    import gradio as gr

    holder = server.demo.state_holder
    first, second = holder[f"light-{uuid.uuid4()}"], holder[f"light-{uuid.uuid4()}"]
    page = server.demo.default_config
    assert first.blocks_config is page and second.blocks_config is page
    key, button = next((k, b) for k, b in page.blocks.items() if isinstance(b, gr.Button))
    changed = gr.Button(visible=False, render=False)
    first[key] = changed
    assert first.blocks_config is not page and first.blocks_config.blocks[key] is changed
    assert page.blocks[key] is button and second.blocks_config.blocks[key] is button
    state_key = next(k for k, b in page.blocks.items() if isinstance(b, gr.State))
    second[state_key] = {"kept": 1}  # a State's value lives in the session, not in the config
    assert second.blocks_config is page and second.state_data[state_key] == {"kept": 1}


def test_a_call_without_a_session_ends_its_session_and_a_named_session_is_kept(server):
    """Each plain-HTTP call's session stayed until 10,000 newer ones pushed it out (28 KB each),
    and its queue entries for ever. It now ends with its event, and its queue entries once its
    answer was read (swept when a later event ends); a session the caller named (a page,
    gradio_client) is kept."""
    sessions = server.demo.state_holder.session_data
    queue = server.demo._queue
    before = set(sessions)
    queued_before = set(queue.pending_event_ids_session)
    for n in range(3):
        event, data, _ = call(server, "perturb", [f"a dog runs on the grass {n}", "all", None, n, "en", ""])
        assert event == "complete", data
    deadline = time.monotonic() + 10  # the session ends just after the answer is sent
    while not set(sessions) <= before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert set(sessions) <= before
    assert len(set(queue.pending_event_ids_session) - queued_before) <= 1  # the last call's, until the next event
    assert len(set(queue.pending_messages_per_session) - queued_before) <= 1
    client = Client(server.url, verbose=False)
    client.predict(*["a cat sits on a mat", "all", None, 1, "en", ""], api_name="/perturb")
    assert client.session_hash in sessions
