"""Annotate tab (login required): rating queue, transcreation queue, critical-object marking.

Every action is one call into `annotation.queue_screens`, one database transaction as the
account of the request's session (`app.session`); the library checks the account's role
itself. Logging in and out go from the page to the routes of `app.access`, so the password and
the session token never pass through a Gradio component.
"""
from __future__ import annotations

import functools

import gradio as gr

from annotation import queue_screens
from annotation.errors import user_message
from app.langs import LANGUAGES
from annotation.accounts import ALL_ROLES
from app.login_notice import login_notice
from app.session import account_id, collection_dropdown, current_login, login_message, private_copies

# The login button posts to /caplens/login (relative to the page's <base>), which sets the
# session cookie; the Python handler then only receives the user name and the route's
# message (empty on success) in place of the password.
LOGIN_JS = """
async (name, password) => {
  let message = "The server did not answer; try again.";
  try {
    const reply = await fetch("caplens/login", {method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json"}, body: JSON.stringify({name: name, password: password})});
    const answer = await reply.json();
    message = answer.ok ? "" : answer.message;
  } catch (error) {}
  return [name, message];
}
"""
PURPOSE = ("**Annotate**: rate captions (overall and, optionally, fluency, relevance and descriptiveness), "
           "transcreate them into other languages, and mark their critical objects. Log in below.")
COOKIE_REFUSED = ("Logged in, but this browser did not keep the login cookie. If the app is embedded in another "
                  "site (a Space on huggingface.co), open it at its own address, or allow its cookies.")
LOGOUT_JS = """
async () => {
  try { await fetch("caplens/logout", {method: "POST", credentials: "same-origin"}); } catch (error) {}
  return [];
}
"""

# Alt+N save and next, Alt+S skip, Alt+B back; digits 0-9 set the overall score to 0.0-0.9
# and "m" to 1.0 when no text field has the focus. Arrow keys move a focused slider.
KEYBOARD_JS = """
() => {
  if (window.caplensKeys) return;
  window.caplensKeys = true;
  const click = (id) => { const b = document.getElementById(id); if (b) b.click(); };
  const setOverall = (value) => {
    const input = document.querySelector('#rate-overall input[type=number]');
    if (!input) return;
    input.value = value;
    input.dispatchEvent(new Event('input', {bubbles: true}));
    input.dispatchEvent(new Event('change', {bubbles: true}));
  };
  document.addEventListener('keydown', (e) => {
    const tab = document.getElementById('rate-panel');
    if (!tab || tab.offsetParent === null) return;
    if (e.altKey && e.key.toLowerCase() === 'n') { e.preventDefault(); click('rate-save'); return; }
    if (e.altKey && e.key.toLowerCase() === 's') { e.preventDefault(); click('rate-skip'); return; }
    if (e.altKey && e.key.toLowerCase() === 'b') { e.preventDefault(); click('rate-back'); return; }
    const typing = ['TEXTAREA', 'INPUT'].includes(document.activeElement?.tagName)
      && document.activeElement.type !== 'range';
    if (typing || e.altKey || e.ctrlKey || e.metaKey) return;
    if (/^[0-9]$/.test(e.key)) { setOverall((parseInt(e.key, 10) / 10).toFixed(1)); }
    else if (e.key === 'm') { setOverall('1'); }
  });
}
"""


ASPECTS = ("fluency", "relevance", "descriptiveness")


def _optional(value: float | None, name: str, use: bool, touched: list) -> float | None:
    """An aspect's slider value when the annotator rates aspects and moved this slider (or it
    holds their earlier value): else None, stored as "not rated"."""
    return float(value) if use and name in touched and value is not None else None


def _guarded(fn, before: int, after: int = 0):
    """A queue handler whose bad request (no right, no such item) leaves the screen as it is
    and says why in the status field (`before` outputs precede it, `after` follow it)."""
    @functools.wraps(fn)  # Gradio reads the signature to pass the gr.Request
    def wrapper(*args):
        try:
            return fn(*args)
        except (PermissionError, ValueError, LookupError) as exc:
            return (*[gr.skip()] * before, user_message(exc), *[gr.skip()] * after)
    return wrapper


