"""Which metric profile to serve when none is named: the published hub checkpoints when they
load, else the offline world models, and why."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from PIL import Image

from scoring.api import ScoreItem, get_scorer

# score(profile, items, metrics) -> {metric: MetricResult}; a server passes its GPU-wrapped one.
ScoreFunction = Callable[[str, list, list], dict]


def _score(profile: str, items: list, metrics: list):
    return get_scorer(profile).score(items, metrics)


@dataclass(frozen=True)
class ProfileChoice:
    """The profile to use; `hub_problem` / `world_problem` say why those did not load (None:
    loaded, or not tried because the profile was named)."""

    profile: str
    explicit: bool
    hub_problem: str | None = None
    world_problem: str | None = None


def probe(profile: str, score: ScoreFunction = _score) -> str | None:
    """None when the profile's CLIP backbone loads and scores, else the reason it does not."""
    try:
        item = ScoreItem(image=Image.new("RGB", (32, 32), (127, 127, 127)), candidate="a grey square")
        result = score(profile, [item], ["CLIP-S"])["CLIP-S"]
    except Exception as exc:  # any failure to build the profile means: not usable here
        return f"{type(exc).__name__}: {exc}"
    return result.unavailable


def choose_profile(requested: str | None, score: ScoreFunction = _score) -> ProfileChoice:
    """An explicit request (argument or CAPLENS_PROFILE) is honoured. Otherwise the hub
    checkpoints are tried with one probe scoring; when they cannot be loaded (offline, no
    cache) the synthetic `world` profile is used. If neither loads it stays on `hub`, whose
    metrics then each say why they are unavailable."""
    explicit = requested or os.environ.get("CAPLENS_PROFILE")
    if explicit:
        return ProfileChoice(explicit, True)
    hub_problem = probe("hub", score)
    if hub_problem is None:
        return ProfileChoice("hub", False)
    world_problem = probe("world", score)
    return ProfileChoice("world" if world_problem is None else "hub", False, hub_problem, world_problem)
