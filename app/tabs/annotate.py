"""Annotate tab (login required): rating queue, a study's review queue, transcreation queue,
critical-object marking.

Every action is one call into `annotation.studies.queue_screens`, one database transaction as the
account of the request's session (`app.session`); the library checks the account's role
itself. Logging in and out go from the page to the routes of `app.access`, and joining through
a one-time link or changing one's password to those of `app.account_routes`, so passwords and
the session token never pass through a Gradio component. The login form collapses once logged in.
"""
from __future__ import annotations


import gradio as gr

from annotation.studies import queue_screens
from annotation.people.acting import collection_names
from annotation.people.admin import LINK_PARAMETER, link_page
from annotation.errors import user_message
from app.errors import refused_in_status
from annotation.studies.quality import review_screen, settle_and_next
from annotation.studies.guidelines import study_guidelines
from app import render
from app.langs import LANGUAGES
from app.tabs import pairwise as pairwise_view
from annotation.people.accounts import ALL_ROLES
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
           "transcreate them into other languages, and mark their critical objects.")
LOGGED_OUT_HINT = "Log in below, or open the one-time link your admin sent you."
# A one-time link (?invite=TOKEN): the account is made (or its password set) by the join route,
# then the page logs in with the same name and password.
JOIN_JS = """
async (name, password, again) => {
  let message = "The server did not answer; try again.";
  try {
    const token = new URLSearchParams(window.location.search).get("%s") || "";
    const reply = await fetch("caplens/join", {method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify({token: token, name: name, password: password, again: again})});
    const answer = await reply.json();
    message = answer.message;
    if (answer.ok) {
      const login = await fetch("caplens/login", {method: "POST", credentials: "same-origin",
        headers: {"Content-Type": "application/json"}, body: JSON.stringify({name: answer.name, password: password})});
      const logged = await login.json();
      message = logged.ok ? "" : logged.message;
    }
  } catch (error) {}
  return [name, message, ""];
}
""" % LINK_PARAMETER
PASSWORD_JS = """
async (current, fresh, again) => {
  let message = "The server did not answer; try again.";
  try {
    const reply = await fetch("caplens/password", {method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json"}, body: JSON.stringify({current: current, new: fresh, again: again})});
    message = (await reply.json()).message;
  } catch (error) {}
  return [message, "", ""];
}
"""
# After an item is shown (saved, skipped, back, another collection) the page scrolls back up to
# the top of the Rate view: on a 390 px phone its image, caption, slider and Save then fill the
# first screen, wherever the annotator had scrolled to.
# After a rating screen is shown: a digit typed on the previous caption no longer counts, and the
# panel scrolls back to the top.
SCROLL_TOP_JS = """
() => {
  window.caplensKeyed = null;
  const panel = document.getElementById("rate-panel");
  if (panel && panel.offsetParent !== null) panel.scrollIntoView({block: "start"});
}
"""
OVERALL_LABEL = "Overall (0–1)"
MY_RATING_HEADERS = ["caption id", "caption", "overall", "fluency", "relevance", "descriptiveness", "edits",
                     "last change (UTC)"]
NOT_SET = " — not set yet"
COOKIE_REFUSED = ("Logged in, but this browser did not keep the login cookie. If the app is embedded in another "
                  "site (a Space on huggingface.co), open it at its own address, or allow its cookies.")
LOGOUT_JS = """
async () => {
  try { await fetch("caplens/logout", {method: "POST", credentials: "same-origin"}); } catch (error) {}
  return [];
}
"""

