"""What a tab behind a login says at its top: what it is for, which roles may use it, how to
get an account, and whom the page is logged in as (it follows the login)."""
from __future__ import annotations

import gradio as gr

from app.session import follow_login

HOW_TO_GET_AN_ACCOUNT = (
    "**No account?** Accounts are made by whoever runs this server, on its command line: "
    "`caplens user add NAME --role annotator` (or `researcher`, `admin`). On its first start with an empty "
    "database, `caplens serve` prints a researcher login `demo` and its random password on its console; a "
    "Hugging Face Space creates the admin named by its secrets `CAPLENS_ADMIN_USER` and `CAPLENS_ADMIN_PASSWORD`. ")
# On the Annotate tab the form's own hint, right below, says where (twice read as a stutter).
WHERE_TO_LOG_IN = {False: "Log in on the **Annotate** tab.", True: ""}


def notice_text(purpose: str, roles: tuple[str, ...], login: dict | None, login_here: bool = False) -> str:
    """The notice for `login` ({name, role} or None): the purpose, then whether this login
    may use the tab and, when it may not, what to do (`login_here`: the tab holds the login form)."""
    needs = " or ".join(roles)
    if login is None:
        return (f"{purpose}\n\n🔒 **Needs a login** ({needs}); you are not logged in. {HOW_TO_GET_AN_ACCOUNT}"
                f"{WHERE_TO_LOG_IN[login_here]}")
    who = f"{login['name']} ({login['role']})"
    if login["role"] in roles:  # where the login form is, its Account box already says who
        return purpose if login_here else f"{purpose}\n\nLogged in as {who}."
    return (f"{purpose}\n\n🔒 Logged in as {who}, but this tab needs the role {needs}. An admin can change it: "
            f"`caplens user set-role {login['name']} {roles[0]}`.")


def login_notice(elem_prefix: str, purpose: str, roles: tuple[str, ...], user_state: gr.State,
                 login_here: bool = False) -> gr.Markdown:
    """The notice of one tab (elem_id `<elem_prefix>-login-notice`), refreshed when the login changes."""
    notice = gr.Markdown(notice_text(purpose, roles, None, login_here), elem_id=f"{elem_prefix}-login-notice")

    def shown(login):
        return notice_text(purpose, roles, login, login_here)

    follow_login(user_state, shown, [user_state], [notice])
    return notice
