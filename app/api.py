"""Named API endpoints for `gradio_client` and, with `caplens serve --mcp`, MCP tools:
/score, /perturb, /login, /next_item, /rate, /analyze, /failure_cases.

They are wired to hidden components so their signatures stay small and stable whatever the
visible layout does, and they share the library calls of the tabs. /login returns a session
token; /next_item, /rate, /analyze and /failure_cases act as the session whose token the
request carries in the `X-CapLens-Token` header (`Client(url, headers={"X-CapLens-Token":
token})`, or the same header on an MCP client's connection), and the library checks that
account's role: rating needs an annotator, the analyses a researcher or admin, exactly as in
the tabs. /score and /perturb are open to everyone, as the Score tab and the Perturbation lab
are. These are the only endpoints the API lists, `app.access` lets through its named routes
and the MCP server offers as tools (Gradio makes a tool of every public endpoint, named
after it, described by the function's docstring and its Args: section); every other event
handler is private.
"""
from __future__ import annotations

import functools
import logging
import math

import gradio as gr
import pandas as pd

from annotation.image_store import picture_data_uri
from annotation.people.auth_sessions import log_in
from annotation.scores.collection_analysis import analyse_collection, collection_failure_cases
from annotation.studies.pairwise import judge_and_next, pair_screen
from annotation.studies.queue_screens import rate, rating_screen
from app import engine, render
from app.errors import as_gradio_error
from app.perturb_lab import parse_critical, perturb_caption
from app.session import account_id, client_address, login_message, request_token
from app.tabs.score import load_images, split_lines
from scoring.analysis.report import ANY, DISAGREE, UNMOVED, case_cells, correlation_cells, filter_cases, robustness_cells
from scoring.language_id import AUTO
from scoring.paths import caption_max_chars
from scoring.session_scoring import ScoreOutcome, ScoreRequest, score_request

LOG = logging.getLogger(__name__)
MAX_SEED = 2**32 - 1
MAX_ID = 2**62
MAX_FIELD_CHARS = 1_000  # names, codes and lists of metric names
MAX_LINES_CHARS = 50_000  # captions or references, one per line (each also under caption_max_chars)


# What a caller without a token (an agent over MCP, a gradio_client script) is told: the
# browser's "Log in first (Annotate tab)" names a tab it does not have.
API_LOGIN = ("Not logged in: call the login tool (over MCP) or the /login endpoint with the name and password of "
             "an account, then send the token it returns as the X-CapLens-Token header of your MCP connection (or "
             "of a gradio_client Client(url, headers=...)) and call again.")


def api_account(request) -> int:
    """The account a tool call acts as, from its X-CapLens-Token header; gr.Error in words an
    agent can act on when there is no token or its session ended."""
    if request_token(request) is None:
        raise gr.Error(API_LOGIN)
    try:
        return account_id(request)
    except PermissionError as exc:
        raise gr.Error(f"{str(exc).split(':')[0].rstrip('.')}. {API_LOGIN}") from None


def json_answers(server) -> None:
    """Make Gradio's MCP server answer each tool call with JSON text (its own answer is the
    Python repr of the result: single quotes, None, True). Files keep Gradio's handling."""
    import json

    from gradio_client import utils as client_utils

    plain = server.postprocess_output_data

    def postprocess_output_data(data, root_url):
        answers = []
        for output in data:
            if hasattr(output, "model_dump"):  # a direct event's JSON output, still Gradio's model of it
                output = output.model_dump()
            if isinstance(output, (dict, list)) and not client_utils.is_file_obj_with_meta(output):
                answers.append(server.types.TextContent(type="text", text=json.dumps(output, ensure_ascii=False)))
            else:
                answers.extend(plain([output], root_url))
        return answers

    server.postprocess_output_data = postprocess_output_data


def refused(message: str) -> gr.Error:
    """The error a malformed argument gets: its message to the caller, one line in the log
    (no traceback)."""
    LOG.warning("API call refused: %s", message)
    return gr.Error(message, print_exception=False)


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def text_field(label: str, max_chars: int = MAX_FIELD_CHARS, **kwargs) -> gr.Textbox:
    """A text argument of the API: text (or null) of at most `max_chars` characters, else a
    message naming the field and the limit. (A plain gr.Textbox whose preprocessing checks
    first: a subclass of a Gradio component would write a .pyi file beside this module.)"""
    field = gr.Textbox(label=label, **kwargs)
    plain = field.preprocess

    def preprocess(payload):
        if payload is None:
            return None
        if not isinstance(payload, str):
            raise refused(f"{label}: expected text, got {type(payload).__name__} {_shown(payload)}")
        if len(payload) > max_chars:
            raise refused(f"{label}: {len(payload):,} characters; the limit is {max_chars:,}")
        return plain(payload)

    field.preprocess = preprocess
    return field


