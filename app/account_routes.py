"""The HTTP routes for passwords other than logging in, beside `app.access`'s login route, so
a password never passes through a Gradio component or a Gradio session:

- POST /caplens/join (JSON {token, name, password, again}) uses a one-time link
  (`annotation.people.admin.use_link`): an invite makes the account, a reset sets its password. The
  page then logs in through /caplens/login with the same name and password.
- POST /caplens/password (JSON {current, new, again}) changes the password of the request's
  own session account (`annotation.people.admin.change_password`); every login of the account ends,
  so the cookie is deleted and the page asks to log in again.

Both refuse a request another site's page sent (`app.session.cross_site`).
"""
from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from annotation.people.admin import change_password, use_link
from annotation.people.auth_sessions import session_account
from annotation.errors import user_message
from app.session import TOKEN_COOKIE, cross_site, request_token

JOIN_PATH = "/caplens/join"
PASSWORD_PATH = "/caplens/password"


async def _fields(request: Request, *names: str) -> dict | JSONResponse:
    if cross_site(request):
        return JSONResponse({"ok": False, "message": "Use CapLens's own page."}, status_code=403)
    try:
        body = await request.json()
        return {name: str(body.get(name) or "") for name in names}
    except (ValueError, AttributeError):
        return JSONResponse({"ok": False, "message": "Send the fields as JSON."}, status_code=400)


def _same(password: str, again: str) -> JSONResponse | None:
    if password != again:
        return JSONResponse({"ok": False, "message": "The two passwords differ; type them again."}, status_code=400)
    return None


async def join_route(request: Request) -> JSONResponse:
    """{"ok", "message", "name"}: the account is ready to log in as `name`."""
    fields = await _fields(request, "token", "name", "password", "again")
    if isinstance(fields, JSONResponse):
        return fields
    if (differ := _same(fields["password"], fields["again"])) is not None:
        return differ
    try:
        name = await run_in_threadpool(use_link, fields["token"], fields["name"], fields["password"])
    except (PermissionError, ValueError, LookupError) as exc:
        return JSONResponse({"ok": False, "message": user_message(exc)}, status_code=400)
    return JSONResponse({"ok": True, "message": f"Welcome, {name}.", "name": name})


async def password_route(request: Request) -> JSONResponse:
    fields = await _fields(request, "current", "new", "again")
    if isinstance(fields, JSONResponse):
        return fields
    if (differ := _same(fields["new"], fields["again"])) is not None:
        return differ
    try:
        account = await run_in_threadpool(session_account, request_token(request))
        await run_in_threadpool(change_password, account.id, fields["current"], fields["new"])
    except (PermissionError, ValueError, LookupError) as exc:
        return JSONResponse({"ok": False, "message": user_message(exc)}, status_code=400)
    response = JSONResponse({"ok": True, "message": "Password changed. Log in again with the new one."})
    response.delete_cookie(TOKEN_COOKIE, path="/")
    return response


ROUTES = [Route(JOIN_PATH, join_route, methods=["POST"]), Route(PASSWORD_PATH, password_route, methods=["POST"])]
