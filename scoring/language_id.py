"""Caption languages the app offers, and automatic detection for the "auto" choice.

Detection is Lingua (`lingua-language-detector`, offline, its models inside the wheel), which
is built for short text: on the synthetic world's captions in five languages (1,310 captions,
`benchmarks/bench_language_id.py`) it errs on 8 with "en" as the default and on 2 with the
caption's own language, where langid.py erred on 52 (and the langid-based detector CapLens had
before, with its prior, on 44 and 30). Its models take about 200 MB once loaded. A caption written
in a script the LANGUAGES use (Latin, Cyrillic, Chinese characters, kana, Hangul, Arabic) is
guessed among LANGUAGES only, so a short caption is never taken for a language no metric here
handles. A caption in any other script (Hebrew, Greek, Thai, Devanagari, ...) is guessed among
all of Lingua's 75 languages, so Hebrew is `he` and not whatever LANGUAGES member its letters
resemble least badly. Text with no letters at all (emoji, digits, punctuation) has no language
to detect: it is UNKNOWN.

A few words can leave two languages close ("un círculo verde grande" reads as Portuguese about
as much as Spanish), so the guess keeps a prior toward `default` (the annotator's or the app's
language): the default is taken unless another of LANGUAGES is more than DEFAULT_PRIOR times as
likely.
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
DEFAULT_PRIOR = 1.5  # how much likelier than `default` another language must be to win (benchmarks/bench_language_id.py)


@lru_cache(maxsize=2)
def _detector(covered_only: bool):
    """Lingua among LANGUAGES, or among all its languages (built once, models loaded lazily)."""
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    if not covered_only:
        return LanguageDetectorBuilder.from_all_languages().build()
    languages = [Language.from_iso_code_639_1(getattr(IsoCode639_1, code.upper())) for code in LANGUAGES]
    return LanguageDetectorBuilder.from_languages(*languages).build()


def _code(language) -> str:
    return language.iso_code_639_1.name.lower()


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
    if 2 * sum(map(_in_covered_script, letters)) < len(letters):
        found = _detector(False).detect_language_of(words)
        return _code(found) if found is not None else UNKNOWN
    likelihood = {_code(c.language): c.value for c in _detector(True).compute_language_confidence_values(words)}
    best = max(likelihood, key=likelihood.get)
    if default in LANGUAGES and likelihood[best] <= DEFAULT_PRIOR * likelihood.get(default, 0.0):
        return default
    return best


@lru_cache(maxsize=1)
def known_codes() -> frozenset[str]:
    """Every language code a caption may be given: LANGUAGES and the 75 languages detection
    knows (ISO 639-1), each of which a multilingual encoder may cover."""
    from lingua import Language

    return frozenset(LANGUAGES) | {_code(language) for language in Language.all()}


def check_language(code: str) -> str:
    """`code` as the two-letter code metrics know ("en-US" and "EN" are "en"), or ValueError naming
    the choices: a typo ("xx", "english") would otherwise score as a language no metric knows,
    without a word. UNKNOWN passes: results carry it (captions without letters), and a caller may
    send it back."""
    normal = code.strip().lower()
    if normal in (AUTO, UNKNOWN):  # UNKNOWN: what detection gives a caption without letters
        return normal
    primary = normal.replace("_", "-").split("-")[0]  # a BCP 47 tag's language: en-US, pt_BR, zh-Hans
    if primary in known_codes():
        return primary
    raise ValueError(f"unknown language code {code!r}: give a two-letter ISO 639-1 code "
                     f"({', '.join(LANGUAGES)}, ...) or {AUTO!r} to detect it")


def resolve_language(choice: str | None, text: str) -> str:
    """The language a caption is scored in: the user's choice, or detected when "auto"."""
    chosen = check_language(choice) if choice else AUTO
    return detect_language(text) if chosen == AUTO else chosen
