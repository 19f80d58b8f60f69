"""Named API endpoints for `gradio_client`: /score, /perturb, /login, /next_item, /rate.

They are wired to hidden components so their signatures stay small and stable whatever the
visible layout does, and they share the library calls of the tabs.
"""
from __future__ import annotations

import gradio as gr

from annotation.queue_screens import rate, rating_screen
from app import engine
from app.session import account_id, login
from app.tabs.score import load_images, outcome_to_json, split_lines
from scoring.language_id import AUTO, resolve_language
from scoring.perturb.lab import parse_critical, perturb_caption
from scoring.session_scoring import ScoreRequest, score_request


def score_endpoint(profile: str, image_path: str | None, captions: str, references: str, lang: str,
                   metrics: str, cache: dict | None = None) -> dict:
    """Scores of every caption (one per line) for one image. `cache` is the client session's
    memory of scored pairs, so re-sending five captions with one edited scores only that one."""
    images, messages = load_images([image_path] if image_path else [])
    if image_path and not images:
        raise gr.Error("\n".join(messages))
    caption_list = split_lines(captions)
    if not caption_list:
        raise gr.Error("captions: give at least one caption (one per line)")
    chosen = [m.strip() for m in (metrics or "").split(",") if m.strip()] or None
    try:
        outcome = score_request(engine.AppScorer(profile),
                                ScoreRequest(images, caption_list, split_lines(references), lang or AUTO, chosen), cache)
    except LookupError as exc:
        raise gr.Error(str(exc)) from None
    outcome.messages = messages
    return outcome_to_json(outcome)


def perturb_endpoint(text: str, op: str, p: float, seed: float, lang: str, critical: str) -> list[dict]:
    """The perturbed caption(s) with provenance and changed character spans."""
    try:
        results = perturb_caption(text, op or "all", float(p if p is not None else 0.4), int(seed or 0),
                                  resolve_language(lang or AUTO, text or ""), parse_critical(critical))
    except (ValueError, LookupError) as exc:
        raise gr.Error(str(exc)) from None
    return [r.to_dict() | {"noop_reason": r.noop_reason} for r in results]


def login_endpoint(name: str, password: str):
    """Log this client session in; later /rate and /next_item calls act as that user."""
    state, message = login(name, password)
    if state is None:
        raise gr.Error(message)
    return {"user": state["name"], "role": state["role"], "message": message}, state


def next_item_endpoint(collection: str, user_state: dict | None) -> dict:
    """The next caption this user should rate in `collection` (caption_id None when done)."""
    try:
        screen = rating_screen(account_id(user_state), collection)
    except (PermissionError, ValueError, LookupError) as exc:
        raise gr.Error(str(exc)) from None
    return {"caption_id": screen.caption_id, "text": screen.text, "language": screen.language,
            "progress": screen.progress}


def rate_endpoint(caption_id: float, overall: float, fluency: float | None, relevance: float | None,
                  descriptiveness: float | None, user_state: dict | None) -> dict:
    """Rate a caption as the logged-in user (0-1 each; aspects optional)."""
    if caption_id is None or overall is None:
        raise gr.Error("caption_id and overall are required")
    try:
        return rate(account_id(user_state), int(caption_id), float(overall), fluency, relevance, descriptiveness)
    except (PermissionError, ValueError, LookupError) as exc:
        raise gr.Error(str(exc)) from None


def build(ctx: engine.AppContext, user_state: gr.State) -> None:
    """Hidden components and the named endpoints bound to them. `user_state` is the
    Annotate tab's per-session login, so an API client logs in once per Client."""
    with gr.Column(visible=False):
        image = gr.File(label="image", file_count="single")
        captions = gr.Textbox(label="captions")
        references = gr.Textbox(label="references")
        lang = gr.Textbox(label="lang", value=AUTO)
        metrics = gr.Textbox(label="metrics")
        score_result = gr.JSON(label="scores")
        score_trigger = gr.Button("score")

        text = gr.Textbox(label="text")
        op = gr.Textbox(label="op", value="all")
        p = gr.Number(label="p", value=0.4)
        seed = gr.Number(label="seed", value=0, precision=0)
        perturb_lang = gr.Textbox(label="lang", value=AUTO)
        critical = gr.Textbox(label="critical")
        perturb_result = gr.JSON(label="perturbations")
        perturb_trigger = gr.Button("perturb")

        user_name = gr.Textbox(label="name")
        user_password = gr.Textbox(label="password", type="password")
        login_result = gr.JSON(label="login")
        login_trigger = gr.Button("login")

        collection = gr.Textbox(label="collection")
        next_result = gr.JSON(label="item")
        next_trigger = gr.Button("next_item")

        caption_id = gr.Number(label="caption_id", precision=0)
        overall = gr.Number(label="overall")
        fluency = gr.Number(label="fluency", value=None)
        relevance = gr.Number(label="relevance", value=None)
        descriptiveness = gr.Number(label="descriptiveness", value=None)
        rate_result = gr.JSON(label="rating")
        rate_trigger = gr.Button("rate")

    score_cache = gr.State({})

    def score_api(image_path, captions_text, references_text, lang_code, metric_list, cache):
        result = score_endpoint(ctx.profile, image_path, captions_text, references_text, lang_code, metric_list,
                                cache)
        return result, cache

    score_trigger.click(score_api, [image, captions, references, lang, metrics, score_cache],
                        [score_result, score_cache], api_name="score")
    perturb_trigger.click(perturb_endpoint, [text, op, p, seed, perturb_lang, critical], perturb_result,
                          api_name="perturb")
    login_trigger.click(login_endpoint, [user_name, user_password], [login_result, user_state],
                        api_name="login")
    next_trigger.click(next_item_endpoint, [collection, user_state], next_result, api_name="next_item")
    rate_trigger.click(rate_endpoint, [caption_id, overall, fluency, relevance, descriptiveness, user_state],
                       rate_result, api_name="rate")