# Save: a digit key sets the overall box in the page at once, but the slider's own event (which
# notes "overall" as set and carries the value) is asynchronous, so an Alt+N right after the key
# could save before it lands. The save therefore takes "overall" as set when a key set it on this
# caption, with the value the box shows (a later drag of the slider shows there too).
SAVE_JS = """
(collection, captionId, overall, use, fluency, relevance, descriptiveness, touched, skipped) => {
  const keyed = window.caplensKeyed;
  const box = document.querySelector('#rate-overall input[type=number]');
  if (keyed && box && String(keyed.caption) === String(captionId)) {
    overall = Number(box.value);
    touched = [...new Set([...(touched || '').split(',').filter(Boolean), 'overall'])].join(',');
  }
  return [collection, captionId, overall, use, fluency, relevance, descriptiveness, touched, skipped];
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
    window.caplensKeyed = {caption: document.querySelector('#rate-caption-id input')?.value};
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


def _slider(label: str, value, is_set: bool) -> gr.Slider:
    """A rating slider showing the annotator's value, or, when they have not set it, its label
    says so (Gradio draws an empty slider at 0; the save refuses it until set or skipped)."""
    return gr.Slider(value=value if is_set else 0, label=label if is_set else label + NOT_SET)


def build(user_state: gr.State):
    """The Annotate tab. `user_state` is whom the page shows as logged in, which the other tabs
    follow. Returns `restore(demo, tab)`, which shows on page load the login the page still has
    (or the form of a one-time link in the page's address) and refreshes the collection list
    each time the Annotate tab `tab` is opened (so a collection imported in Data appears)."""
    login_notice("annotate", PURPOSE, ALL_ROLES, user_state, login_here=True)
    # Rating fields the annotator set on the shown caption ("overall,fluency"; the others are
    # unset), kept in the page (a hidden field, not a gr.State) so a key press notes it at once.
    touched = gr.Textbox("", visible=False, elem_id="rate-touched")
    held_back = gr.State("")  # a transcreation held back by the language check: Submit again saves it
    marks = gr.State({})  # critical objects: group -> chosen words ("start:end")

    with gr.Column(elem_id="join-box", visible=False) as join_box:
        join_text = gr.Markdown(elem_id="join-text")
        with gr.Row():
            join_name = gr.Textbox(label="User name", elem_id="join-name", scale=2)
            join_password = gr.Textbox(label="Password (at least 8 characters)", type="password",
                                       elem_id="join-password", scale=2)
            join_again = gr.Textbox(label="Password again", type="password", elem_id="join-again", scale=2)
            join_button = gr.Button("Set password and log in", variant="primary", elem_id="join-button", scale=1)
    with gr.Column(elem_id="login-box") as login_box:
        gr.Markdown(LOGGED_OUT_HINT, elem_id="login-hint")
        with gr.Row():
            name = gr.Textbox(label="User name", elem_id="login-name", scale=2)
            password = gr.Textbox(label="Password", type="password", elem_id="login-password", scale=2)
            login_button = gr.Button("Log in", variant="primary", elem_id="login-button", scale=1)
    with gr.Row():
        login_status = gr.Textbox(label="Account", interactive=False, value="Not logged in.", elem_id="login-status",
                                  scale=4)
        logout_button = gr.Button("Log out", visible=False, elem_id="logout-button", scale=1)
    with gr.Accordion("Change my password", open=False, visible=False, elem_id="password-box") as password_box:
        with gr.Row():
            current_password = gr.Textbox(label="Current password", type="password", elem_id="password-current")
            new_password = gr.Textbox(label="New password", type="password", elem_id="password-new")
            new_again = gr.Textbox(label="New password again", type="password", elem_id="password-again")
            password_button = gr.Button("Change password", elem_id="password-button")
    collection = gr.Dropdown([], label="Collection", interactive=True, elem_id="annotate-collection")

    with gr.Tabs(visible=False) as work_tabs:
        with gr.Tab("Rate", id="rate", elem_id="rate-panel"):
            # The study's guidelines: open above the first item, folded (one click away) on every other.
            with gr.Accordion("Guidelines of this study", open=False, visible=False,
                              elem_id="rate-guidelines") as guidelines_box:
                guidelines_text = gr.Markdown(elem_id="rate-guidelines-text")
            # What the study says above the item: the qualification round and its feedback, an
            # attention check's instruction, or why there is no item (failed, paused).
            rate_notice = gr.Markdown(visible=False, elem_id="rate-notice")
            gr.Markdown("Rate how well the caption describes the image (0 = wrong, 1 = perfect). "
                        "Keys: digits 0–9 set 0.0–0.9, **m** sets 1.0, arrows move a focused slider, "
                        "**Alt+N** save and next, **Alt+S** skip, **Alt+B** back.", elem_id="rate-keys")
            with gr.Row():
                rate_image = gr.Image(label="Image", interactive=False, height=260, elem_id="rate-image")
                with gr.Column():
                    rate_caption = gr.Textbox(label="Caption", interactive=False, lines=2, elem_id="rate-caption")
                    overall = gr.Slider(0, 1, value=0, step=0.05, label=OVERALL_LABEL + NOT_SET,
                                        elem_id="rate-overall")
                    with gr.Row():
                        back_button = gr.Button("← Back", elem_id="rate-back", min_width=80)
                        skip_button = gr.Button("Skip", elem_id="rate-skip", min_width=80)
                        save_button = gr.Button("Save and next →", variant="primary", elem_id="rate-save",
                                                min_width=120)
                    rate_status = gr.Textbox(label="Progress", interactive=False, elem_id="rate-status")
                    use_aspects = gr.Checkbox(value=False, label="Also rate fluency / relevance / descriptiveness",
                                              elem_id="rate-use-aspects")
                    with gr.Column(visible=False) as aspect_box:
                        fluency = gr.Slider(0, 1, value=0, step=0.05, label="Fluency" + NOT_SET,
                                            elem_id="rate-fluency")
                        relevance = gr.Slider(0, 1, value=0, step=0.05, label="Relevance" + NOT_SET,
                                              elem_id="rate-relevance")
                        descriptiveness = gr.Slider(0, 1, value=0, step=0.05, label="Descriptiveness" + NOT_SET,
                                                    elem_id="rate-descriptiveness")
                        skipped_aspects = gr.CheckboxGroup(list(ASPECTS), value=[], label="Not rating these aspects",
                                                           elem_id="rate-skip-aspects")
                    with gr.Row():
                        rate_language = gr.Textbox(label="Language", interactive=False, elem_id="rate-language",
                                                   min_width=120)
                        rate_caption_id = gr.Number(label="Caption id", interactive=False, precision=0,
                                                    elem_id="rate-caption-id", min_width=120)
                    rate_references = gr.Textbox(label="Reference captions of this image", interactive=False,
                                                 lines=2, visible=False, elem_id="rate-references")
            with gr.Accordion("My ratings in this collection", open=False, elem_id="my-ratings") as my_box:
                gr.Markdown("Click a row to choose it. **Open** shows it above to edit (your earlier values are "
                            "kept as its history); **Withdraw** deletes your rating and returns the caption to "
                            "the queue.")
                my_table = gr.Dataframe(headers=MY_RATING_HEADERS, interactive=False, wrap=True,
                                        elem_id="my-ratings-table",  # no header breaks mid-word
                                        column_widths=render.column_widths(MY_RATING_HEADERS, wide=("caption",)))
                with gr.Row():
                    my_caption_id = gr.Number(label="Caption id", precision=0, elem_id="my-caption-id",
                                              min_width=120)
                    my_refresh = gr.Button("Refresh", elem_id="my-refresh", min_width=80)
                    my_open = gr.Button("Open to edit", elem_id="my-open", min_width=100)
                    my_withdraw = gr.Button("Withdraw my rating", variant="stop", elem_id="my-withdraw",
                                            min_width=120)

        with gr.Tab("Review", id="review", elem_id="review-panel") as review_tab:
            gr.Markdown("Reviewers settle the items annotators disagree on most: each item has its k ratings "
                        "(values only), largest spread first. Your value is stored beside the ratings, never over "
                        "them.")
            with gr.Row():
                review_image = gr.Image(label="Image", interactive=False, height=260, elem_id="review-image")
                with gr.Column():
                    review_caption = gr.Textbox(label="Caption", interactive=False, lines=2, elem_id="review-caption")
                    review_ratings = gr.Textbox(label="The annotators' ratings", interactive=False,
                                                elem_id="review-ratings")
                    review_value = gr.Slider(0, 1, value=0.5, step=0.05, label="Adjudicated overall (0–1; starts at the ratings' mean)",
                                             elem_id="review-value")
                    review_note = gr.Textbox(label="Note (optional)", elem_id="review-note")
                    review_caption_id = gr.Number(label="Caption id", interactive=False, precision=0,
                                                  elem_id="review-caption-id")
                    with gr.Row():
                        review_next = gr.Button("Load next", elem_id="review-next")
                        review_save = gr.Button("Settle and next →", variant="primary", elem_id="review-save")
                    review_status = gr.Textbox(label="Status", interactive=False, elem_id="review-status")

        pairwise_view.annotator_view(collection)  # a pairwise study's A / B / tie judgments (keys 1, 2, 3)

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
                    cr_group = gr.Radio([(title, group) for group, title in queue_screens.MARK_GROUPS.items()],
                                        value="critical_objects", label="Marking", elem_id="critical-group")
                    gr.Markdown("Choose what you are marking, then click its words; words next to each other join "
                                "into one phrase (*white* + *shirt* = *white shirt*). A word belongs to one group.")
                    cr_words = gr.CheckboxGroup([], label="Words of the caption", elem_id="critical-words")
                    cr_preview = gr.Textbox(label="Phrases that Save stores", interactive=False, lines=3,
                                            elem_id="critical-preview")
            with gr.Row():
                cr_next = gr.Button("Load next", elem_id="critical-next")
                cr_skip = gr.Button("Skip", elem_id="critical-skip")
                cr_save = gr.Button("Save", variant="primary", elem_id="critical-save")
            cr_status = gr.Textbox(label="Status", interactive=False, elem_id="critical-status")

    # ----- login, one-time links, own password ------------------------------------------
    def shown_login(request: gr.Request, message: str = ""):
        login = current_login(request)
        status = message or (login_message(login["name"], login["role"]) if login else "Not logged in.")
        inside = login is not None
        return (login, status, gr.Tabs(visible=inside), gr.Column(visible=not inside),
                gr.Button(visible=inside), gr.Accordion(visible=inside, open=False))

    login_outputs = [user_state, login_status, work_tabs, login_box, logout_button, password_box]

    # A login, a join and a page load fill the collection list in the same event that shows the
    # login (a `.then` of its own was one more queued round trip for the page to wait on).
    def on_login(_user_name, message, request: gr.Request):
        """After the page's call to the login route: whom the session cookie names now, and
        the collections it may see."""
        shown = shown_login(request, message)
        if shown[0] is None and not message:  # the route said yes, but the browser kept no cookie
            shown = (shown[0], COOKIE_REFUSED, *shown[2:])
        return (*shown, "", collection_dropdown(request))

    for trigger in (login_button.click, password.submit):
        trigger(on_login, [name, password], [*login_outputs, password, collection], js=LOGIN_JS,
                api_visibility="private")

    def on_join(_user_name, message, _again, request: gr.Request):
        shown = shown_login(request, message)
        return (*shown, gr.Column(visible=shown[0] is None), "", "", collection_dropdown(request))

    join_button.click(on_join, [join_name, join_password, join_again],
                      [*login_outputs, join_box, join_password, join_again, collection], js=JOIN_JS,
                      api_visibility="private")

    def on_password(message, _new, _again, request: gr.Request):
        """After the password route: every login of the account ended, this one too."""
        return (*shown_login(request, message), "", "", "")

    password_button.click(on_password, [current_password, new_password, new_again],
                          [*login_outputs, current_password, new_password, new_again], js=PASSWORD_JS,
                          api_visibility="private")

    def on_logout():
        return (None, "Not logged in.", gr.Tabs(visible=False), gr.Column(visible=True), gr.Button(visible=False),
                gr.Accordion(visible=False), "", gr.Dropdown(choices=[], value=None))

    logout_button.click(on_logout, None, [*login_outputs, password, collection], js=LOGOUT_JS,
                        api_visibility="private")

    # ----- rating queue --------------------------------------------------------------
    rating_outputs = [rate_image, rate_caption, rate_caption_id, overall, fluency, relevance, descriptiveness,
                      rate_status, save_button, rate_language, rate_references, use_aspects, aspect_box,
                      touched, skipped_aspects, rate_notice]

    def show(screen: queue_screens.RatingScreen, request: gr.Request):
        values = screen.values
        is_set = [name for name in queue_screens.tasks.RATING_FIELDS if values.get(name) is not None]
        return (private_copies(request, [screen.image_file])[0], screen.text, screen.caption_id,
                _slider(OVERALL_LABEL, values.get("overall"), "overall" in is_set),
                *[_slider(name.capitalize(), values.get(name), name in is_set) for name in ASPECTS],
                (screen.message + " " if screen.message else "") + screen.progress,
                gr.Button(interactive=screen.can_rate), screen.language_name,
                gr.Textbox(value="\n".join(screen.references), visible=bool(screen.references)),
                screen.aspects_rated, gr.Column(visible=screen.aspects_rated), ",".join(is_set), screen.skipped_aspects,
                gr.Markdown(value=screen.notice, visible=bool(screen.notice)))

    def on_next(collection_name, request: gr.Request):
        return show(queue_screens.rating_screen(account_id(request), collection_name), request)

    def on_save(collection_name, caption_id, overall_value, use, flu, rel, desc, set_fields, skipped,
                request: gr.Request):
        values = queue_screens.rating_values(overall_value, dict(zip(ASPECTS, (flu, rel, desc))), use, set_fields,
                                             skipped)
        return show(queue_screens.rate_and_next(account_id(request), collection_name, caption_id, **values), request)

    def on_skip(collection_name, caption_id, request: gr.Request):
        return show(queue_screens.skip_rating(account_id(request), collection_name, caption_id), request)

    def on_back(collection_name, caption_id, request: gr.Request):
        return show(queue_screens.earlier_rating_screen(account_id(request), collection_name, caption_id), request)

    def on_my_ratings(collection_name, request: gr.Request):
        try:
            rows = queue_screens.my_ratings(account_id(request), collection_name)
        except (PermissionError, ValueError, LookupError):
            rows = []
        return [[r.caption_id, r.text, *[r.values[f] for f in queue_screens.tasks.RATING_FIELDS], r.edits, r.changed]
                for r in rows]

    def on_guidelines(collection_name, request: gr.Request):
        try:
            shown = study_guidelines(account_id(request), collection_name)
        except (PermissionError, ValueError, LookupError):
            return gr.Accordion(visible=False), ""
        return gr.Accordion(visible=bool(shown.text), open=shown.first), shown.text

    def on_annotate_collection(collection_name, request: gr.Request):
        """Another collection chosen (or filled in at login): its next item, my ratings in it and
        its study's guidelines, in one event (three were three queued round trips)."""
        return (*next_screen(collection_name, request), on_my_ratings(collection_name, request),
                *on_guidelines(collection_name, request))

    next_screen = refused_in_status(on_next, 7, 8)

    rating_inputs = {
        on_save: [collection, rate_caption_id, overall, use_aspects, fluency, relevance, descriptiveness, touched,
                  skipped_aspects],
        on_skip: [collection, rate_caption_id],
        on_back: [collection, rate_caption_id],
    }
    collection.change(on_annotate_collection, collection, [*rating_outputs, my_table, guidelines_box, guidelines_text],
                      api_visibility="private").then(None, None, None, js=SCROLL_TOP_JS)
    for trigger, handler in ((save_button.click, on_save), (skip_button.click, on_skip), (back_button.click, on_back)):
        shown = trigger(refused_in_status(handler, 7, 8), rating_inputs[handler], rating_outputs,
                        api_visibility="private", js=SAVE_JS if handler is on_save else None)
        shown.then(None, None, None, js=SCROLL_TOP_JS)
        if handler is on_save:
            shown.then(on_my_ratings, collection, my_table, api_visibility="private")

    # ----- my ratings ------------------------------------------------------------------
    def on_open(collection_name, caption_id, request: gr.Request):
        return show(queue_screens.own_rating_screen(account_id(request), collection_name, caption_id), request)

    def on_withdraw(collection_name, caption_id, request: gr.Request):
        return show(queue_screens.withdraw_rating(account_id(request), collection_name, caption_id), request)

    for trigger in (my_box.expand, my_refresh.click):
        trigger(on_my_ratings, collection, my_table, api_visibility="private")

    def on_row(event: gr.SelectData):
        return event.row_value[0] if event.row_value else gr.skip()

    my_table.select(on_row, None, my_caption_id, api_visibility="private", trigger_mode="always_last")
    my_open.click(refused_in_status(on_open, 7, 8), [collection, my_caption_id], rating_outputs,
                  api_visibility="private").then(None, None, None, js=SCROLL_TOP_JS)
    my_withdraw.click(refused_in_status(on_withdraw, 7, 8), [collection, my_caption_id], rating_outputs,
                      api_visibility="private").then(on_my_ratings, collection, my_table, api_visibility="private")

    use_aspects.input(lambda use: gr.Column(visible=use), use_aspects, aspect_box, api_visibility="private",
                      trigger_mode="always_last")
    for field, slider, label in (("overall", overall, OVERALL_LABEL), ("fluency", fluency, "Fluency"),
                                 ("relevance", relevance, "Relevance"),
                                 ("descriptiveness", descriptiveness, "Descriptiveness")):
        # Only a slider the annotator moves (or a key sets) is stored; the others stay unset. The
        # page notes it at once (a key then Alt+N must not race a round trip to the server).
        slider.input(None, touched, touched, js=f"(done) => [...new Set([...(done || '').split(',').filter(Boolean), {field!r}])].join(',')").then(
            lambda label=label: gr.Slider(label=label), None, slider, api_visibility="private")

    # ----- review queue ---------------------------------------------------------------
    review_outputs = [review_image, review_caption, review_caption_id, review_ratings, review_note, review_status,
                      review_save, review_value]

    def show_review(screen, request: gr.Request):
        waiting = f"{screen.waiting} item(s) wait for review." if screen.caption_id is not None else ""
        return (private_copies(request, [screen.image_file])[0], screen.text, screen.caption_id, screen.ratings, "",
                " ".join(part for part in (screen.message, waiting) if part),
                gr.Button(interactive=screen.caption_id is not None),
                gr.Slider(value=0.5 if screen.mean is None else round(screen.mean, 2)))  # the slider shows 2 decimals

    def on_review_next(collection_name, request: gr.Request):
        return show_review(review_screen(account_id(request), collection_name), request)

    def on_review_save(collection_name, caption_id, value, note, request: gr.Request):
        return show_review(settle_and_next(account_id(request), collection_name, caption_id, value, note), request)

    for trigger, handler, extra in ((review_tab.select, on_review_next, []), (review_next.click, on_review_next, []),
                                    (review_save.click, on_review_save, [review_caption_id, review_value,
                                                                         review_note])):
        trigger(refused_in_status(handler, 5, 2), [collection] + extra, review_outputs, api_visibility="private")

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
        trigger(refused_in_status(handler, 7, 2), tc_inputs + extra, tc_outputs, api_visibility="private")

    # ----- critical objects ------------------------------------------------------------
    cr_outputs = [from_instructions, cr_image, cr_caption, cr_caption_id, cr_words, cr_group, marks, cr_preview,
                  cr_status, cr_save]

    def show_critical(screen: queue_screens.CriticalScreen, request: gr.Request):
        return (screen.instructions, private_copies(request, [screen.image_file])[0], screen.text, screen.caption_id,
                gr.CheckboxGroup(choices=screen.words, value=[]), "critical_objects", {},
                queue_screens.marking_preview(screen.text, {}), screen.message,
                gr.Button(interactive=screen.can_mark))

    def on_cr_next(collection_name, request: gr.Request):
        return show_critical(queue_screens.critical_screen(account_id(request), collection_name), request)

    def on_cr_save(collection_name, caption_id, marked, request: gr.Request):
        groups = [(marked or {}).get(group, []) for group in queue_screens.MARK_GROUPS]
        return show_critical(queue_screens.mark_and_next(account_id(request), collection_name, caption_id, *groups),
                             request)

    def on_cr_skip(collection_name, caption_id, request: gr.Request):
        return show_critical(queue_screens.skip_critical(account_id(request), collection_name, caption_id), request)

    cr_inputs = [collection]
    for trigger, handler, extra in ((cr_tab.select, on_cr_next, []), (cr_next.click, on_cr_next, []),
                                    (cr_save.click, on_cr_save, [cr_caption_id, marks]),
                                    (cr_skip.click, on_cr_skip, [cr_caption_id])):
        trigger(refused_in_status(handler, 8, 1), cr_inputs + extra, cr_outputs, api_visibility="private")

    def on_words(text, marked, group, words):
        marked = queue_screens.marking_with(marked, group, words)
        return marked, queue_screens.marking_preview(text, marked)

    # Gradio's default trigger mode ("once") drops a click made while the previous one is still
    # on its way: three quick clicks showed three ticks and stored one word. "always_last" runs
    # the latest click once the pending one is back, and it carries every tick.
    cr_words.input(on_words, [cr_caption, marks, cr_group, cr_words], [marks, cr_preview], api_visibility="private",
                   trigger_mode="always_last")
    cr_group.input(lambda marked, group: gr.CheckboxGroup(value=(marked or {}).get(group, [])), [marks, cr_group],
                   cr_words, api_visibility="private", trigger_mode="always_last")

    def restore(demo: gr.Blocks, tab: gr.Tab) -> None:
        """On page load, show whom the session cookie still names (a reload keeps the login), or
        the form of the one-time link in the page's address; the Annotate tab `tab` refreshes
        the collection list whenever it is opened."""
        def on_load(request: gr.Request):
            shown = shown_login(request)
            # Logged out, the list stays as the page has it (empty): no change, so no rating
            # screen is fetched for nobody on every page load.
            collections = collection_dropdown(request) if shown[0] is not None else gr.skip()
            token = request.query_params.get(LINK_PARAMETER) if request is not None else None
            if not token:
                return (*shown, gr.Column(visible=False), "", collections)
            try:
                text = link_page(token).text
            except PermissionError as exc:  # unknown, used or expired: said where the login status is
                return (shown[0], user_message(exc), *shown[2:], gr.Column(visible=False), "", collections)
            return (*shown, gr.Column(visible=True), text, collections)

        demo.load(on_load, None, [*login_outputs, join_box, join_text, collection], api_visibility="private")

        def refresh(current, request: gr.Request):
            """The list, and the kept collection's guidelines (edited in Study meanwhile, perhaps:
            choosing the same collection again fires nothing); a new choice fetches its own."""
            try:
                available = collection_names(account_id(request))
            except PermissionError:
                return gr.skip(), gr.skip(), gr.skip()
            if current in available:
                return gr.Dropdown(choices=available), *on_guidelines(current, request)
            return gr.Dropdown(choices=available, value=available[0] if available else None), gr.skip(), gr.skip()

        tab.select(refresh, collection, [collection, guidelines_box, guidelines_text], api_visibility="private")

    return restore


def instructions_markdown(instructions: str, examples) -> str:
    """The M-CapEval1k instructions and worked examples (library constants, not user text)."""
    lines = ["**Instructions**", "", instructions.strip(), "", "**Examples**", ""]
    for ex in examples:
        lines.append(f"- caption *{ex['caption']}* (score {ex['score']}): good *{ex['good']}*; "
                     f"bad *{ex['bad']}* — {ex['why_bad']}")
    return "\n".join(lines)
