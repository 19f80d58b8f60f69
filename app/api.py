"""Named API endpoints for `gradio_client`: /score, /perturb, /login, /next_item, /rate.

They are wired to hidden components so their signatures stay small and stable whatever the
visible layout does, and they share the library calls of the tabs. /login returns a session
token; /next_item and /rate act as the session whose token the request carries in the
`X-CapLens-Token` header (`Client(url, headers={"X-CapLens-Token": token})`), and the library
checks that account's role. These are the only endpoints the API lists or `app.access` lets
through its named routes; every other event handler is private.
"""
from __future__ import annotations

import gradio as gr

from annotation.auth_sessions import log_in
from annotation.queue_screens import rate, rating_screen
from app import engine, render
from app.session import account_id, client_address, login_message
from app.tabs.score import load_images, split_lines
from scoring.language_id import AUTO
from scoring.perturb.lab import parse_critical, perturb_caption
from scoring.session_scoring import ScoreOutcome, ScoreRequest, score_request


def outcome_to_json(outcome: ScoreOutcome) -> dict:
    """The API's answer: rows with every metric (rounded as shown), plus each metric's availability."""
    frame = outcome.frame.astype(object).where(outcome.frame.notna(), None)
    records = [{key: render.format_score(value) if key in outcome.metric_columns else value
                for key, value in row.items()} for row in frame.to_dict(orient="records")]
    return {
        "rows": records,
        "computed_now": outcome.scored_now,
        "metrics": {a["metric"]: {"backbone": a["backbone"], "status": a["status"]} for a in outcome.availability},
        "messages": outcome.messages,
    }


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
        request = ScoreRequest.grid(images, caption_list, split_lines(references), lang or AUTO, chosen)
        outcome = score_request(engine.AppScorer(profile), request, cache)
    except LookupError as exc:
        raise gr.Error(str(exc)) from None
    outcome.messages = messages
    return outcome_to_json(outcome)


def perturb_endpoint(text: str, op: str, p: float, seed: float, lang: str, critical: str) -> list[dict]:
    """The perturbed caption(s) with provenance and changed character spans."""
    try:
        results = perturb_caption(text, op or "all", float(p if p is not None else 0.4), int(seed or 0), lang or AUTO,
                                  parse_critical(critical))
    except (ValueError, LookupError) as exc:
        raise gr.Error(str(exc)) from None
    return [r.to_dict() | {"noop_reason": r.noop_reason} for r in results]


ENDPOINTS = ("score", "perturb", "login", "next_item", "rate")


def login_endpoint(name: str, password: str, request: gr.Request) -> dict:
    """A new session: its token, for the X-CapLens-Token header of later calls, and when it
    expires. Throttled per account and per client like every login."""
    try:
        login = log_in(name, password, client_address(request))
    except PermissionError as exc:
        raise gr.Error(str(exc)) from None
    return {"user": login.account.name, "role": login.account.role, "token": login.token,
            "expires_at": login.expires_at.isoformat(),
            "message": login_message(login.account.name, login.account.role)}


def next_item_endpoint(collection: str, request: gr.Request) -> dict:
    """The next caption this user should rate in `collection` (caption_id None when done)."""
    try:
        screen = rating_screen(account_id(request), collection)
    except (PermissionError, ValueError, LookupError) as exc:
        raise gr.Error(str(exc)) from None
    return {"caption_id": screen.caption_id, "text": screen.text, "language": screen.language,
            "progress": screen.progress}


def rate_endpoint(caption_id: float, overall: float, fluency: float | None, relevance: float | None,
                  descriptiveness: float | None, request: gr.Request) -> dict:
    """Rate a caption as the logged-in user (0-1 each; aspects optional)."""
    if caption_id is None or overall is None:
        raise gr.Error("caption_id and overall are required")
    try:
        return rate(account_id(request), int(caption_id), float(overall), fluency, relevance, descriptiveness)
    except (PermissionError, ValueError, LookupError) as exc:
        raise gr.Error(str(exc)) from None


def _endpoint(api_name: str, fn, inputs: list, result_label: str, extra_outputs: tuple = ()) -> None:
    """A hidden button named `api_name` whose click calls `fn` and answers in a JSON component."""
    result = gr.JSON(label=result_label)
    gr.Button(api_name).click(fn, inputs, [result, *extra_outputs], api_name=api_name)


def build(ctx: engine.AppContext) -> None:
    """Hidden components and the named endpoints bound to them."""
    score_cache = gr.State({})

    def score_api(image_path, captions_text, references_text, lang_code, metric_list, cache):
        result = score_endpoint(ctx.profile, image_path, captions_text, references_text, lang_code, metric_list,
                                cache)
        return result, cache

    with gr.Column(visible=False):
        _endpoint("score", score_api, [gr.File(label="image", file_count="single"), gr.Textbox(label="captions"),
                                       gr.Textbox(label="references"), gr.Textbox(label="lang", value=AUTO),
                                       gr.Textbox(label="metrics"), score_cache], "scores", (score_cache,))
        _endpoint("perturb", perturb_endpoint, [gr.Textbox(label="text"), gr.Textbox(label="op", value="all"),
                                                gr.Number(label="p", value=0.4),
                                                gr.Number(label="seed", value=0, precision=0),
                                                gr.Textbox(label="lang", value=AUTO), gr.Textbox(label="critical")],
                  "perturbations")
        _endpoint("login", login_endpoint, [gr.Textbox(label="name"), gr.Textbox(label="password", type="password")],
                  "login")
        _endpoint("next_item", next_item_endpoint, [gr.Textbox(label="collection")], "item")
        aspects = [gr.Number(label=name, value=None) for name in ("fluency", "relevance", "descriptiveness")]
        _endpoint("rate", rate_endpoint, [gr.Number(label="caption_id", precision=0), gr.Number(label="overall"),
                                          *aspects], "rating")
