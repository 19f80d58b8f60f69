"""Annotate tab (login required): rating queue, transcreation queue, critical-object marking.

Every action is one call into `annotation.tasks` inside one database transaction; the
workflow functions check the acting user's role themselves. The logged-in user lives in a
per-session `gr.State` holding only the user's id, so each request re-reads the account.
"""
from __future__ import annotations

import io
from dataclasses import dataclass

import gradio as gr

from app.langs import LANGUAGES

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


class NotLoggedIn(PermissionError):
    pass


def _db():
    from annotation.database import database_session

    return database_session()


def acting_user(session, user_state: dict | None):
    """The logged-in account re-read from the database, or NotLoggedIn."""
    from db.models import User

    if not user_state or "id" not in user_state:
        raise NotLoggedIn("Log in first (Annotate tab).")
    user = session.get(User, user_state["id"])
    if user is None:
        raise NotLoggedIn("This account no longer exists; log in again.")
    return user


def login(name: str, password: str) -> tuple[dict | None, str]:
    """(user state, message) for a login attempt."""
    from annotation.accounts import authenticate

    if not name or not password:
        return None, "Enter your user name and password."
    with _db() as session:
        user = authenticate(session, name.strip(), password)
        if user is None:
            return None, "Wrong user name or password."
        return {"id": user.id, "name": user.name, "role": user.role}, f"Logged in as {user.name} ({user.role})."


def collection_names(user_state: dict | None) -> list[str]:
    from annotation.captions import list_collections

    with _db() as session:
        return [c.name for c in list_collections(session, acting_user(session, user_state))]


def collection_choices(user_state: dict | None, leading: tuple[str, ...] = ()):
    """(dropdown update, message) listing the collections this account may see; `leading`
    choices (e.g. "all collections") come first. The researcher tabs refresh with it."""
    try:
        available = collection_names(user_state)
    except PermissionError as exc:
        return gr.skip(), str(exc)
    if leading:
        return gr.Dropdown(choices=[*leading, *available]), ""
    return gr.Dropdown(choices=available, value=available[0] if available else None), ""


def queue_guard(fn):
    """A transcreation / critical-object handler whose bad request (no right, no such item)
    leaves the 7 item fields as they are and says why in the message field."""
    def wrapper(*args):
        try:
            return fn(*args)
        except (PermissionError, ValueError, LookupError) as exc:
            return (*[gr.skip()] * 7, str(exc))
    return wrapper


def _pil(image_row):
    """The stored image of a caption, decoded for display."""
    from PIL import Image

    from annotation.image_store import read_image_bytes

    try:
        return Image.open(io.BytesIO(read_image_bytes(image_row))).convert("RGB")
    except OSError:
        return None


@dataclass
class RatingView:
    caption_id: int | None
    text: str
    language: str
    image: object
    values: dict
    progress: str


def rating_view(session, user, collection_name: str, caption=None) -> RatingView:
    """What the rating screen shows: `caption`, or the next one in the queue."""
    from annotation.captions import get_collection
    from annotation.tasks import RATING_FIELDS, list_ratings, next_rating_item, rating_progress

    collection = get_collection(session, collection_name)
    progress = rating_progress(session, user, collection)
    progress_text = (f"You rated {progress.done_by_user} of {progress.items} items; "
                     f"{progress.items_complete} items have {progress.k} ratings.")
    if caption is None:
        caption = next_rating_item(session, user, collection)
    if caption is None:
        return RatingView(None, "Nothing left to rate in this collection. Thank you!", "", None, {}, progress_text)
    values = {}
    for rating in list_ratings(session, user, annotator=user):
        if rating.caption_id == caption.id:
            values = {f: getattr(rating, f) for f in RATING_FIELDS}
    return RatingView(caption.id, caption.text, caption.language, _pil(caption.image), values, progress_text)


