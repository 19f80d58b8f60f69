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
    headline: str = ""  # the banner's first words as plain text (its one line when folded)


BANNER_FOLD = 120  # a longer banner shows its headline on one line, the rest on a click


def banner_markdown(ctx: AppContext) -> str:
    """The banner for the page: short, as it is; longer (the offline explanation, a storage
    warning), folded into its headline on one line with the details a click away, so that on a
    phone it does not fill the first screen."""
    if len(ctx.banner) <= BANNER_FOLD or not ctx.headline:
        return ctx.banner
    import html

    return (f"<details><summary><strong>{html.escape(ctx.headline)}</strong> (details)</summary>\n\n"
            f"{ctx.banner}\n\n</details>")


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
    from scoring.profile_choice import choose_profile as choose

    return context_for(choose(requested, score_items))


def context_for(choice) -> AppContext:
    """The AppContext of a `scoring.profile_choice.ProfileChoice`: its banner and console line."""
    from scoring.profile_choice import choice_line, choice_message

    headline, detail = choice_message(choice)
    return AppContext(profile=choice.profile, banner=f"**{_plain(headline)}**: {_plain(detail, 600)}",
                      console=choice_line(choice), headline=public_text(headline))


def _plain(text: str, limit: int = 200) -> str:
    """Library messages go into the Markdown banner: keep them from being read as markup."""
    text = public_text(text)
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return "".join(f"\\{c}" if c in "\\`*_{}[]<>()#+-.!|" else c for c in text)
