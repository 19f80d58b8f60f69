"""The app's single door to the scoring library.

The scorer is the process-wide instance of `scoring.api.get_scorer`, so backbones load
once and stay loaded between requests; on ZeroGPU Spaces scoring runs under `spaces.GPU`.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.gpu import gpu


@dataclass(frozen=True)
class AppContext:
    """What every tab needs to know about the running app."""

    profile: str
    banner: str


def get_scorer(profile: str):
    from scoring.api import get_scorer as library_get_scorer

    return library_get_scorer(profile)


def _score(profile: str, items: list, metrics: list[str] | None):
    return get_scorer(profile).score(items, metrics=metrics)


score_items = gpu(_score)


class AppScorer:
    """The process-wide scorer of `profile` for library functions that take a scorer: reads
    go to it, scoring goes through `score_items` (so it runs under `spaces.GPU` there)."""

    def __init__(self, profile: str):
        self._profile = profile
        self._scorer = get_scorer(profile)

    def __getattr__(self, name: str):
        return getattr(self._scorer, name)

    def score(self, items: list, metrics: list[str] | None = None):
        return score_items(self._profile, items, metrics)


def metric_names(profile: str) -> list[str]:
    return list(get_scorer(profile).metric_names())


def choose_profile(requested: str | None) -> tuple[str, str]:
    """The profile to serve and a banner line saying which and why.

    An explicit request (argument or CAPLENS_PROFILE) is honoured. Otherwise the real hub
    checkpoints are tried with one probe scoring; when CLIP cannot be loaded (offline, no
    cache) the app falls back to the synthetic `world` profile and says so. If neither
    loads, it stays on `hub`, whose rows then each say why they are unavailable.
    """
    import os

    explicit = requested or os.environ.get("CAPLENS_PROFILE")
    if explicit:
        return explicit, f"Profile **{explicit}** (chosen explicitly)."
    hub_problem = _probe("hub")
    if hub_problem is None:
        return "hub", "Profile **hub**: the published checkpoints."
    world_problem = _probe("world")
    if world_problem is None:
        return (
            "world",
            "Profile **world**: small models trained on CapLens's synthetic world, because the hub "
            f"checkpoints could not be loaded ({_plain(hub_problem)}). Scores are for demonstration and "
            "testing, not comparable with published numbers.",
        )
    return (
        "hub",
        f"Profile **hub**, but its checkpoints could not be loaded ({_plain(hub_problem)}) and neither could "
        f"the offline world models ({_plain(world_problem)}): model-based metrics show why they are unavailable.",
    )


def _probe(profile: str) -> str | None:
    """None when the profile's CLIP backbone loads and scores, else the reason it does not."""
    from PIL import Image

    from scoring.api import ScoreItem

    try:
        probe = ScoreItem(image=Image.new("RGB", (32, 32), (127, 127, 127)), candidate="a grey square")
        result = score_items(profile, [probe], ["CLIP-S"])["CLIP-S"]
    except Exception as exc:  # any failure to build the profile means: not usable here
        return f"{type(exc).__name__}: {exc}"
    return result.unavailable


def _plain(text: str) -> str:
    """Library messages go into the Markdown banner: keep them from being read as markup."""
    text = text if len(text) <= 200 else text[:199] + "…"
    return "".join(f"\\{c}" if c in "\\`*_{}[]<>()#+-.!|" else c for c in text)
