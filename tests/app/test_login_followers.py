"""A login refreshes every tab in one event: `follow_login` gathers what each tab shows for the
login, `bind_login` runs them in turn as one `user_state.change` listener, and a follower that
fails keeps its own outputs and warns without stopping the others."""
from __future__ import annotations

import gradio as gr
import pytest

from app.session import bind_login, follow_login


class FakeRequest:
    """A request without a session: no token header, no cookie."""
    headers: dict = {}
    cookies: dict = {}


def login_listeners(demo: gr.Blocks, state: gr.State) -> list:
    return [fn for fn in demo.fns.values() if (state._id, "change") in fn.targets]


def test_followers_run_in_one_event_in_order_and_a_failing_one_keeps_its_outputs():
    seen = []

    def greets(login):
        return f"hello {login['name']}"

    def with_request(request: gr.Request):
        seen.append(request)
        return "first", "second"

    def fails():
        raise PermissionError("Log in as a researcher to see collections.")

    def by_component():  # Gradio's other return form: only the named outputs change
        return {f: "set"}

    with gr.Blocks() as demo:
        state = gr.State(None)
        a, b, c, d, e, f = (gr.Textbox() for _ in range(6))
        follow_login(state, greets, [state], [a])
        follow_login(state, fails, [], [b])
        follow_login(state, with_request, [], [c, d])
        follow_login(state, by_component, [], [e, f])
        bind_login(state)
    [listener] = login_listeners(demo, state)
    assert [o._id for o in listener.outputs] == [a._id, b._id, c._id, d._id, e._id, f._id]
    request = FakeRequest()
    with pytest.warns(UserWarning, match="Log in as a researcher"):
        values = listener.fn({"name": "ada", "role": "annotator"}, request)
    assert values[0] == "hello ada" and values[2:4] == ["first", "second"]
    assert values[1] == gr.skip()  # the failed follower's textbox stays as it was
    assert values[4:] == [gr.skip(), "set"]
    assert seen == [request]


def test_a_follower_reads_the_login_state_alone_and_no_component_is_written_twice():
    with gr.Blocks():
        state, other = gr.State(None), gr.State(None)
        box = gr.Textbox()
        with pytest.raises(ValueError, match="reads the login state only"):
            follow_login(state, lambda x: x, [other], [box])
        follow_login(state, lambda: "a", [], [box])
        follow_login(state, lambda: "b", [], [box])
        with pytest.raises(ValueError, match="same component"):
            bind_login(state)


def test_the_app_refreshes_every_tab_with_one_login_listener(monkeypatch, tmp_path):
    """The whole app: one listener on the login state (there were twenty), which writes every
    tab's notice and collection list."""
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    from app.engine import AppContext
    from app.ui import build_app

    demo = build_app(AppContext(profile="tiny", banner="", console=""))
    [joined] = [fn for fn in demo.fns.values() if fn.name == "on_login_change"]
    [(state_id, _)] = joined.targets
    assert login_listeners(demo, demo.blocks[state_id]) == [joined]
    written = {getattr(o, "elem_id", None) for o in joined.outputs}
    assert {"annotate-login-notice", "admin-login-notice", "train-login-notice", "score-df-collection"} <= written


def test_the_score_tab_counts_document_frequencies_only_for_a_chosen_collection(monkeypatch, tmp_path):
    """A login fills in the first collection for CIDEr's document frequencies; counting them (a
    pass over the collection's references, then a rescore) waits until a collection is the
    source, so logging in on another tab costs nothing there."""
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    from app.engine import AppContext
    from app.tabs.score import BATCH, COLLECTION, EXAMPLES
    from app.ui import build_app

    demo = build_app(AppContext(profile="tiny", banner="", console=""))
    counting = [fn for fn in demo.fns.values() if fn.name == "on_df_collection"]
    sources = {demo.blocks[block_id].elem_id for fn in counting for block_id, _ in fn.targets}
    assert sources == {"score-df-source", "score-df-collection"}
    count = counting[0].fn
    for source in (BATCH, EXAMPLES):
        assert count("app-test", source, None, FakeRequest()) == (None, gr.skip(), False)
    assert count("", COLLECTION, None, FakeRequest()) == (None, gr.skip(), False)
    state, message, counted = count("app-test", COLLECTION, None, FakeRequest())  # no login: refused in words
    assert state is None and counted is False and "log in" in message.lower()