def number_field(label: str, whole: bool = False, minimum: float | None = None, maximum: float | None = None,
                 **kwargs) -> gr.Number:
    """A number argument of the API (`whole`: an integer, never rounded: 74.9 is refused, not
    read as 75) within [minimum, maximum]; null passes as None."""
    field = gr.Number(label=label, precision=0 if whole else None, **kwargs)
    kind = "a whole number" if whole else "a number"

    def preprocess(payload):
        if payload is None:
            return None
        if isinstance(payload, bool) or not isinstance(payload, (int, float)):
            raise refused(f"{label}: expected {kind}, got {type(payload).__name__} {_shown(payload)}")
        if not math.isfinite(payload) or (whole and payload != int(payload)):
            raise refused(f"{label}: expected {kind}, got {payload!r}")
        if (minimum is not None and payload < minimum) or (maximum is not None and payload > maximum):
            raise refused(f"{label}: {payload!r} is out of range ({minimum:,} to {maximum:,})")
        return int(payload) if whole else float(payload)

    field.preprocess = preprocess
    return field


def check_argument_count(block_fn, inputs: list) -> None:
    """`Blocks.validate_inputs` for every event: a call with too few arguments is refused in
    words naming the ones missing (Gradio's own check raises with a traceback in the log), and
    so is a file given as a path on the server instead of uploaded (Gradio refused it with an
    empty error, `{"error": null}`, and a traceback in the log)."""
    if len(inputs) < len(block_fn.inputs):
        missing = ["the session's state (send null)" if isinstance(block, gr.State) else
                   getattr(block, "label", None) or type(block).__name__ for block in block_fn.inputs[len(inputs):]]
        raise refused(f"{block_fn.api_name or 'this call'}: {len(inputs)} argument(s) given, "
                      f"{len(block_fn.inputs)} needed; missing: {', '.join(map(str, missing))}")
    for block, value in zip(block_fn.inputs, inputs):
        if _server_path(value):
            raise refused(f"{getattr(block, 'label', None) or 'file'}: upload the file (gradio_client's handle_file "
                          "does it, or POST it to /gradio_api/upload first); a path on the server is not read")


def _server_path(value) -> bool:
    """Whether `value` is a file reference (FileData) to a path outside Gradio's upload folder."""
    from gradio.utils import abspath, get_upload_folder, is_in_or_equal

    if not isinstance(value, dict) or not isinstance(value.get("path"), str):
        return False
    if (value.get("meta") or {}).get("_type") != "gradio.FileData" or "://" in value["path"]:
        return False
    return not is_in_or_equal(abspath(value["path"]), get_upload_folder())


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
    request = in_words(ScoreRequest.grid, images, caption_list, split_lines(references), lang or AUTO, chosen)
    outcome = in_words(score_request, engine.AppScorer(profile), request, cache)
    outcome.messages = messages
    return outcome_to_json(outcome)


def perturb_endpoint(text: str, op: str = "all", p: float | None = None, seed: float = 0, lang: str = AUTO,
                     critical: str | None = None) -> list[dict]:
    """Perturb a caption as PR-MCS / UMIC do and say what changed. Open to everyone.

    Args:
        text: the caption to perturb.
        op: repetition, removal, masking, jumble (alias permutation), substitution, keyword-substitution, repeat-remove, or "all" (the five PR-MCS operations).
        p: per-token probability (for keyword-substitution the fraction of keywords replaced); empty for each operation's paper default (repetition 0.4, removal 0.6, masking 0.4, keyword-substitution 0.3, repeat-remove 0.3).
        seed: random seed; the same inputs and seed give the same result.
        lang: language code (en, de, fr, es, ja, ...) or "auto" to detect it.
        critical: the caption's critical objects separated by ";" (substitution swaps them).

    Returns:
        one object per operation: text, op, p, seed, lang, parent, changed_spans (character
        offsets into text; zero width where words were removed), noop and noop_reason.
    """
    results = in_words(lambda: perturb_caption(text, op or "all", None if p is None else float(p), int(seed or 0),
                                               lang or AUTO, parse_critical(critical)))
    return [r.to_dict() | {"noop_reason": r.noop_reason} for r in results]


