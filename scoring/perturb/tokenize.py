"""Word tokens for the perturbations, with character offsets.

PR-MCS (Algorithm 1) perturbs whitespace-separated words (punctuation stays attached, so
"man," is one token). Japanese has no spaces: its tokens are morphemes from MeCab (fugashi)
with the UniDic-lite dictionary, both installed from PyPI, and perturbed text is joined
without spaces.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import lru_cache

# Languages whose words are not separated by spaces: tokens are morphemes, joined with "".
MORPHEME_LANGUAGES = frozenset({"ja"})
# Languages without spaces for which no morpheme tokenizer is installed: splitting them on
# whitespace would silently treat a whole sentence as one word.
NO_TOKENIZER = {
    "zh": "Chinese is written without spaces and CapLens ships no Chinese word segmenter",
    "th": "Thai is written without spaces and CapLens ships no Thai word segmenter",
    "lo": "Lao is written without spaces and CapLens ships no Lao word segmenter",
    "km": "Khmer is written without spaces and CapLens ships no Khmer word segmenter",
    "my": "Burmese is written without spaces and CapLens ships no Burmese word segmenter",
}

_LANG_CODE = re.compile(r"^[A-Za-z]{2,3}$")


@dataclass(frozen=True)
class Token:
    """One word token and where it sits in the text it came from."""

    text: str
    start: int
    end: int


def normalize_lang(lang: str) -> str:
    """Primary language subtag in lower case ("ja-JP" -> "ja"); ValueError if malformed."""
    primary = str(lang or "").strip().replace("_", "-").split("-")[0]
    if not _LANG_CODE.match(primary):
        raise ValueError(f"invalid language code {lang!r} (expected e.g. en, de, fr, es, ja)")
    return primary.lower()


def joiner(lang: str) -> str:
    """The string placed between tokens when a perturbed caption is written back."""
    return "" if normalize_lang(lang) in MORPHEME_LANGUAGES else " "


def tokenize_spans(text: str, lang: str = "en") -> list[Token]:
    """Tokens of `text` with their character offsets (see module docstring)."""
    code = normalize_lang(lang)
    if code in NO_TOKENIZER:
        raise LookupError(f"tokenization unavailable for {code}: {NO_TOKENIZER[code]}")
    if code in MORPHEME_LANGUAGES:
        return [Token(m.text, m.start, m.end) for m in japanese_morphemes(text)]
    return [Token(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", text)]


def tokenize(text: str, lang: str = "en") -> list[str]:
    """Token strings of `text`: whitespace words, or morphemes for Japanese."""
    return [token.text for token in tokenize_spans(text, lang)]


def detokenize(tokens, lang: str = "en") -> str:
    """Join tokens back into a caption (with spaces, or without for Japanese)."""
    return joiner(lang).join(tokens)


# --- Japanese morphemes (MeCab via fugashi, UniDic-lite dictionary) -----------------------


@dataclass(frozen=True)
class Morpheme:
    """A MeCab morpheme with its UniDic part of speech and conjugation form."""

    text: str
    start: int
    end: int
    pos1: str
    pos2: str
    conjugation_form: str


_MECAB_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _mecab():
    """The MeCab tagger, loaded once (its dictionary comes from the unidic-lite package)."""
    try:
        import fugashi
        import unidic_lite  # noqa: F401  (the dictionary fugashi's default Tagger uses)
    except ImportError as exc:
        raise LookupError(
            "Japanese tokenization unavailable for ja: the fugashi and unidic-lite packages "
            f"are not installed ({exc.name})"
        ) from exc
    return fugashi.Tagger()


def japanese_morphemes(text: str) -> list[Morpheme]:
    """Morphemes of Japanese `text` with offsets; whitespace between them is skipped."""
    tagger = _mecab()
    # MeCab stops at a NUL character; a space of the same length keeps the offsets.
    with _MECAB_LOCK:
        nodes = [(node.surface, node.feature) for node in tagger(text.replace("\x00", " "))]
    morphemes = []
    cursor = 0
    for surface, feature in nodes:
        if not surface or surface.isspace():  # MeCab returns some spaces (U+3000, \r) as nodes
            continue
        start = text.find(surface, cursor)
        if start < 0:  # MeCab normalised the surface: fall back to the running position
            start = cursor
        end = start + len(surface)
        morphemes.append(
            Morpheme(
                surface,
                start,
                end,
                feature.pos1 or "",
                feature.pos2 or "",
                feature.cForm if feature.cForm not in (None, "*") else "",
            )
        )
        cursor = end
    return morphemes
