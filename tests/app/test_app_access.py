"""Authentication and exposure against the live server, over raw HTTP as an attacker would:
the API lists only the documented endpoints, internal handlers cannot be run by name, a
replayed Gradio session hash acts as nobody, roles are checked server-side, and stored images
and exports are served only to the session they were handed to."""
from __future__ import annotations

import json
import uuid

import httpx
import pytest
from gradio_client import Client

from app.api import ENDPOINTS
from app.session import TOKEN_COOKIE, TOKEN_HEADER


def fn_index(server, name: str, output=None) -> int:
    """The index of the page's (private) event handler whose function is `name` (and, when
    given, whose outputs are just `output`)."""
    found = [i for i, fn in server.demo.fns.items() if getattr(fn.fn, "__name__", None) == name
             and (output is None or fn.outputs == [output])]
    assert found, name
    return found[0]


def run_event(http: httpx.Client, server, name: str, data: list, session_hash: str | None = None,
              index: int | None = None) -> dict:
    """Run a handler the way the page does (join the queue by fn_index, read the event
    stream); the process_completed message."""
    session_hash = session_hash or uuid.uuid4().hex
    index = fn_index(server, name) if index is None else index
    joined = http.post(f"{server.url}gradio_api/queue/join",
                       json={"data": data, "fn_index": index, "session_hash": session_hash,
                             "event_data": None, "trigger_id": None})
    assert joined.status_code == 200, joined.text
    event_id = joined.json()["event_id"]
    with http.stream("GET", f"{server.url}gradio_api/queue/data", params={"session_hash": session_hash},
                     timeout=120) as stream:
        for line in stream.iter_lines():
            if not line.startswith("data:"):
                continue
            message = json.loads(line[5:])
            if message.get("msg") == "process_completed" and message.get("event_id") == event_id:
                return message
    raise AssertionError(f"no result for {name}")


def browser_login(server, name: str, password: str) -> httpx.Client:
    """An HTTP client holding the session cookie the login route sets, as a browser would."""
    http = httpx.Client(timeout=60)
    reply = http.post(f"{server.url}caplens/login", json={"name": name, "password": password})
    assert reply.status_code == 200 and reply.json()["ok"], reply.text
    return http


def export(http: httpx.Client, server, session_hash: str | None = None) -> list:
    """The Data tab's Export button: (file, summary, status)."""
    message = run_event(http, server, "on_export", ["ratings", "csv", "(all collections)"], session_hash)
    assert message["success"], message
    return message["output"]["data"]


def next_rating(http: httpx.Client, server) -> dict:
    """The Annotate tab: its collection list filled for this login (on page load), then the
    next item to rate."""
    session_hash = uuid.uuid4().hex
    run_event(http, server, "on_load", [], session_hash)
    return run_event(http, server, "on_annotate_collection", [server.collection, None], session_hash)


def test_the_api_lists_exactly_the_documented_endpoints(server):
    for query in ("", "?all_endpoints=true"):
        info = httpx.get(f"{server.url}gradio_api/info{query}").json()
        assert set(info["named_endpoints"]) == {f"/{name}" for name in ENDPOINTS}
        assert info["unnamed_endpoints"] == {}
    assert sum(fn.api_visibility == "public" for fn in server.demo.fns.values()) == len(ENDPOINTS)


def test_internal_handlers_cannot_be_run_by_name_or_directly(server):
    hidden = fn_index(server, "on_export")
    body = {"data": ["ratings", "csv", "(all collections)"], "session_hash": "x"}
    for route in ("call/on_export", "call/v2/on_export", "run/on_export", "api/on_export", "api/perturb"):
        assert httpx.post(f"{server.url}gradio_api/{route}", json=body).status_code == 404, route
    # The direct routes run only the events that skip the queue: naming another event by its
    # index is refused, whichever direct route carries it.
    for route in ("run/score", "run/perturb", "run/predict"):
        assert httpx.post(f"{server.url}gradio_api/{route}", json={**body, "fn_index": hidden}).status_code == 404
    assert httpx.get(f"{server.url}gradio_api/deep_link", params={"session_hash": "x"}).status_code == 404
    # The documented endpoints still answer on their named routes, and /perturb also directly.
    perturb = {"data": ["a red car", "masking", 0.4, 0, "en", ""]}
    called = httpx.post(f"{server.url}gradio_api/call/perturb", json=perturb)
    assert called.status_code == 200 and called.json()["event_id"]
    direct = httpx.post(f"{server.url}gradio_api/run/perturb", json={**perturb, "session_hash": "y"})
    assert direct.status_code == 200 and direct.json()["data"][0][0]["parent"] == "a red car"