def in_words(call, *args):
    """`call(*args)`, with the library's refusals (PermissionError, ValueError, LookupError; a
    gr.Error is a ValueError and keeps its words) sent to the caller as the app's gr.Error."""
    try:
        return call(*args)
    except (PermissionError, ValueError, LookupError) as exc:
        raise as_gradio_error(exc) from None


def _records(frame: pd.DataFrame | None) -> list[dict] | None:
    """A table as JSON rows, missing values as null."""
    if frame is None:
        return None
    return frame.astype(object).where(frame.notna(), None).to_dict(orient="records")


def _metric_list(metrics: str | None) -> list[str]:
    return [m.strip() for m in (metrics or "").split(",") if m.strip()]


def analyze_endpoint(profile: str, collection: str, metrics: str, request: gr.Request) -> dict:
    """The Analyze tab's report of a collection (researcher or admin session)."""
    chosen = in_words(lambda: _metric_list(metrics) or engine.metric_names(profile))
    report = in_words(analyse_collection, api_account(request), collection, engine.AppScorer(profile), chosen)
    return {"summary": report.summary, "correlations": _records(correlation_cells(report.correlations)),
            "robustness": _records(robustness_cells(report.robustness))}


FAILURE_MODES = {"disagree": DISAGREE, "unmoved": UNMOVED}


def failure_cases_endpoint(profile: str, collection: str, metrics: str, mode: str, limit: float,
                           request: gr.Request) -> list[dict]:
    """The Failure cases tab's ranking of a collection (researcher or admin session)."""
    if mode not in FAILURE_MODES:
        raise gr.Error(f"mode must be one of: {', '.join(FAILURE_MODES)}")
    chosen = in_words(lambda: _metric_list(metrics) or engine.metric_names(profile))
    rows = in_words(collection_failure_cases, api_account(request), collection, engine.AppScorer(profile), chosen,
                    FAILURE_MODES[mode])
    return _records(case_cells(filter_cases(rows, ANY, ANY, ANY, max(1, int(limit or 20))), compact=False))


ENDPOINTS = ("score", "perturb", "login", "next_item", "rate", "next_pair", "judge_pair", "analyze", "failure_cases")


def login_endpoint(name: str, password: str, request: gr.Request) -> dict:
    """Log in: a new session token, for the X-CapLens-Token header of later calls (the rating
    and analysis tools act as that account). Throttled per account and per client.

    Args:
        name: the account's user name.
        password: its password.

    Returns:
        user, role, token, expires_at (ISO 8601) and a message.
    """
    login = in_words(log_in, name, password, client_address(request))
    return {"user": login.account.name, "role": login.account.role, "token": login.token,
            "expires_at": login.expires_at.isoformat(),
            "message": login_message(login.account.name, login.account.role)}


def next_item_endpoint(collection: str, request: gr.Request) -> dict:
    """The next caption the logged-in user (X-CapLens-Token header) should rate.

    Args:
        collection: the collection's name.

    Returns:
        caption_id (null when there is nothing to rate now), text, language, image (the picture to
        rate the caption by: a JPEG data URI, its longer side at most 512 px; null without an item),
        references (the image's reference captions in that language), progress, and notice: what
        the study says to the annotator (a qualification round's progress and feedback, an
        attention check's instruction, or why no item comes: a failed round or a pause).
    """
    screen = in_words(rating_screen, api_account(request), collection)
    return {"caption_id": screen.caption_id, "text": screen.text, "language": screen.language,
            "image": picture_data_uri(screen.image_file if screen.caption_id is not None else None),
            "references": screen.references, "progress": screen.progress, "notice": screen.notice}


def rate_endpoint(caption_id: float, overall: float, fluency: float | None = None, relevance: float | None = None,
                  descriptiveness: float | None = None, request: gr.Request | None = None) -> dict:
    """Rate a caption as the logged-in user (X-CapLens-Token header; an annotator account).
    Rating a caption again replaces the whole rating (a new version): an aspect sent as null
    is stored as not rated, as in the Rate view, not kept from the earlier version.

    Args:
        caption_id: the caption's id, from next_item.
        overall: the overall quality, 0 to 1.
        fluency: optional, 0 to 1; omit it or give null to leave it unset.
        relevance: optional, 0 to 1; omit it or give null to leave it unset.
        descriptiveness: optional, 0 to 1; omit it or give null to leave it unset.

    Returns:
        the stored rating.
    """
    if caption_id is None or overall is None:
        raise gr.Error("caption_id and overall are required")
    return in_words(rate, api_account(request), int(caption_id), float(overall), fluency, relevance, descriptiveness)


