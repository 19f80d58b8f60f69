"""The HTTP side of logging in, and what the server refuses: added to Gradio's FastAPI app
through `launch(app_kwargs=app_kwargs())`.

- POST /caplens/login (JSON {name, password}) logs in through the library (throttled per
  account and per client) and puts the session token in an HttpOnly cookie, so the token never
  passes through a Gradio component or a Gradio session; the Annotate tab's login button calls
  it from the page. POST /caplens/logout ends the session and deletes the cookie.
- Files handed to a session (`app.session.private_copies`) are served only to a request that
  carries that session's token (cookie or X-CapLens-Token header); anyone else gets 404. A
  request another site's page sent does not use the cookie (`app.session.cross_site`), and
  the login and logout routes refuse it.
- The named routes that run an event by name (/gradio_api/call/…) answer only for the
  documented endpoints (`app.api.ENDPOINTS`); /gradio_api/api and /gradio_api/deep_link, which
  would copy out every value of the session whose hash it is given, answer 404. The page runs
  its private handlers through the queue like every Gradio page; each of them acts as the
  session of its own request.
- /gradio_api/run runs an event directly, beside the queue, only where the event skips the
  queue (the app turns Gradio's open REST routes off: `allow_direct_events`): the /score and
  /perturb endpoints, the annotation endpoints (/next_item, /rate, /next_pair, /judge_pair)
  and the Score tab's live scoring (`DIRECT_HANDLERS`, checked at start).
- Uploads (/gradio_api/upload) of a client without a live session are counted per address:
  at most `ANONYMOUS_UPLOADS` files and `ANONYMOUS_UPLOAD_BYTES` bytes per
  `UPLOAD_WINDOW_S`; more is answered 429 in words (Gradio's sweep, `app.ui.CACHE_SWEEP`,
  removes them within minutes). A logged-in session's uploads are not counted.
- CPU-heavy work (scoring, perturbing, analyzing uploaded files: `HEAVY_HANDLERS`) runs in one
  concurrency group of `HEAVY_WORKERS` workers, apart from the annotators' events, and each
  client (a logged-in account, else an address) has at most `HEAVY_PER_CLIENT` such requests
  running; a further one is refused at once in words (`limit_heavy_work`). So a visitor
  sending many requests waits for, or is refused, their own work, never the annotators'.
  Direct calls count too: at most `HEAVY_WORKERS` heavy requests run at once by either route
  (one waits up to `HEAVY_WAIT_S` for a turn, then is refused in words).
"""
from __future__ import annotations

import functools
import inspect
import logging
import os
import threading
from contextlib import contextmanager
from pathlib import Path

from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from annotation.people.acting import NotLoggedIn
from annotation.people.auth_sessions import SESSION_LIFETIME, TooManyAttempts, log_in, log_out, may_fetch, session_account
from app import account_routes
from app.api import DIRECT_ENDPOINTS, ENDPOINTS
from app.session import TOKEN_COOKIE, client_address, cross_site, login_message, private_files_root, request_token

LOG = logging.getLogger(__name__)
UPLOAD_PATH = "/gradio_api/upload"
ANONYMOUS_UPLOADS = 200
ANONYMOUS_UPLOAD_BYTES = 2**30
UPLOAD_WINDOW_S = 900
LOGIN_PATH = "/caplens/login"
LOGOUT_PATH = "/caplens/logout"
GRADIO_API = "/gradio_api/"


def _secure(request: Request) -> bool:
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto") == "https"


async def login_route(request: Request) -> JSONResponse:
    """{"ok", "message"}; the token goes only into the HttpOnly cookie."""
    if cross_site(request):
        return JSONResponse({"ok": False, "message": "Log in from CapLens's own page."}, status_code=403)
    try:
        body = await request.json()
        name, password = str(body.get("name") or ""), str(body.get("password") or "")
    except (ValueError, AttributeError):
        return JSONResponse({"ok": False, "message": "Send the user name and password as JSON."}, status_code=400)
    try:
        login = await run_in_threadpool(log_in, name, password, client_address(request))
    except TooManyAttempts as exc:
        return JSONResponse({"ok": False, "message": str(exc)}, status_code=429,
                            headers={"Retry-After": str(exc.retry_after)})
    except PermissionError as exc:
        return JSONResponse({"ok": False, "message": str(exc)}, status_code=401)
    await run_in_threadpool(log_out, request_token(request), private_files_root())  # the login it replaces
    response = JSONResponse({"ok": True, "message": login_message(login.account.name, login.account.role)})
    secure = _secure(request)  # a Space runs in a cross-site iframe: its cookie must be SameSite=None; Secure
    response.set_cookie(TOKEN_COOKIE, login.token, max_age=int(SESSION_LIFETIME.total_seconds()), path="/",
                        httponly=True, secure=secure, samesite="none" if secure else "lax")
    return response