def test_an_annotator_takes_and_rates_items_in_one_request_each_and_a_stranger_is_told_to_log_in(server):
    from annotation.database import database_session
    from db.models import Rating

    token = Client(server.url, verbose=False).predict(*server.annotator, api_name="/login")["token"]
    http = httpx.Client(base_url=f"{server.url}gradio_api/run/", headers={TOKEN_HEADER: token}, timeout=60)
    item = http.post("next_item", json={"data": [server.collection], "session_hash": "crowd"}).json()["data"][0]
    assert isinstance(item["caption_id"], int) and item["text"]
    rated = http.post("rate", json={"data": [item["caption_id"], 0.25, None, None, None], "session_hash": "crowd"})
    assert rated.status_code == 200, rated.text
    with database_session() as session:
        stored = session.get(Rating, rated.json()["data"][0]["rating_id"])
        assert (stored.caption_id, stored.overall, stored.annotator.name) == (item["caption_id"], 0.25, server.annotator[0])
        session.delete(stored)
    stranger = httpx.post(f"{server.url}gradio_api/run/next_item", json={"data": [server.collection], "session_hash": "s"})
    assert "Not logged in" in stranger.text


def test_only_the_chosen_events_may_skip_the_queue():
    import gradio as gr

    from app.access import allow_direct_events

    def on_export(value):
        return value

    with gr.Blocks() as demo:
        box = gr.Textbox()
        box.submit(on_export, box, box, queue=False)
    with pytest.raises(ValueError, match="skip the queue"):
        allow_direct_events(demo)
    assert demo.api_open is False  # Gradio's open REST routes are off whatever the check says


def test_heavy_work_is_bounded_in_total_and_per_client():
    from app.access import SERVER_BUSY, ClientBusy, ClientSlots

    slots = ClientSlots(per_client=1, workers=2, wait_s=0.05)
    slots.acquire("address:a")
    with pytest.raises(ClientBusy, match="already have 1"):
        slots.acquire("address:a")
    slots.acquire("address:b")
    with pytest.raises(ClientBusy) as refused:  # two running, whoever asks: the server is busy
        slots.acquire("address:c")
    assert str(refused.value) == SERVER_BUSY and "address:c" not in slots.running
    slots.release("address:a")
    slots.acquire("address:c")
    assert slots.running == {"address:b": 1, "address:c": 1}


def test_a_replayed_session_hash_logs_nobody_in(server):
    researcher = browser_login(server, *server.researcher)
    session_hash = uuid.uuid4().hex
    file, summary, status = export(researcher, server, session_hash)
    assert status.startswith("Exported") and summary["rows"] > 0
    # Same session hash, no cookie: the page's state is there, but the login is not.
    replay = export(httpx.Client(timeout=60), server, session_hash)
    assert replay[0] is None and "Log in first" in replay[2]


def test_roles_are_checked_server_side_for_page_handlers_and_api_tokens(server):
    annotator = browser_login(server, *server.annotator)
    assert "may not do this" in export(annotator, server)[2]
    token = Client(server.url, verbose=False).predict(*server.annotator, api_name="/login")["token"]
    with_header = httpx.Client(timeout=60, headers={TOKEN_HEADER: token})
    assert "may not do this" in export(with_header, server)[2]
    researcher_token = Client(server.url, verbose=False).predict(*server.researcher, api_name="/login")["token"]
    assert export(httpx.Client(timeout=60, headers={TOKEN_HEADER: researcher_token}), server)[2].startswith("Exported")


