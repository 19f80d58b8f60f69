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


OFFLINE_SIGNS = ("connecterror", "connection", "connect", "offline", "resolve", "network", "timed out", "timeout",
                 "local cache", "localentrynotfound", "max retries", "name or service")
HOW_TO_CHANGE = ("to use the published hub checkpoints, run once with a network connection (they are then cached), "
                 "or choose a profile with --profile NAME or the CAPLENS_PROFILE environment variable")


def _short_reason(problem: str) -> str:
    """A probe's failure in words: "no network and no cached copy" for the many forms an
    offline download takes (ConnectError, LocalEntryNotFoundError, ...), else its first line."""
    lowered = problem.lower()
    if any(sign in lowered for sign in OFFLINE_SIGNS):
        return "no network connection and no cached copy"
    line = problem.strip().splitlines()[0] if problem.strip() else "unknown reason"
    return line if len(line) <= 160 else line[:159] + "…"


def choice_message(choice: "ProfileChoice") -> tuple[str, str]:
    """The headline and the explanation that `caplens serve` (its banner) and `caplens score`
    (stderr) both show for `choice`."""
    if choice.explicit:
        return f"profile {choice.profile}", "chosen explicitly"
    if choice.hub_problem is None:
        return "profile hub", "the published checkpoints"
    if choice.world_problem is None:
        return ("offline: using the world models",
                f"the hub checkpoints could not be loaded ({_short_reason(choice.hub_problem)}), so the small models "
                "trained on CapLens's synthetic world score instead; their scores are for demonstration and testing, "
                f"not comparable with published numbers. To change it: {HOW_TO_CHANGE}.")
    return ("offline: no models load",
            f"the hub checkpoints could not be loaded ({_short_reason(choice.hub_problem)}) and neither could the "
            f"world models ({_short_reason(choice.world_problem)}): model-based metrics say why they are unavailable. "
            f"To change it: {HOW_TO_CHANGE}.")


def choice_line(choice: "ProfileChoice") -> str:
    """The one line every command prints for ``choice``: `caplens serve` (after "CapLens: "),
    `caplens score` and every `caplens analyze` command (on stderr), in the banner's words."""
    headline, detail = choice_message(choice)
    return f"{headline}: {detail}"


def needs_saying(choice: "ProfileChoice") -> bool:
    """Whether a command that was not told a profile must say which it uses: the hub did not load."""
    return not choice.explicit and choice.hub_problem is not None


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