async def logout_route(request: Request) -> JSONResponse:
    if cross_site(request):
        return JSONResponse({"ok": False, "message": "Log out from CapLens's own page."}, status_code=403)
    await run_in_threadpool(log_out, request_token(request), private_files_root())
    response = JSONResponse({"ok": True, "message": "Not logged in."})
    response.delete_cookie(TOKEN_COOKIE, path="/")
    return response


def _served_file(rest: str) -> Path | None:
    """The file a /gradio_api/file= (or file/) path names, resolved as Gradio resolves it."""
    if not rest.startswith(("file=", "file/")):
        return None
    return Path(os.path.abspath(rest[len("file="):])).resolve()


class Guard:
    """ASGI middleware: 404 for what the module docstring lists, everything else untouched."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and await self._refused(scope):
            await PlainTextResponse("Not found.", status_code=404)(scope, receive, send)
            return
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"].endswith(UPLOAD_PATH):
            refusal = await run_in_threadpool(UPLOADS.refusal, Request(scope))
            if refusal:
                await PlainTextResponse(refusal, status_code=429,
                                        headers={"Retry-After": str(UPLOAD_WINDOW_S)})(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _refused(self, scope) -> bool:
        path = scope["path"]
        if path.rstrip("/").endswith("/monitoring") or "/monitoring/" in path:
            return True  # Gradio's traffic dashboard (also switched off at launch)
        at = path.find(GRADIO_API)
        if at < 0:
            return False
        rest = path[at + len(GRADIO_API):]
        served = _served_file(rest)
        if served is not None:
            if not served.is_relative_to(private_files_root().resolve()):
                return False
            return not await run_in_threadpool(may_fetch, request_token(Request(scope)), served, private_files_root())
        route, _, tail = rest.partition("/")
        if route == "call":
            return tail.removeprefix("v2/").split("/")[0] not in ENDPOINTS
        if route == "run":  # the direct endpoints by name; the page's live scoring as "predict" with its event
            return tail.split("/")[0] not in (*DIRECT_ENDPOINTS, "predict")
        return route in ("api", "deep_link")


class UploadQuota:
    """Uploads per address without a live session within the last `window_s` seconds."""

    def __init__(self):
        self.sent: dict[str, list[tuple[float, int]]] = {}
        self.lock = threading.Lock()

    def refusal(self, request: Request) -> str | None:
        """None when this upload may go on (and it is counted), else the message saying why not."""
        import time

        key = client_key(request)
        if key.startswith("account:"):
            return None
        size = int(request.headers.get("content-length") or 0)
        now = time.monotonic()
        with self.lock:
            for other in [k for k, sent in self.sent.items() if sent[-1][0] < now - UPLOAD_WINDOW_S]:
                del self.sent[other]
            recent = [(at, n) for at, n in self.sent.get(key, []) if at >= now - UPLOAD_WINDOW_S]
            if len(recent) >= ANONYMOUS_UPLOADS or sum(n for _, n in recent) + size > ANONYMOUS_UPLOAD_BYTES:
                LOG.warning("upload refused: %s sent %d uploads, %d bytes in %d s", key, len(recent),
                            sum(n for _, n in recent), UPLOAD_WINDOW_S)
                return (f"Too many uploads from your address without a login: at most {ANONYMOUS_UPLOADS} files and "
                        f"{ANONYMOUS_UPLOAD_BYTES // 2**20} MB in {UPLOAD_WINDOW_S // 60} minutes. Try again later, "
                        f"or log in.")
            self.sent[key] = [*recent, (now, size)]
        return None


UPLOADS = UploadQuota()


def app_kwargs() -> dict:
    """For `Blocks.launch(app_kwargs=...)`: the login routes (and `app.account_routes`'s
    one-time links and password change) and the guard."""
    return {"routes": [Route(LOGIN_PATH, login_route, methods=["POST"]),
                       Route(LOGOUT_PATH, logout_route, methods=["POST"]), *account_routes.ROUTES],
            "middleware": [Middleware(Guard)]}


# The handlers whose work grows with what a caller sends (module, function name).
HEAVY_HANDLERS = frozenset({
    ("app.api", "score_api"), ("app.api", "perturb_endpoint"),
    ("app.tabs.score", "on_score"), ("app.tabs.score", "on_rows_file"), ("app.tabs.score", "on_images"),
    ("app.tabs.perturb", "on_perturb"),
    *(("app.tabs.analyze_files", name) for name in ("on_correlation", "on_length", "on_pascal", "on_foil",
                                                     "on_specificity", "on_retrieval")),
})
HEAVY_CONCURRENCY_ID = "caplens-heavy"
HEAVY_WORKERS = 2
HEAVY_PER_CLIENT = 1  # an address behind which a class works anonymously shares it: logged-in users count apart
HEAVY_WAIT_S = 30
BUSY = "You already have {n} scoring or analysis request(s) running; wait for it to finish, then try again."
SERVER_BUSY = "The server is busy scoring for others; try again in a minute."
# The events that skip the queue: the direct endpoints of app.api and the Score tab's live scoring.
DIRECT_HANDLERS = frozenset({("app.api", "score_api"), ("app.api", "perturb_endpoint"), ("app.tabs.score", "on_score"),
                             *(("app.api", f"{name}_endpoint") for name in ("next_item", "rate", "next_pair", "judge_pair"))})


class ClientSlots:
    """How many heavy requests each client has running: `acquire(key)` takes one of its
    `per_client` slots or raises ClientBusy; `release(key)` gives it back."""

    def __init__(self, per_client: int, workers: int = HEAVY_WORKERS, wait_s: float = HEAVY_WAIT_S):
        self.per_client = per_client
        self.running: dict[str, int] = {}
        self.lock = threading.Lock()
        self.turns = threading.BoundedSemaphore(workers)  # all clients, queued and direct calls alike
        self.wait_s = wait_s

    def acquire(self, key: str) -> None:
        with self.lock:
            if self.running.get(key, 0) >= self.per_client:
                raise ClientBusy(BUSY.format(n=self.per_client))
            self.running[key] = self.running.get(key, 0) + 1
        if not self.turns.acquire(timeout=self.wait_s):
            self._forget(key)
            raise ClientBusy(SERVER_BUSY)

    def release(self, key: str) -> None:
        self.turns.release()
        self._forget(key)

    def _forget(self, key: str) -> None:
        with self.lock:
            self.running[key] -= 1
            if not self.running[key]:
                del self.running[key]


class ClientBusy(PermissionError):
    """A client over its number of heavy requests at once; the message is for the user."""


def client_key(request) -> str:
    """Whom a heavy request counts against: its live session's account, else its address (a
    made-up token counts as no token)."""
    token = request_token(request) if request is not None else None
    if token:
        try:
            return f"account:{session_account(token).id}"
        except NotLoggedIn:
            pass
    return f"address:{client_address(request) if request is not None else None}"


def _per_client(fn, slots: ClientSlots):
    """`fn` run only while its caller holds one of its slots (the request is Gradio's, from the
    event's context); refused in words (ClientBusy as a gr.Error) when the caller has none left."""
    from gradio.context import LocalContext

    from app.errors import as_gradio_error

    @contextmanager
    def slot():
        key = client_key(LocalContext.request.get(None))
        try:
            slots.acquire(key)
        except ClientBusy as exc:
            LOG.warning("heavy request refused: %s already has %d running", key, slots.per_client)
            raise as_gradio_error(exc) from None
        try:
            yield
        finally:
            slots.release(key)

    if inspect.isgeneratorfunction(fn):
        def wrapper(*args, **kwargs):
            with slot():
                yield from fn(*args, **kwargs)
    elif inspect.iscoroutinefunction(fn):
        async def wrapper(*args, **kwargs):
            with slot():
                return await fn(*args, **kwargs)
    else:
        def wrapper(*args, **kwargs):
            with slot():
                return fn(*args, **kwargs)
    wrapper = functools.wraps(fn)(wrapper)
    wrapper.caplens_heavy = True
    return wrapper


def limit_heavy_work(demo, per_client: int = HEAVY_PER_CLIENT, workers: int = HEAVY_WORKERS) -> ClientSlots:
    """Put every handler of HEAVY_HANDLERS in the heavy concurrency group, `per_client` at once
    per client (before launch). ValueError when one of them is not among the app's events (a
    renamed handler must not silently lose its limit)."""
    slots = ClientSlots(per_client, workers)
    found = set()
    for block_fn in demo.fns.values():
        if block_fn.fn is None or getattr(block_fn.fn, "caplens_heavy", False):
            continue
        original = inspect.unwrap(block_fn.fn)
        where = (getattr(original, "__module__", None), getattr(original, "__name__", None))
        if where in HEAVY_HANDLERS:
            found.add(where)
            block_fn.fn = _per_client(block_fn.fn, slots)
            block_fn.concurrency_id = HEAVY_CONCURRENCY_ID
            block_fn.concurrency_limit = workers
    missing = HEAVY_HANDLERS - found
    if missing:
        raise ValueError(f"heavy handlers not found among the app's events: {sorted(missing)}")
    return slots


def allow_direct_events(demo) -> None:
    """Let /gradio_api/run run exactly the events that skip the queue: Gradio's open REST routes
    (which would run any event, private ones too, beside the queue) are turned off, so that
    route refuses every queued event. ValueError when the events skipping the queue are not
    DIRECT_HANDLERS (a new one must be chosen here, with its limits, not by accident)."""
    demo.api_open = False
    direct = {(getattr(inspect.unwrap(fn.fn), "__module__", None), getattr(inspect.unwrap(fn.fn), "__name__", None))
              for fn in demo.fns.values() if fn.fn is not None and not fn.queue}
    if direct != DIRECT_HANDLERS:
        raise ValueError(f"events that skip the queue: {sorted(direct)}; expected {sorted(DIRECT_HANDLERS)}")