def _pair_json(screen) -> dict:
    return {"pair_id": screen.item_id, "left": screen.left if screen.item_id is not None else None,
            "right": screen.right if screen.item_id is not None else None,
            "image": picture_data_uri(screen.image_file if screen.item_id is not None else None), "chosen": screen.chosen,
            "progress": screen.progress,
            "message": " ".join(m for m in (screen.message, "" if screen.item_id is not None else screen.left) if m)}


def next_pair_endpoint(collection: str, request: gr.Request) -> dict:
    """The next pair of captions the logged-in user (X-CapLens-Token header) should compare:
    which of the two describes the image better. The left/right order is this annotator's own
    (blind, fixed per pair); judge_pair takes "left", "right" or "tie" in that order.

    Args:
        collection: the collection's name.

    Returns:
        pair_id (null when there is nothing to compare now), left, right, image (the picture both
        captions describe: a JPEG data URI, its longer side at most 512 px), progress, and message
        (why no pair comes: all done, or the study's qualification round or a pause).
    """
    return _pair_json(in_words(pair_screen, api_account(request), collection))


def judge_pair_endpoint(collection: str, pair_id: float, choice: str, request: gr.Request) -> dict:
    """Say which caption of a pair is better, as the logged-in user saw it in next_pair; judging
    a pair again changes the judgment. Answers with the next pair.

    Args:
        collection: the collection's name.
        pair_id: the pair's id, from next_pair.
        choice: "left", "right" or "tie".

    Returns:
        the next pair, as next_pair gives it; message says the choice was saved.
    """
    if pair_id is None or not choice:
        raise gr.Error("pair_id and choice are required")
    return _pair_json(in_words(judge_and_next, api_account(request), collection, int(pair_id), choice))


# Endpoints that also answer a plain HTTP POST to /gradio_api/run/<name> beside the queue: one
# request and one answer, a few milliseconds of transport instead of the queue's join and event
# stream (docs/app.md, *Direct HTTP*). Their limits stay: argument checks, upload quota, per-client and total
# heavy-work slots (app.access). The annotation endpoints are short database transactions that
# a crowd calls many times a minute: through the queue, its join and event stream cost a
# rating more server time than the rating's own transaction.
DIRECT_ENDPOINTS = ("score", "perturb", "next_item", "rate", "next_pair", "judge_pair")


