"""The app's single door to the scoring library.

The scorer is the process-wide instance of `scoring.api.get_scorer`, so backbones load
once and stay loaded between requests; on ZeroGPU Spaces scoring runs under `spaces.GPU`.
"""
from __future__ import annotations

from dataclasses import dataclass

from annotation.errors import public_text
from app.gpu import gpu


@dataclass(frozen=True)
class AppContext:
    """What every tab needs to know about the running app."""

    profile: str
    banner: str  # Markdown, for the top of the page
    console: str  # the same words as plain text, for the operator's console


def get_scorer(profile: str):
    from scoring.api import get_scorer as library_get_scorer

    return library_get_scorer(profile)


def _score(profile: str, items: list, metrics: list[str] | None, cider_document_frequency=None):
    return get_scorer(profile).score(items, metrics=metrics, cider_document_frequency=cider_document_frequency)


score_items = gpu(_score)


class AppScorer:
    """The process-wide scorer of `profile` for library functions that take a scorer: reads
    go to it, scoring goes through `score_items` (so it runs under `spaces.GPU` there)."""

    def __init__(self, profile: str):
        self._profile = profile
        self._scorer = get_scorer(profile)

    def __getattr__(self, name: str):
        return getattr(self._scorer, name)

    def score(self, items: list, metrics: list[str] | None = None, cider_document_frequency=None):
        """`score_items`, with server paths in the reasons a metric cannot run reduced as in
        every message users see (a missing checkpoint under `$CAPLENS_DATA_DIR`)."""
        extra = () if cider_document_frequency is None else (cider_document_frequency,)
        results = score_items(self._profile, items, metrics, *extra)
        for result in results.values():
            if result.unavailable:
                result.unavailable = public_text(result.unavailable)
        return results


def metric_names(profile: str) -> list[str]:
    return list(get_scorer(profile).metric_names())


def choose_profile(requested: str | None) -> AppContext:
    """The profile to serve (`scoring.profile_choice`) with the banner and the console line that
    say which and why, in the words `caplens score` uses too."""
    from scoring.profile_choice import choice_line, choice_message, choose_profile as choose

    choice = choose(requested, score_items)
    headline, detail = choice_message(choice)
    return AppContext(profile=choice.profile, banner=f"**{_plain(headline)}**: {_plain(detail, 600)}",
                      console=choice_line(choice))


def _plain(text: str, limit: int = 200) -> str:
    """Library messages go into the Markdown banner: keep them from being read as markup."""
    text = public_text(text)
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return "".join(f"\\{c}" if c in "\\`*_{}[]<>()#+-.!|" else c for c in text)
