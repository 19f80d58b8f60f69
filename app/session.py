"""Who a request acts as, and the collection lists that follow the login.

A browser holds its session token in an HttpOnly cookie that the login route of `app.access`
sets; an API client sends the token its /login returned in the `X-CapLens-Token` header. Every
action reads the token from its own request and the library resolves it again
(`annotation.people.auth_sessions`): an expired or ended session must log in again. The `gr.State`
the tabs share only says whom the page shows as logged in, and refreshes the tabs when that
changes; nothing trusts it, so replaying a Gradio session hash logs nobody in.
"""
from __future__ import annotations

import inspect
import os
import weakref
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

import gradio as gr
from gradio.blocks import Block
from gradio.utils import get_upload_folder

from annotation.people.acting import collection_names
from annotation.people.auth_sessions import hand_out, session_account
from annotation.errors import user_message
from app.errors import as_gradio_error

TOKEN_COOKIE = "caplens-session"
TOKEN_HEADER = "x-caplens-token"
PRIVATE_FILES_DIR = "caplens-private"


def cross_site(request) -> bool:
    """Whether a browser sent this request for another site's page. The cookie must be
    SameSite=None on a Space (its page is a cross-site iframe), and Gradio's CORS allows any
    origin with credentials there, so such a request carries the cookie but must not use it."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site not in ("same-origin", "none")
    origin = request.headers.get("origin")
    return origin is not None and urlsplit(origin).netloc not in (request.headers.get("host"),
                                                                    request.headers.get("x-forwarded-host"))


def request_token(request) -> str | None:
    """The session token a request (gr.Request or Starlette's) carries: the header, else the
    cookie unless another site sent the request."""
    if request is None:
        return None
    token = request.headers.get(TOKEN_HEADER)
    if not token and not cross_site(request):
        token = request.cookies.get(TOKEN_COOKIE)
    return token or None


def client_address(request) -> str | None:
    """The address login throttling counts per client: the peer's, or behind a proxy that
    says whom it forwards (on a Hugging Face Space, or with CAPLENS_TRUST_FORWARDED=1) the
    first X-Forwarded-For entry."""
    if os.environ.get("SPACE_ID") or os.environ.get("CAPLENS_TRUST_FORWARDED") == "1":
        forwarded = (request.headers.get("x-forwarded-for") or "").split(",")[0].strip()
        if forwarded:
            return forwarded
    client = request.client
    return client.host if client else None


def account_id(request) -> int | None:
    """The id the library's actions take: None without a token (the action then says "Log in
    first"); NotLoggedIn when the token's session expired or was ended."""
    token = request_token(request)
    return None if token is None else session_account(token).id


def current_login(request) -> dict | None:
    """{name, role} of the request's live session, for the page to show; None when there is none."""
    try:
        account = session_account(request_token(request))
    except PermissionError:
        return None
    return {"name": account.name, "role": account.role}


def logged_in(request) -> bool:
    """Whether the request's session is live: handlers that show again what a logged-in action
    fetched earlier (kept in a gr.State) check it, so a replayed session hash sees nothing."""
    return current_login(request) is not None


def login_message(name: str, role: str) -> str:
    return f"Logged in as {name} ({role})."


def private_files_root() -> Path:
    """Where files handed to one session live: inside Gradio's upload folder, so Gradio serves
    them without copying them to its public cache; `app.access` guards their URLs."""
    return Path(get_upload_folder()) / PRIVATE_FILES_DIR


def private_copies(request, paths: list[str | None]) -> list[str | None]:
    """Copies of stored files (images, exports) that only this request's session may download."""
    return hand_out(request_token(request), paths, private_files_root())


def collection_choices(request, leading: tuple[str, ...] = (), choose_first: bool = True):
    """(dropdown update, message) listing the collections this account may see; `leading`
    choices (e.g. "all collections") come first. The researcher tabs refresh with it. Without
    `choose_first` (or with `leading`) the update leaves the choice as it is: no change event,
    and nothing picked meanwhile is overwritten."""
    try:
        available = collection_names(account_id(request))
    except PermissionError as exc:
        return gr.skip(), user_message(exc)
    if leading or not choose_first:
        return gr.Dropdown(choices=[*leading, *available]), ""
    return gr.Dropdown(choices=available, value=available[0] if available else None), ""


def collection_dropdown(request: gr.Request):
    """The collections of this account with the first chosen; empty when not logged in."""
    update, message = collection_choices(request)
    return gr.Dropdown(choices=[], value=None) if message else update


def collection_row(elem_prefix: str, run_label: str, middle) -> tuple:
    """One row of a researcher tab: a collection dropdown (free text allowed) and its refresh
    button, the control `middle()` makes, and the primary run button. Returns the four."""
    with gr.Row():
        collection = gr.Dropdown([], label="Collection", allow_custom_value=True, elem_id=f"{elem_prefix}-collection")
        refresh = gr.Button("↻ collections", scale=0)
        control = middle()
        run = gr.Button(run_label, variant="primary", elem_id=f"{elem_prefix}-button")
    return collection, refresh, control, run


def follow_collections(user_state: gr.State, refresh: gr.Button, collection: gr.Dropdown, status: gr.Textbox,
                       tab: gr.Tab, leading: tuple[str, ...] = ()) -> None:
    """Refill `collection` when the login changes, `refresh` is clicked or `tab` is opened (a
    collection made in another tab since shows up; what is chosen stays); problems go to `status`."""
    def choices(request: gr.Request):
        return collection_choices(request, leading)

    def on_open(request: gr.Request):  # the status keeps what the tab's last action said
        return collection_choices(request, leading, choose_first=False)[0]

    refresh.click(choices, None, [collection, status], api_visibility="private")
    tab.select(on_open, None, collection, api_visibility="private")
    follow_login(user_state, choices, [], [collection, status])


def forget_on_login_change(user_state: gr.State, blanks: dict) -> None:
    """Blank what an account's actions put on the page ({component: its empty value}: result
    tables, charts, downloads, typed text) when the login changes, by a logout or another
    account's login: the next person at this screen sees none of the last one's data."""
    follow_login(user_state, lambda: dict(blanks), [], list(blanks))


# What each tab refreshes when the login changes, gathered per login state until `bind_login`
# joins them into one event. Twenty `.change` listeners were twenty queue round trips and twenty
# re-renders of the page: a login took 7-10 s in the browser tests.
_FOLLOWERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def follow_login(user_state: gr.State, fn: Callable, inputs: list, outputs: list) -> None:
    """Run `fn(*inputs[, request])` -> `outputs` when `user_state` changes (once `bind_login` ran).
    `inputs` may name `user_state` alone; `fn` gets the request when it asks for a gr.Request."""
    if any(component is not user_state for component in inputs):
        raise ValueError("a login follower reads the login state only")
    wants_request = any(p.annotation in (gr.Request, "gr.Request") for p in inspect.signature(fn).parameters.values())
    _FOLLOWERS.setdefault(user_state, []).append((fn, bool(inputs), wants_request, list(outputs)))


def _by_component(result) -> bool:
    """Whether a handler returned {component: value} (not an update, which is a dict too)."""
    return isinstance(result, dict) and bool(result) and all(isinstance(k, Block) for k in result)


def bind_login(user_state: gr.State) -> None:
    """One `user_state.change` event running every follower in turn. A follower that fails leaves
    its own outputs as they are and says why in a warning; the others still refresh."""
    followers = _FOLLOWERS.pop(user_state, [])
    outputs = [component for *_, outs in followers for component in outs]
    if len({id(c) for c in outputs}) != len(outputs):
        raise ValueError("two login followers write the same component")

    def on_login_change(login, request: gr.Request):
        values = []
        for fn, reads_login, wants_request, outs in followers:
            args = ([login] if reads_login else []) + ([request] if wants_request else [])
            try:
                result = fn(*args)
            except Exception as exc:
                gr.Warning(as_gradio_error(exc).message)
                result = {}
            if _by_component(result) or isinstance(result, dict) and not result:
                values.extend(result.get(c, gr.skip()) for c in outs)  # Gradio's {component: value} form
            else:
                values.extend(result if len(outs) > 1 else [result])
        return values

    if followers:
        user_state.change(on_login_change, user_state, outputs, api_visibility="private")
