"""Warming a server up in the background, so that the first click on Score or Analyze is warm.

After start, `start_warm_up` loads language detection and every metric of the profile by
scoring one small image and caption with each (backbones, tokenisers, Java for the COCO
metrics), then, once the demo collection exists (a first run fills it beside the server),
analyses it once as its owner: its scores are stored (`annotation.scores.score_store`), so the
first Analyze of it only reads them and correlates. `warm_up_state` says how far it got, for the page's banner.
"""
from __future__ import annotations

import io
import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from annotation.errors import user_message

LOG = logging.getLogger(__name__)
LOADING = "loading the models"
SCORING = "scoring the demo collection"
READY = "ready"
FAILED = "failed"


@dataclass(frozen=True)
class WarmUpState:
    """How far the warm-up got: `stage` (LOADING, SCORING, READY or FAILED; "" before it
    starts), `done` of `total` steps of that stage, seconds since it started, and what failed."""

    stage: str = ""
    done: int = 0
    total: int = 0
    started: float | None = None
    finished: float | None = None
    problem: str = ""

    @property
    def active(self) -> bool:
        return self.stage in (LOADING, SCORING)

    def line(self) -> str:
        """One line for the page while it runs; "" when it is not running."""
        if self.stage == LOADING:
            return (f"Warming up: {LOADING} ({self.done} of {self.total} metrics); the first score may wait "
                    "for them.")
        if self.stage == SCORING:
            return (f"Warming up: {SCORING} once, so that its first analysis only reads the scores "
                    f"({self.done} %).")
        return ""


_state = WarmUpState()
_lock = threading.Lock()


def warm_up_state() -> WarmUpState:
    return _state


def _set(**changes) -> None:
    global _state
    with _lock:
        _state = replace(_state, **changes)


def _probe_image() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (200, 40, 40)).save(buffer, format="PNG")
    return buffer.getvalue()


def load_models(scorer, metrics: Sequence[str]) -> dict[str, str]:
    """Score one image and caption with each metric (loading what it needs); {metric: reason}
    for those that cannot run."""
    from scoring.api import ScoreItem

    from scoring.language_id import detect_language

    item = ScoreItem(image=_probe_image(), candidate="a small red square", references=["a red square", "a red box"],
                     lang="en", image_id="warm-up.png")
    unavailable = {}
    _set(stage=LOADING, done=0, total=len(metrics))
    # Language detection loads its models on its first call (3.6 s on a 2-core machine): here,
    # not in the first score of a caption whose language is left to "auto".
    detect_language(item.candidate)
    for number, name in enumerate(metrics, start=1):
        for metric, result in scorer.score([item], [name]).items():
            if result.unavailable:
                unavailable[metric] = result.unavailable
        _set(done=number)
    return unavailable


def analyze_once(scorer, metrics: Sequence[str], collection: str) -> bool:
    """Analyze `collection` as the account that made it (its scores are stored on the way);
    False when it or its owner is not there."""
    from sqlalchemy import select

    from annotation.people.acting import acting
    from annotation.scores.collection_analysis import collection_analysis
    from annotation.database import database_session
    from db.models import Collection

    with database_session(read_only=True) as session:
        owner = session.scalar(select(Collection.created_by_id).where(Collection.name == collection))
    if owner is None:
        return False

    def progress(fraction, desc=""):
        _set(done=int(round(fraction * 100)), total=100)

    _set(stage=SCORING, done=0, total=100)
    with acting(owner) as (session, user):
        collection_analysis(session, user, collection, scorer, list(metrics), progress=progress)
    return True


def warm_up(scorer, metrics: Sequence[str], collection: str | None, wait_for: threading.Thread | None = None,
            report: Callable[[str], None] = lambda line: None) -> WarmUpState:
    """Load the models, then (after `wait_for`, the demo's seeding) analyze `collection` once;
    `report` gets one line at the end. Failures end the warm-up, never the server."""
    _set(stage=LOADING, started=time.monotonic(), finished=None, problem="")
    try:
        load_models(scorer, metrics)
        if wait_for is not None:
            wait_for.join()
        analyzed = bool(collection) and analyze_once(scorer, metrics, collection)
    except Exception as exc:  # the warm-up is a convenience: the server goes on cold
        if not threading.main_thread().is_alive():  # the process is exiting under it: nothing to report
            return _state
        _set(stage=FAILED, finished=time.monotonic(), problem=user_message(exc))
        LOG.warning("warm-up stopped: %s", _state.problem)
        report(f"warm-up stopped: {_state.problem}")
        return _state
    _set(stage=READY, finished=time.monotonic())
    took = _state.finished - _state.started
    report(f"warmed up in {took:.0f} s: models loaded" + (f", collection {collection!r} scored." if analyzed else "."))
    return _state


def start_warm_up(scorer, metrics: Sequence[str], collection: str | None, wait_for: threading.Thread | None = None,
                  report: Callable[[str], None] = lambda line: None) -> threading.Thread:
    """`warm_up` on a daemon thread; returns it."""
    _set(stage=LOADING, done=0, total=len(metrics), started=time.monotonic(), finished=None, problem="")
    thread = threading.Thread(target=warm_up, args=(scorer, metrics, collection, wait_for, report),
                              name="caplens-warm-up", daemon=True)
    thread.start()
    return thread