def test_exports_and_stored_images_are_served_only_to_their_session(server):
    from annotation.people.acting import acting
    from annotation.people.auth_sessions import session_account
    from annotation.image_store import image_path
    from db.models import Image

    researcher = browser_login(server, *server.researcher)
    file = export(researcher, server)[0]
    assert "caplens-private" in file["url"]
    fetched = researcher.get(file["url"])
    assert fetched.status_code == 200 and "rating_id" in fetched.text.splitlines()[0]
    assert httpx.get(file["url"]).status_code == 404  # no session
    annotator = browser_login(server, *server.annotator)
    assert annotator.get(file["url"]).status_code == 404  # another session
    # The rating queue's image: a copy for the annotator's session only.
    screen = next_rating(annotator, server)
    image = screen["output"]["data"][0]
    assert image is not None and "caplens-private" in image["url"]
    assert annotator.get(image["url"]).content[:4] == b"\x89PNG"
    assert httpx.get(image["url"]).status_code == 404
    assert researcher.get(image["url"]).status_code == 404
    # The image store itself is never served, whoever asks.
    with acting(session_account(annotator.cookies[TOKEN_COOKIE]).id) as (session, _user):
        stored = str(image_path(session.query(Image).first()))
    for client in (httpx.Client(), annotator):
        assert client.get(f"{server.url}gradio_api/file={stored}").status_code in (403, 404)
    # Logging out ends the session and its files, also for a copy of its cookie.
    kept = httpx.Client(timeout=60, cookies={TOKEN_COOKIE: annotator.cookies[TOKEN_COOKIE]})
    assert annotator.post(f"{server.url}caplens/logout").status_code == 200
    assert TOKEN_COOKIE not in annotator.cookies
    assert kept.get(image["url"]).status_code == 404
    assert "log in again" in export(kept, server)[2]


def test_login_route_sets_an_http_only_cookie_and_says_why_it_refused(server):
    http = httpx.Client(timeout=60)
    wrong = http.post(f"{server.url}caplens/login", json={"name": server.annotator[0], "password": "not-it"})
    assert wrong.status_code == 401 and wrong.json() == {"ok": False, "message": "Wrong user name or password."}
    assert TOKEN_COOKIE not in http.cookies
    assert http.post(f"{server.url}caplens/login", content=b"name=a&password=b").status_code == 400
    right = http.post(f"{server.url}caplens/login", json={"name": server.annotator[0], "password": server.annotator[1]})
    assert right.json() == {"ok": True, "message": f"Logged in as {server.annotator[0]} (annotator)."}
    cookie = right.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Path=/" in cookie
    first = http.cookies[TOKEN_COOKIE]
    assert first not in right.text
    http.post(f"{server.url}caplens/login", json={"name": server.researcher[0], "password": server.researcher[1]})
    assert http.cookies[TOKEN_COOKIE] != first  # a new login replaces the page's session and ends the old one
    assert "log in again" in export(httpx.Client(timeout=60, cookies={TOKEN_COOKIE: first}), server)[2]


def test_the_login_route_throttles_and_says_when_to_retry(server, monkeypatch):
    from sqlalchemy import delete

    from annotation.people import auth_sessions
    from annotation.people.auth_sessions import FREE_FAILURES_PER_ACCOUNT

    from annotation.database import database_session
    from db.models import LoginFailure

    # A first wait longer than a loaded machine takes for the attempts (each hashes a password),
    # so that the 6th to 8th attempts fall inside it however slow the machine is.
    monkeypatch.setattr(auth_sessions, "FIRST_WAIT_S", 60)
    http = httpx.Client(timeout=60)
    try:
        codes = [http.post(f"{server.url}caplens/login", json={"name": "rater1", "password": f"guess-{n}"})
                 for n in range(FREE_FAILURES_PER_ACCOUNT + 3)]
        assert [c.status_code for c in codes] == [401] * FREE_FAILURES_PER_ACCOUNT + [429] * 3
        assert int(codes[-1].headers["Retry-After"]) >= 1 and "try again in" in codes[-1].json()["message"]
        right = http.post(f"{server.url}caplens/login", json={"name": "rater1", "password": "rater-password-1"})
        assert right.status_code == 429  # the right password waits too
    finally:  # this address (127.0.0.1) is every test's: forget its failures
        with database_session() as session:
            session.execute(delete(LoginFailure))


@pytest.mark.parametrize("headers", [{"sec-fetch-site": "cross-site"}, {"origin": "https://elsewhere.example"}])
def test_a_request_another_site_sends_does_not_use_the_cookie(server, headers):
    researcher = browser_login(server, *server.researcher)
    file = export(researcher, server)[0]
    same_site = {"sec-fetch-site": "same-origin", "origin": server.url.rstrip("/")}
    assert researcher.get(file["url"], headers=same_site).status_code == 200
    forged = httpx.Client(timeout=60, cookies=researcher.cookies, headers=headers)
    assert forged.get(file["url"]).status_code == 404
    assert "Log in first" in export(forged, server)[2]
    login = forged.post(f"{server.url}caplens/login",
                        json={"name": server.annotator[0], "password": server.annotator[1]})
    assert login.status_code == 403 and TOKEN_COOKIE not in login.headers.get("set-cookie", "")
    assert forged.post(f"{server.url}caplens/logout").status_code == 403
    assert researcher.get(file["url"]).status_code == 200  # the forged logout ended nothing