def test_a_logout_blanks_every_result_an_account_put_on_the_page(monkeypatch, tmp_path):
    """Results of one account (correlations, the study's annotators, downloads, failure cases,
    typed guidelines) are blanked by the login change a logout makes, so the next person at the
    screen sees none of them (a trial found them all still shown after "Log out")."""
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    import pandas as pd

    from app.engine import AppContext
    from app.ui import build_app

    demo = build_app(AppContext(profile="tiny", banner="", console=""))
    [joined] = [fn for fn in demo.fns.values() if fn.name == "on_login_change"]
    values = dict(zip((getattr(o, "elem_id", None) for o in joined.outputs), joined.fn(None, FakeRequest())))
    blank_tables = ["analyze-correlations", "analyze-table7", "reproduce-table", "agreement-study",
                    "agreement-annotators", "qc-items", "failures-table"]
    for elem_id in blank_tables:
        assert isinstance(values[elem_id], pd.DataFrame) and values[elem_id].empty, elem_id
    for elem_id in ("data-export-file", "failures-gallery", "pairwise-download"):
        assert values[elem_id] is None, elem_id
    assert values["study-guidelines"] == "" and values["data-import-report"] == ""


def test_opening_a_researcher_tab_lists_collections_made_since_and_keeps_the_chosen_one(monkeypatch, tmp_path):
    """A collection made in another tab (an import, the Score tab) shows in Analyze, Failure
    cases, Data, Study and Pairwise when the tab is opened, without "↻" (a trial found the lists
    stale); the update names no value, so what is chosen (or being picked) stays, and its results."""
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    from app.engine import AppContext
    from app.session import TOKEN_HEADER
    from app.ui import build_app
    from annotation.captions import get_or_create_collection
    from annotation.database import database_session
    from annotation.people.accounts import create_user
    from annotation.people.auth_sessions import log_in

    demo = build_app(AppContext(profile="tiny", banner="", console=""))
    with database_session() as session:
        rita = create_user(session, "rita", "researcher", password="a long enough password 1")
        get_or_create_collection(session, rita, "first")
    request = FakeRequest()
    request.headers = {TOKEN_HEADER: log_in("rita", "a long enough password 1", "127.0.0.1").token}
    with database_session() as session:
        get_or_create_collection(session, session.merge(rita), "made later")

    openers = {}
    for fn in demo.fns.values():
        for block_id, event in fn.targets:
            if event == "select" and fn.fn.__qualname__.startswith("follow_collections."):
                [dropdown] = fn.outputs
                openers[dropdown.elem_id] = fn.fn
    assert set(openers) == {"analyze-collection", "failures-collection", "data-collection", "agreement-collection",
                            "pairwise-collection"}
    for elem_id, on_open in openers.items():
        kept = on_open(request)
        assert "made later" in [c[0] for c in kept.choices], elem_id
        assert "value" not in kept.constructor_args, elem_id  # the update sends no value: "first" stays
        assert on_open(FakeRequest()) == gr.skip(), elem_id  # logged out: the list stays as it was


def test_no_two_handlers_of_one_event_write_the_same_component(monkeypatch, tmp_path):
    """Handlers bound to the same event run at the same time, so a component both write shows
    whichever lands last: the Study tab's status was blanked that way by the quality panel's
    refresh beside "Show agreement". Chained steps (`.then`) run in order and are not counted."""
    from collections import defaultdict

    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    from app.engine import AppContext
    from app.ui import build_app

    demo = build_app(AppContext(profile="tiny", banner="", console=""))
    handlers = defaultdict(list)
    for fn in demo.fns.values():
        for target in fn.targets:
            if target[1] not in ("then", "success"):
                handlers[target].append(fn)
    clashes = []
    for (block, event), fns in handlers.items():
        writers = defaultdict(list)
        for fn in fns:
            for output in fn.outputs:
                writers[output._id].append(fn.name)
        clashes += [(getattr(demo.blocks.get(block), "elem_id", block), event,
                     getattr(demo.blocks[output], "elem_id", output), names)
                    for output, names in writers.items() if len(names) > 1]
    assert clashes == []
