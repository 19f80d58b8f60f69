"""Admin tab (admin role): accounts and one-time links, made in the browser, and the audit log.

Each button is one call into `annotation.people.admin.admin_action` (or `admin_screen` to reload),
one transaction as the request's session account; the library refuses anyone but an admin.
No password passes through here: a new account, an invite or a forced reset gives a one-time
link, on which its owner sets the password (`app.account_routes`).
"""
from __future__ import annotations

import functools

import gradio as gr
import pandas as pd

from annotation.people.accounts import ALL_ROLES
from annotation.people.admin import DEFAULT_LINK_HOURS, admin_action, admin_screen
from annotation.errors import user_message
from app.login_notice import login_notice
from app.session import account_id, follow_login

PURPOSE = ("**Admin**: create accounts or one-time invite links with a role, disable and re-enable accounts, "
           "change roles, force a password reset, and read the log of these actions.")
ACCOUNT_HEADERS = ["account", "role", "status", "created (UTC)"]
AUDIT_HEADERS = ["when (UTC)", "by", "action", "account", "detail"]


def _page_url(request: gr.Request) -> str:
    """The address of the page the request came from, to build links on."""
    return request.headers.get("referer", "") if request is not None else ""


def build(user_state: gr.State) -> None:
    login_notice("admin", PURPOSE, ("admin",), user_state)
    with gr.Row():
        name = gr.Textbox(label="Account name", elem_id="admin-name", scale=2)
        role = gr.Dropdown(list(ALL_ROLES), value="annotator", label="Role", elem_id="admin-role", scale=1)
        hours = gr.Number(DEFAULT_LINK_HOURS, label="Link valid for (hours)", precision=1, minimum=0.1,
                          elem_id="admin-hours", scale=1)
    with gr.Row():
        create = gr.Button("Create account (gives a link)", variant="primary", elem_id="admin-create")
        invite = gr.Button("Invite link for this role", elem_id="admin-invite")
        set_role = gr.Button("Change role", elem_id="admin-set-role")
        reset = gr.Button("Force password reset", elem_id="admin-reset")
        disable = gr.Button("Disable", variant="stop", elem_id="admin-disable")
        enable = gr.Button("Re-enable", elem_id="admin-enable")
    status = gr.Textbox(label="Result", interactive=False, elem_id="admin-status")
    link = gr.Textbox(label="One-time link (send it to the person; it is shown only now)", interactive=False,
                      buttons=["copy"], elem_id="admin-link")
    refresh = gr.Button("↻ accounts and log", elem_id="admin-refresh")
    accounts = gr.Dataframe(headers=ACCOUNT_HEADERS, interactive=False, label="Accounts", elem_id="admin-accounts")
    audit = gr.Dataframe(headers=AUDIT_HEADERS, interactive=False, label="Audit log (newest first)",
                         elem_id="admin-audit")
    outputs = [accounts, audit, status, link]

    def shown(screen):
        return screen.accounts, screen.audit, screen.message, screen.link

    def guarded(fn):
        @functools.wraps(fn)
        def wrapper(*args):
            try:
                return fn(*args)
            except (PermissionError, ValueError, LookupError) as exc:
                return gr.skip(), gr.skip(), user_message(exc), ""
        return wrapper

    def on_refresh(request: gr.Request):
        return shown(admin_screen(account_id(request)))

    def action(kind: str):
        def run(account_name, chosen_role, link_hours, request: gr.Request):
            return shown(admin_action(account_id(request), kind, _page_url(request), account_name or "",
                                      chosen_role, link_hours or DEFAULT_LINK_HOURS))
        return run

    for button, kind in ((create, "create"), (invite, "invite"), (set_role, "role"), (reset, "reset"),
                         (disable, "disable"), (enable, "enable")):
        button.click(guarded(action(kind)), [name, role, hours], outputs, api_visibility="private")
    def on_login(request: gr.Request):
        """A login loads the tables for an admin; anyone else sees no error before acting (the
        tab's notice says who may use it), and the server still refuses their clicks."""
        try:
            return on_refresh(request)
        except PermissionError:
            return pd.DataFrame(columns=ACCOUNT_HEADERS), pd.DataFrame(columns=AUDIT_HEADERS), "", ""

    refresh.click(guarded(on_refresh), None, outputs, api_visibility="private")
    follow_login(user_state, on_login, [], outputs)
