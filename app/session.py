"""The login of one browser (or API client) session: a `gr.State` holding the account's id,
name and role, shared by every tab. The account itself is re-read by the library on each
action (`annotation.acting`)."""
from __future__ import annotations

import gradio as gr

from annotation.acting import collection_names, log_in
from annotation.errors import user_message


def login(name: str, password: str) -> tuple[dict | None, str]:
    """(session state, message) for a login attempt; the state is None when it failed."""
    try:
        account = log_in(name, password)
    except PermissionError as exc:
        return None, user_message(exc)
    return ({"id": account.id, "name": account.name, "role": account.role},
            f"Logged in as {account.name} ({account.role}).")


def account_id(user_state: dict | None) -> int | None:
    """The id the library's actions take (None: not logged in)."""
    return (user_state or {}).get("id")


def collection_choices(user_state: dict | None, leading: tuple[str, ...] = ()):
    """(dropdown update, message) listing the collections this account may see; `leading`
    choices (e.g. "all collections") come first. The researcher tabs refresh with it."""
    try:
        available = collection_names(account_id(user_state))
    except PermissionError as exc:
        return gr.skip(), user_message(exc)
    if leading:
        return gr.Dropdown(choices=[*leading, *available]), ""
    return gr.Dropdown(choices=available, value=available[0] if available else None), ""


def collection_dropdown(user_state: dict | None):
    """The collections of this account with the first chosen; empty when not logged in."""
    update, message = collection_choices(user_state)
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
                       leading: tuple[str, ...] = ()) -> None:
    """Refill `collection` when the login changes or `refresh` is clicked; problems go to `status`."""
    def choices(state):
        return collection_choices(state, leading)

    for trigger in (refresh.click, user_state.change):
        trigger(choices, user_state, [collection, status], api_visibility="private")