def rate(user_state: dict | None, caption_id: int, overall: float, fluency: float | None = None,
         relevance: float | None = None, descriptiveness: float | None = None) -> dict:
    """Store this annotator's rating (editing an earlier one keeps its history)."""
    from annotation.tasks import submit_rating

    with _db() as session:
        user = acting_user(session, user_state)
        rating = submit_rating(session, user, int(caption_id), overall, fluency, relevance, descriptiveness)
        return {"rating_id": rating.id, "caption_id": rating.caption_id, "annotator": user.name,
                "overall": rating.overall, "fluency": rating.fluency, "relevance": rating.relevance,
                "descriptiveness": rating.descriptiveness, "version": rating.version}


def _optional(value: float | None, use: bool) -> float | None:
    return float(value) if use and value is not None else None


def build(user_state: gr.State) -> None:
    """The Annotate tab. `user_state` is the per-session login that the Analyze, Failure-cases
    and Data tabs and the API's /login and /rate share."""
    history = gr.State([])  # caption ids shown in the rating queue this session, for Back

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
                    rate_caption_id = gr.Number(label="Caption id", interactive=False, precision=0, elem_id="rate-caption-id")
                    overall = gr.Slider(0, 1, value=0.5, step=0.05, label="Overall (0–1)", elem_id="rate-overall")
                    use_aspects = gr.Checkbox(value=True, label="Also rate fluency / relevance / descriptiveness")
                    fluency = gr.Slider(0, 1, value=0.5, step=0.05, label="Fluency", elem_id="rate-fluency")
                    relevance = gr.Slider(0, 1, value=0.5, step=0.05, label="Relevance", elem_id="rate-relevance")
                    descriptiveness = gr.Slider(0, 1, value=0.5, step=0.05, label="Descriptiveness",
                                                elem_id="rate-descriptiveness")
            with gr.Row():
                back_button = gr.Button("← Back", elem_id="rate-back")
                skip_button = gr.Button("Skip", elem_id="rate-skip")
                save_button = gr.Button("Save and next →", variant="primary", elem_id="rate-save")
            rate_status = gr.Textbox(label="Progress", interactive=False, elem_id="rate-status")

        with gr.Tab("Transcreate", id="transcreate"):
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
                    tc_source_id = gr.Number(label="Caption id", interactive=False, precision=0)
                    tc_text = gr.Textbox(label="Your transcreation", lines=2, elem_id="transcreate-text")
            with gr.Row():
                tc_next = gr.Button("Load next")
                tc_skip = gr.Button("Skip")
                tc_submit = gr.Button("Submit", variant="primary")
            tc_status = gr.Textbox(label="Status", interactive=False)

        with gr.Tab("Critical objects", id="critical"):
            from_instructions = gr.Markdown()
            with gr.Row():
                cr_image = gr.Image(label="Image", interactive=False, height=280)
                with gr.Column():
                    cr_caption = gr.Textbox(label="Caption", interactive=False, lines=3)
                    cr_caption_id = gr.Number(label="Caption id", interactive=False, precision=0)
                    cr_objects = gr.Textbox(label="Critical objects (comma separated, copied from the caption)")
                    cr_backgrounds = gr.Textbox(label="Backgrounds (comma separated)")
                    cr_relations = gr.Textbox(label="Relationships (comma separated)")
            with gr.Row():
                cr_next = gr.Button("Load next")
                cr_skip = gr.Button("Skip")
                cr_save = gr.Button("Save", variant="primary")
            cr_status = gr.Textbox(label="Status", interactive=False)

    # ----- login ---------------------------------------------------------------------
    def on_login(user_name, user_password):
        state, message = login(user_name, user_password)
        if state is None:
            return state, message, gr.Dropdown(choices=[], value=None), gr.Tabs(visible=False), ""
        names = collection_names(state)
        return (state, message, gr.Dropdown(choices=names, value=names[0] if names else None),
                gr.Tabs(visible=True), "")

    login_outputs = [user_state, login_status, collection, work_tabs, password]
    login_button.click(on_login, [name, password], login_outputs, api_visibility="private")
    password.submit(on_login, [name, password], login_outputs, api_visibility="private")
    logout_button.click(lambda: (None, "Not logged in.", gr.Dropdown(choices=[], value=None), gr.Tabs(visible=False), ""),
                        None, login_outputs, api_visibility="private")

    # ----- rating queue --------------------------------------------------------------
    rating_outputs = [rate_image, rate_caption, rate_caption_id, overall, fluency, relevance, descriptiveness,
                      rate_status, history]

    def show(view: RatingView, visited: list, message: str = ""):
        values = view.values
        status = (message + " " if message else "") + view.progress
        if view.caption_id is not None and (not visited or visited[-1] != view.caption_id):
            visited = visited + [view.caption_id]
        return (view.image, view.text, view.caption_id, values.get("overall") if values.get("overall") is not None else 0.5,
                values.get("fluency") or 0.5, values.get("relevance") or 0.5, values.get("descriptiveness") or 0.5,
                status, visited)

    def guarded(fn):
        """Turn library errors into a message in the status box instead of a crash."""
        def wrapper(*args):
            try:
                return fn(*args)
            except (PermissionError, ValueError, LookupError) as exc:
                return (*[gr.skip()] * 7, str(exc), gr.skip())
        return wrapper

    @guarded
    def on_next(state, collection_name, visited):
        if not collection_name:
            raise ValueError("Choose a collection.")
        with _db() as session:
            return show(rating_view(session, acting_user(session, state), collection_name), visited)

    @guarded
    def on_save(state, collection_name, caption_id, overall_value, use, flu, rel, desc, visited):
        if caption_id is None:
            raise ValueError("No caption loaded: choose a collection.")
        rate(state, int(caption_id), float(overall_value), _optional(flu, use), _optional(rel, use), _optional(desc, use))
        with _db() as session:
            view = rating_view(session, acting_user(session, state), collection_name)
        return show(view, visited, f"Saved rating of caption {int(caption_id)}.")

    @guarded
    def on_skip(state, collection_name, caption_id, visited):
        from annotation.tasks import skip_item

        if caption_id is None:
            raise ValueError("No caption loaded.")
        with _db() as session:
            user = acting_user(session, state)
            skip_item(session, user, int(caption_id), "rating")
        with _db() as session:
            view = rating_view(session, acting_user(session, state), collection_name)
        return show(view, visited[:-1] if visited and visited[-1] == caption_id else visited,
                    f"Skipped caption {int(caption_id)}.")

    @guarded
    def on_back(state, collection_name, caption_id, visited):
        from annotation.captions import get_caption

        earlier = [c for c in visited if c != caption_id]
        if not earlier:
            raise ValueError("Nothing to go back to in this session.")
        with _db() as session:
            user = acting_user(session, state)
            view = rating_view(session, user, collection_name, caption=get_caption(session, earlier[-1]))
        return show(view, earlier, "Showing your earlier item; saving edits your rating.")

    collection.change(on_next, [user_state, collection, history], rating_outputs, api_visibility="private")
    save_button.click(on_save, [user_state, collection, rate_caption_id, overall, use_aspects, fluency, relevance,
                                descriptiveness, history], rating_outputs, api_visibility="private")
    skip_button.click(on_skip, [user_state, collection, rate_caption_id, history], rating_outputs,
                      api_visibility="private")
    back_button.click(on_back, [user_state, collection, rate_caption_id, history], rating_outputs,
                      api_visibility="private")

    # ----- transcreation queue -------------------------------------------------------
    tc_outputs = [instructions, tc_image, tc_source, tc_score, tc_refs, tc_source_id, tc_text, tc_status]

    def transcreation_screen(state, collection_name, target_language, message=""):
        from annotation.captions import get_collection
        from annotation.tasks import (
            TRANSCREATION_EXAMPLES,
            TRANSCREATION_INSTRUCTIONS,
            next_transcreation_item,
        )

        with _db() as session:
            user = acting_user(session, state)
            task = next_transcreation_item(session, user, get_collection(session, collection_name),
                                           target_language)
            text = instructions_markdown(TRANSCREATION_INSTRUCTIONS, TRANSCREATION_EXAMPLES)
            if task is None:
                return (text, None, "", None, "", None, "",
                        (message + " " if message else "") + "Nothing left to transcreate into this language.")
            return (text, _pil(task.image), task.caption.text, round(task.source_score, 3),
                    "\n".join(f"- {r}" for r in task.references), task.caption.id, "", message)

    @queue_guard
    def on_tc_next(state, collection_name, target_language):
        if not collection_name:
            raise ValueError("Choose a collection.")
        return transcreation_screen(state, collection_name, target_language)

    @queue_guard
    def on_tc_submit(state, collection_name, target_language, source_id, text):
        from annotation.tasks import submit_transcreation

        if source_id is None:
            raise ValueError("Load a caption first.")
        with _db() as session:
            submit_transcreation(session, acting_user(session, state), int(source_id), target_language, text or "")
        return transcreation_screen(state, collection_name, target_language, "Saved.")

    @queue_guard
    def on_tc_skip(state, collection_name, target_language, source_id):
        from annotation.tasks import skip_item

        if source_id is None:
            raise ValueError("Load a caption first.")
        with _db() as session:
            skip_item(session, acting_user(session, state), int(source_id), "transcreation", target_language)
        return transcreation_screen(state, collection_name, target_language, "Skipped.")

    tc_next.click(on_tc_next, [user_state, collection, target], tc_outputs, api_visibility="private")
    target.change(on_tc_next, [user_state, collection, target], tc_outputs, api_visibility="private")
    tc_submit.click(on_tc_submit, [user_state, collection, target, tc_source_id, tc_text], tc_outputs,
                    api_visibility="private")
    tc_skip.click(on_tc_skip, [user_state, collection, target, tc_source_id], tc_outputs, api_visibility="private")

    # ----- critical objects ------------------------------------------------------------
    cr_outputs = [from_instructions, cr_image, cr_caption, cr_caption_id, cr_objects, cr_backgrounds, cr_relations,
                  cr_status]

    def critical_screen(state, collection_name, message=""):
        from annotation.captions import get_collection
        from annotation.tasks import CRITICAL_INSTRUCTIONS, next_critical_item

        with _db() as session:
            user = acting_user(session, state)
            caption = next_critical_item(session, user, get_collection(session, collection_name))
            text = CRITICAL_INSTRUCTIONS
            if caption is None:
                return (text, None, "", None, "", "", "", (message + " " if message else "") + "Nothing left to mark.")
            return (text, _pil(caption.image), caption.text, caption.id, "", "", "", message)

    @queue_guard
    def on_cr_next(state, collection_name):
        if not collection_name:
            raise ValueError("Choose a collection.")
        return critical_screen(state, collection_name)

    @queue_guard
    def on_cr_save(state, collection_name, caption_id, objects, backgrounds, relations):
        from annotation.tasks import mark_critical

        if caption_id is None:
            raise ValueError("Load a caption first.")
        with _db() as session:
            mark_critical(session, acting_user(session, state), int(caption_id), objects or "", backgrounds or "",
                          relations or "")
        return critical_screen(state, collection_name, "Saved.")

    @queue_guard
    def on_cr_skip(state, collection_name, caption_id):
        from annotation.tasks import skip_item

        if caption_id is None:
            raise ValueError("Load a caption first.")
        with _db() as session:
            skip_item(session, acting_user(session, state), int(caption_id), "critical")
        return critical_screen(state, collection_name, "Skipped.")

    cr_next.click(on_cr_next, [user_state, collection], cr_outputs, api_visibility="private")
    cr_save.click(on_cr_save, [user_state, collection, cr_caption_id, cr_objects, cr_backgrounds, cr_relations],
                  cr_outputs, api_visibility="private")
    cr_skip.click(on_cr_skip, [user_state, collection, cr_caption_id], cr_outputs, api_visibility="private")


def instructions_markdown(instructions: str, examples) -> str:
    """The M-CapEval1k instructions and worked examples (library constants, not user text)."""
    lines = ["**Instructions**", "", instructions.strip(), "", "**Examples**", ""]
    for ex in examples:
        lines.append(f"- caption *{ex['caption']}* (score {ex['score']}): good *{ex['good']}*; "
                     f"bad *{ex['bad']}* — {ex['why_bad']}")
    return "\n".join(lines)