def _endpoint(api_name: str, fn, inputs: list, result_label: str) -> None:
    """A hidden button named `api_name` whose click calls `fn` and answers in a JSON component.
    The function the event holds is `fn` under the endpoint's name, so the MCP tool is called
    `api_name` too, with `fn`'s docstring as its description. Endpoints of DIRECT_ENDPOINTS
    skip the queue."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        return fn(*args, **kwargs)

    call.__name__ = call.__qualname__ = api_name
    result = gr.JSON(label=result_label)
    gr.Button(api_name).click(call, inputs, result, api_name=api_name, queue=api_name not in DIRECT_ENDPOINTS)


def _nullable(number: gr.Number) -> gr.Number:
    """A Number input whose API type is "a number or null": the MCP server checks a tool's
    arguments against that type, and an optional aspect left unset is null (gr.Number's own
    preprocessing already passes None through)."""
    number.api_info_as_input = lambda: {"anyOf": [{"type": "number"}, {"type": "null"}]}
    return number


def build(ctx: engine.AppContext) -> None:
    """Hidden components and the named endpoints bound to them."""
    score_cache = gr.State({})

    # Every argument after the image defaults to None in the signature (so the image may be left
    # out); captions_text is still required, and score_endpoint says so when it is missing.
    def score_api(image_path: str | None = None, captions_text: str | None = None, references_text: str | None = None,
                  lang_code: str = AUTO, metric_list: str | None = None, cache: dict | None = None):
        """Score captions of one image with every metric of the running profile. Open to everyone.

        Args:
            image_path: the image, as an http(s) URL the server may fetch (public hosts only) or a data URI ("data:image/png;base64,..."); omit it to score with the text metrics only.
            captions_text: required: the candidate captions, one per line.
            references_text: reference captions, one per line (optional; the reference metrics need them).
            lang_code: the captions' language code (en, de, fr, es, ja, ...) or "auto" to detect it.
            metric_list: metric names separated by commas (e.g. "CLIP-S,BLEU-4"); empty for all.

        Returns:
            rows (one per caption, every metric's score), metrics (each one's backbone and status:
            "available" or "unavailable: reason"), computed_now and messages.
        """
        # `cache` (the session's gr.State) is updated in place, so it is no output: Gradio's MCP
        # server cannot answer for a tool with a State output ("pop index out of range").
        return score_endpoint(ctx.profile, image_path, captions_text, references_text, lang_code, metric_list, cache)

    # Optional arguments default to None in the signature, which makes them optional MCP arguments.
    def analyze_api(collection: str, metrics: str | None = None, request: gr.Request | None = None) -> dict:
        """Correlation of each metric with a collection's human ratings per language (Kendall tau-c
        and tau-b, Pearson, Spearman with bootstrap 95 % intervals) and its robustness to the
        collection's stored perturbations (PR-MCS Table 7 layout). Needs a researcher or admin
        session (X-CapLens-Token header from login).

        Args:
            collection: the collection's name.
            metrics: metric names separated by commas; empty for every metric of the running profile.

        Returns:
            summary, correlations (rows per language and metric) and robustness (rows per language
            and metric, null when the collection stores no perturbations).
        """
        return analyze_endpoint(ctx.profile, collection, metrics, request)

    def failure_cases_api(collection: str, metrics: str | None = None, mode: str = "disagree", limit: float = 20,
                          request: gr.Request | None = None) -> list[dict]:
        """A collection's failure cases of each metric. Needs a researcher or admin session
        (X-CapLens-Token header from login).

        Args:
            collection: the collection's name.
            metrics: metric names separated by commas; empty for every metric of the running profile.
            mode: "disagree" (rated captions where metric and humans disagree most) or "unmoved" (perturbed captions whose score barely moved, smallest absolute change first).
            limit: at most this many cases (default 20).

        Returns:
            one row per case: caption_id, image_id, candidate, lang, op, metric, metric score,
            human, rank gap, change %.
        """
        return failure_cases_endpoint(ctx.profile, collection, metrics, mode, limit, request)

    with gr.Column(visible=False):
        _endpoint("score", score_api, [gr.File(label="image", file_count="single"),
                                       text_field("captions", max_chars=MAX_LINES_CHARS),
                                       text_field("references", max_chars=MAX_LINES_CHARS),
                                       text_field("lang", value=AUTO), text_field("metrics"), score_cache],
                  "scores")
        _endpoint("perturb", perturb_endpoint, [text_field("text", max_chars=caption_max_chars()),
                                                text_field("op", value="all"),
                                                number_field("p", value=None),
                                                number_field("seed", whole=True, minimum=0, maximum=MAX_SEED, value=0),
                                                text_field("lang", value=AUTO),
                                                text_field("critical", max_chars=caption_max_chars())],
                  "perturbations")
        _endpoint("login", login_endpoint, [text_field("name"), text_field("password", type="password")],
                  "login")
        _endpoint("next_item", next_item_endpoint, [text_field("collection")], "item")
        aspects = [_nullable(number_field(name, value=None)) for name in ("fluency", "relevance", "descriptiveness")]
        _endpoint("rate", rate_endpoint, [number_field("caption_id", whole=True, minimum=1, maximum=MAX_ID),
                                          number_field("overall"), *aspects], "rating")
        _endpoint("next_pair", next_pair_endpoint, [text_field("collection")], "pair")
        _endpoint("judge_pair", judge_pair_endpoint,
                  [text_field("collection"), number_field("pair_id", whole=True, minimum=1, maximum=MAX_ID),
                   text_field("choice")], "pair")
        _endpoint("analyze", analyze_api, [text_field("collection"), text_field("metrics")], "report")
        _endpoint("failure_cases", failure_cases_api,
                  [text_field("collection"), text_field("metrics"),
                   text_field("mode", value="disagree"),
                   number_field("limit", whole=True, minimum=1, maximum=10_000, value=20)],
                  "cases")
