"""Caption languages the app offers, and automatic detection for the "auto" choice.

Detection is langid.py (offline). A caption written in a script the LANGUAGES use (Latin,
Cyrillic, Chinese characters, kana, Hangul, Arabic) is guessed among LANGUAGES only, so a
short caption is never taken for a language no metric here handles. A caption in any other
script (Hebrew, Greek, Thai, Devanagari, ...) is guessed among all of langid's languages, so
Hebrew is `he` and not whatever LANGUAGES member its letters resemble least badly. Text with
no letters at all (emoji, digits, punctuation) has no language to detect: it is UNKNOWN.

langid is unsure on a few words ("a large blue circle" scores Spanish above English), so the
guess keeps a prior toward `default` (the annotator's or the app's language): the default is
taken unless another of LANGUAGES is more than DEFAULT_PRIOR times as likely. On the synthetic
world's captions in five languages (1,212 captions) this takes langid's errors from 66 to 55.
"""
from __future__ import annotations

import unicodedata
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
UNKNOWN = "und"  # BCP 47 "undetermined": no letters to tell the language from

# Unicode name prefixes of the scripts LANGUAGES are written in.
_COVERED_SCRIPTS = ("LATIN", "CYRILLIC", "CJK", "HIRAGANA", "KATAKANA", "HANGUL", "ARABIC")
DEFAULT_PRIOR = 20.0  # how much likelier than `default` another language must be to win


@lru_cache(maxsize=1)
def _identifier():
    from langid.langid import LanguageIdentifier, model

    return LanguageIdentifier.from_modelstring(model, norm_probs=True)


def _in_covered_script(letter: str) -> bool:
    words = unicodedata.name(letter, "").replace("-", " ").split()[:2]  # e.g. HALFWIDTH KATAKANA
    return any(word in _COVERED_SCRIPTS for word in words)


def detect_language(text: str, default: str = "en") -> str:
    """Best guess for `text` (see the module docstring): `default` for empty text or under
    three letters, UNKNOWN for text without letters."""
    if not text.strip():
        return default
    # Only letters (and the marks and spaces between them) say anything about the language:
    # an emoji among the words would pull the guess towards Chinese.
    words = "".join(ch if unicodedata.category(ch)[0] in "LM" else " " for ch in unicodedata.normalize("NFKC", text))
    letters = [ch for ch in words if unicodedata.category(ch)[0] == "L"]
    if not letters:
        return UNKNOWN
    if len(words.strip()) < 3:
        return default
    ranked = _identifier().rank(words)
    if 2 * sum(map(_in_covered_script, letters)) < len(letters):
        return ranked[0][0]
    best, best_p = next((code, p) for code, p in ranked if code in LANGUAGES)
    default_p = dict(ranked).get(default, 0.0)
    return default if default in LANGUAGES and best_p <= DEFAULT_PRIOR * default_p else best


def resolve_language(choice: str | None, text: str) -> str:
    """The language a caption is scored in: the user's choice, or detected when "auto"."""
    if not choice or choice == AUTO:
        return detect_language(text)
    return choice
