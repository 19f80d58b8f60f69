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
  documented endpoints (`app.api.ENDPOINTS`); /gradio_api/run and /gradio_api/api, which run
  any event directly, and /gradio_api/deep_link, which would copy out every value of the
  session whose hash it is given, answer 404. The page runs its private handlers through the
  queue like every Gradio page; each of them acts as the session of its own request.
"""
from __future__ import annotations

import os
from pathlib import Path

from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from annotation.auth_sessions import SESSION_LIFETIME, TooManyAttempts, log_in, log_out, may_fetch
from app.api import ENDPOINTS
from app.session import TOKEN_COOKIE, client_address, cross_site, login_message, private_files_root, request_token

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
        await self.app(scope, receive, send)

    async def _refused(self, scope) -> bool:
        path = scope["path"]
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
        return route in ("run", "api", "deep_link")


def app_kwargs() -> dict:
    """For `Blocks.launch(app_kwargs=...)`: the login routes and the guard."""
    return {"routes": [Route(LOGIN_PATH, login_route, methods=["POST"]),
                       Route(LOGOUT_PATH, logout_route, methods=["POST"])],
            "middleware": [Middleware(Guard)]}
