"""Caption languages the app offers, and automatic detection for the "auto" choice.

Detection is langid.py (offline), restricted to LANGUAGES so a short caption is never
guessed as a language no metric here handles.
"""
from __future__ import annotations

from functools import lru_cache

# The five languages of PR-MCS first, then other common ones the multilingual encoders cover.
LANGUAGES = {
    "en": "English",
    "de": "German",
    "fr": "French",
    "es": "Spanish",
    "ja": "Japanese",
    "it": "Italian",
    "pt": "Portuguese",
    "nl": "Dutch",
    "ru": "Russian",
    "zh": "Chinese",
    "ko": "Korean",
    "ar": "Arabic",
}
AUTO = "auto"


@lru_cache(maxsize=1)
def _identifier():
    from langid.langid import LanguageIdentifier, model

    identifier = LanguageIdentifier.from_modelstring(model, norm_probs=True)
    identifier.set_languages(list(LANGUAGES))
    return identifier


def detect_language(text: str, default: str = "en") -> str:
    """Best guess among LANGUAGES; `default` for empty or very short text."""
    if len(text.strip()) < 3:
        return default
    code, _ = _identifier().classify(text)
    return code


def resolve_language(choice: str | None, text: str) -> str:
    """The language a caption is scored in: the user's choice, or detected when "auto"."""
    if not choice or choice == AUTO:
        return detect_language(text)
    return choice