def build(user_state: gr.State):
    """The Annotate tab. `user_state` is whom the page shows as logged in, which the other tabs
    follow. Returns `restore(demo)`, which shows on page load the login the page still has."""
    login_notice("annotate", PURPOSE, ALL_ROLES, user_state)
    touched = gr.State([])  # aspects the annotator set on the shown caption (others are stored as not rated)
    held_back = gr.State("")  # a transcreation held back by the language check: Submit again saves it

    with gr.Row():
        name = gr.Textbox(label="User name", elem_id="login-name", scale=2)
        password = gr.Textbox(label="Password", type="password", elem_id="login-password", scale=2)
        login_button = gr.Button("Log in", variant="primary", elem_id="login-button", scale=1)
        logout_button = gr.Button("Log out", scale=1)
    login_status = gr.Textbox(label="Account", interactive=False, value="Not logged in.", elem_id="login-status")
    collection = gr.Dropdown([], label="Collection", interactive=True, elem_id="annotate-collection")

    with gr.Tabs(visible=False) as work_tabs:
        with gr.Tab("Rate", id="rate", elem_id="rate-panel"):
            gr.Markdown("Rate how well the caption describes the image (0 = wrong, 1 = perfect). "
                        "Keys: digits 0–9 set 0.0–0.9, **m** sets 1.0, arrows move a focused slider, "
                        "**Alt+N** save and next, **Alt+S** skip, **Alt+B** back.")
            with gr.Row():
                rate_image = gr.Image(label="Image", interactive=False, height=320, elem_id="rate-image")
                with gr.Column():
                    rate_caption = gr.Textbox(label="Caption", interactive=False, lines=3, elem_id="rate-caption")
                    with gr.Row():
                        rate_language = gr.Textbox(label="Language", interactive=False, elem_id="rate-language",
                                                   min_width=120)
                        rate_caption_id = gr.Number(label="Caption id", interactive=False, precision=0,
                                                    elem_id="rate-caption-id", min_width=120)
                    rate_references = gr.Textbox(label="Reference captions of this image", interactive=False,
                                                 lines=2, visible=False, elem_id="rate-references")
                    overall = gr.Slider(0, 1, value=0.5, step=0.05, label="Overall (0–1)", elem_id="rate-overall")
                    use_aspects = gr.Checkbox(value=False, label="Also rate fluency / relevance / descriptiveness",
                                              elem_id="rate-use-aspects")
                    with gr.Column(visible=False) as aspect_box:
                        fluency = gr.Slider(0, 1, value=0.5, step=0.05, label="Fluency", elem_id="rate-fluency")
                        relevance = gr.Slider(0, 1, value=0.5, step=0.05, label="Relevance", elem_id="rate-relevance")
                        descriptiveness = gr.Slider(0, 1, value=0.5, step=0.05, label="Descriptiveness",
                                                    elem_id="rate-descriptiveness")
            with gr.Row():
                back_button = gr.Button("← Back", elem_id="rate-back")
                skip_button = gr.Button("Skip", elem_id="rate-skip")
                save_button = gr.Button("Save and next →", variant="primary", elem_id="rate-save")
            rate_status = gr.Textbox(label="Progress", interactive=False, elem_id="rate-status")

        with gr.Tab("Transcreate", id="transcreate", elem_id="transcreate-panel") as tc_tab:
            target = gr.Dropdown([(n, c) for c, n in LANGUAGES.items() if c != "en"], value="de",
                                 label="Target language")
            instructions = gr.Markdown(elem_id="transcreate-instructions")
            with gr.Row():
                tc_image = gr.Image(label="Image", interactive=False, height=280)
                with gr.Column():
                    tc_source = gr.Textbox(label="English caption", interactive=False, lines=2)
                    tc_score = gr.Number(label="Its human score (keep it)", interactive=False)
                    tc_refs = gr.Textbox(label="Reference captions (what a 1.0 caption looks like)",
                                         interactive=False, lines=4)
                    tc_source_id = gr.Number(label="Caption id", interactive=False, precision=0,
                                             elem_id="transcreate-caption-id")
                    tc_text = gr.Textbox(label="Your transcreation", lines=2, elem_id="transcreate-text")
            with gr.Row():
                tc_next = gr.Button("Load next", elem_id="transcreate-next")
                tc_skip = gr.Button("Skip")
                tc_submit = gr.Button("Submit", variant="primary", elem_id="transcreate-submit")
            tc_status = gr.Textbox(label="Status", interactive=False, elem_id="transcreate-status")

        with gr.Tab("Critical objects", id="critical", elem_id="critical-panel") as cr_tab:
            from_instructions = gr.Markdown()
            with gr.Row():
                cr_image = gr.Image(label="Image", interactive=False, height=280)
                with gr.Column():
                    cr_caption = gr.Textbox(label="Caption", interactive=False, lines=3)
                    cr_caption_id = gr.Number(label="Caption id", interactive=False, precision=0,
                                              elem_id="critical-caption-id")
                    gr.Markdown("Click the words of each phrase; words next to each other join into one phrase "
                                "(*white* + *shirt* = *white shirt*).")
                    cr_objects = gr.CheckboxGroup([], label="Critical objects", elem_id="critical-objects")
                    cr_backgrounds = gr.CheckboxGroup([], label="Backgrounds", elem_id="critical-backgrounds")
                    cr_relations = gr.CheckboxGroup([], label="Relationships", elem_id="critical-relations")
            with gr.Row():
                cr_next = gr.Button("Load next", elem_id="critical-next")
                cr_skip = gr.Button("Skip")
                cr_save = gr.Button("Save", variant="primary", elem_id="critical-save")
            cr_status = gr.Textbox(label="Status", interactive=False, elem_id="critical-status")

    # ----- login ---------------------------------------------------------------------
    def shown_login(request: gr.Request, message: str = ""):
        login = current_login(request)
        status = message or (login_message(login["name"], login["role"]) if login else "Not logged in.")
        return login, status, gr.Tabs(visible=login is not None)

    def on_login(_user_name, message, request: gr.Request):
        """After the page's call to the login route: whom the session cookie names now."""
        login, status, tabs = shown_login(request, message)
        if login is None and not message:  # the route said yes, but the browser kept no cookie
            status = COOKIE_REFUSED
        return login, status, tabs, ""

    login_outputs = [user_state, login_status, work_tabs, password]
    for trigger in (login_button.click, password.submit):
        trigger(on_login, [name, password], login_outputs, js=LOGIN_JS, api_visibility="private").then(
            collection_dropdown, None, collection, api_visibility="private")

    def on_logout():
        return None, "Not logged in.", gr.Tabs(visible=False), "", gr.Dropdown(choices=[], value=None)

    logout_button.click(on_logout, None, [*login_outputs, collection], js=LOGOUT_JS, api_visibility="private")

    # ----- rating queue --------------------------------------------------------------
    rating_outputs = [rate_image, rate_caption, rate_caption_id, overall, fluency, relevance, descriptiveness,
                      rate_status, save_button, rate_language, rate_references, use_aspects, aspect_box,
                      touched]

    def show(screen: queue_screens.RatingScreen, request: gr.Request):
        values = screen.values
        aspects = [values.get(name) for name in ASPECTS]
        return (private_copies(request, [screen.image_file])[0], screen.text, screen.caption_id,
                values.get("overall") if values.get("overall") is not None else 0.5,
                *[0.5 if value is None else value for value in aspects],
                (screen.message + " " if screen.message else "") + screen.progress,
                gr.Button(interactive=screen.can_rate), screen.language_name,
                gr.Textbox(value="\n".join(screen.references), visible=bool(screen.references)),
                screen.aspects_rated, gr.Column(visible=screen.aspects_rated),
                [name for name, value in zip(ASPECTS, aspects) if value is not None])

    def on_next(collection_name, request: gr.Request):
        return show(queue_screens.rating_screen(account_id(request), collection_name), request)

    def on_save(collection_name, caption_id, overall_value, use, flu, rel, desc, set_aspects,
                request: gr.Request):
        return show(queue_screens.rate_and_next(account_id(request), collection_name, caption_id,
                                                float(overall_value),
                                                *[_optional(value, name, use, set_aspects)
                                                  for name, value in zip(ASPECTS, (flu, rel, desc))]),
                    request)

    def on_skip(collection_name, caption_id, request: gr.Request):
        return show(queue_screens.skip_rating(account_id(request), collection_name, caption_id), request)

    def on_back(collection_name, caption_id, request: gr.Request):
        return show(queue_screens.earlier_rating_screen(account_id(request), collection_name, caption_id), request)

    rating_inputs = {
        on_next: [collection],
        on_save: [collection, rate_caption_id, overall, use_aspects, fluency, relevance, descriptiveness, touched],
        on_skip: [collection, rate_caption_id],
        on_back: [collection, rate_caption_id],
    }
    for trigger, handler in ((collection.change, on_next), (save_button.click, on_save), (skip_button.click, on_skip),
                             (back_button.click, on_back)):
        trigger(_guarded(handler, 7, 6), rating_inputs[handler], rating_outputs, api_visibility="private")

    use_aspects.input(lambda use: gr.Column(visible=use), use_aspects, aspect_box, api_visibility="private")
    for name, slider in zip(ASPECTS, (fluency, relevance, descriptiveness)):
        # Only a slider the annotator moves is stored; the others stay "not rated".
        slider.input(lambda done, name=name: sorted(set(done) | {name}), touched, touched, api_visibility="private")

    # ----- transcreation queue -------------------------------------------------------
    tc_outputs = [instructions, tc_image, tc_source, tc_score, tc_refs, tc_source_id, tc_text, tc_status, tc_submit,
                  held_back]

    def show_transcreation(screen: queue_screens.TranscreationScreen, request: gr.Request):
        return (instructions_markdown(screen.instructions, screen.examples),
                private_copies(request, [screen.image_file])[0], screen.text, screen.source_score,
                "\n".join(f"- {r}" for r in screen.references), screen.caption_id, screen.draft, screen.message,
                gr.Button(interactive=screen.can_submit), screen.draft)

    def on_tc_next(collection_name, target_language, request: gr.Request):
        return show_transcreation(queue_screens.transcreation_screen(account_id(request), collection_name,
                                                                     target_language), request)

    def on_tc_submit(collection_name, target_language, source_id, text, held, request: gr.Request):
        return show_transcreation(queue_screens.transcreate_and_next(account_id(request), collection_name,
                                                                     target_language, source_id, text, held), request)

    def on_tc_skip(collection_name, target_language, source_id, request: gr.Request):
        return show_transcreation(queue_screens.skip_transcreation(account_id(request), collection_name,
                                                                   target_language, source_id), request)

    tc_inputs = [collection, target]
    # Opening the sub-tab loads its first item, as "Load next" does (no empty screen of zeros).
    for trigger, handler, extra in ((tc_tab.select, on_tc_next, []), (tc_next.click, on_tc_next, []),
                                    (target.change, on_tc_next, []),
                                    (tc_submit.click, on_tc_submit, [tc_source_id, tc_text, held_back]),
                                    (tc_skip.click, on_tc_skip, [tc_source_id])):
        trigger(_guarded(handler, 7, 2), tc_inputs + extra, tc_outputs, api_visibility="private")

    # ----- critical objects ------------------------------------------------------------
    cr_outputs = [from_instructions, cr_image, cr_caption, cr_caption_id, cr_objects, cr_backgrounds, cr_relations,
                  cr_status, cr_save]

    def show_critical(screen: queue_screens.CriticalScreen, request: gr.Request):
        words = screen.words
        return (screen.instructions, private_copies(request, [screen.image_file])[0], screen.text, screen.caption_id,
                *[gr.CheckboxGroup(choices=words, value=[]) for _ in range(3)], screen.message,
                gr.Button(interactive=screen.can_mark))

    def on_cr_next(collection_name, request: gr.Request):
        return show_critical(queue_screens.critical_screen(account_id(request), collection_name), request)

    def on_cr_save(collection_name, caption_id, objects, backgrounds, relations, request: gr.Request):
        return show_critical(queue_screens.mark_and_next(account_id(request), collection_name, caption_id, objects,
                                                         backgrounds, relations), request)

    def on_cr_skip(collection_name, caption_id, request: gr.Request):
        return show_critical(queue_screens.skip_critical(account_id(request), collection_name, caption_id), request)

    cr_inputs = [collection]
    for trigger, handler, extra in ((cr_tab.select, on_cr_next, []), (cr_next.click, on_cr_next, []),
                                    (cr_save.click, on_cr_save, [cr_caption_id, cr_objects, cr_backgrounds,
                                                                 cr_relations]),
                                    (cr_skip.click, on_cr_skip, [cr_caption_id])):
        trigger(_guarded(handler, 7, 1), cr_inputs + extra, cr_outputs, api_visibility="private")

    def restore(demo: gr.Blocks) -> None:
        """On page load, show whom the session cookie still names: a reload keeps the login."""
        demo.load(shown_login, None, [user_state, login_status, work_tabs], api_visibility="private").then(
            collection_dropdown, None, collection, api_visibility="private")

    return restore


def instructions_markdown(instructions: str, examples) -> str:
    """The M-CapEval1k instructions and worked examples (library constants, not user text)."""
    lines = ["**Instructions**", "", instructions.strip(), "", "**Examples**", ""]
    for ex in examples:
        lines.append(f"- caption *{ex['caption']}* (score {ex['score']}): good *{ex['good']}*; "
                     f"bad *{ex['bad']}* — {ex['why_bad']}")
    return "\n".join(lines)
