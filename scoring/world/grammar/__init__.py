"""Per-language caption grammars: a language-neutral description in, detail units out.

A `Description` says what a caption claims (which objects with which attributes, which
relations, how many shapes, which background). Each language's grammar realises it as an
ordered list of `Unit`s; joining the units gives the caption, and each unit lists the facts it
asserts, so detail units, critical objects and the oracle score are known by construction.
"""
from __future__ import annotations

from dataclasses import dataclass, field

LANGUAGES = ("en", "de", "fr", "es", "ja")

# Grid cell (row, col) -> position key used by every grammar.
POSITION_KEYS = {
    (0, 0): "top-left", (0, 1): "top", (0, 2): "top-right",
    (1, 0): "left", (1, 1): "centre", (1, 2): "right",
    (2, 0): "bottom-left", (2, 1): "bottom", (2, 2): "bottom-right",
}


@dataclass(frozen=True)
class Mention:
    """An object as a caption describes it; `oid` is the scene object meant (None: hallucinated)."""

    shape: str
    colour: str
    size: str
    cell: tuple[int, int]
    oid: int | None


@dataclass(frozen=True)
class Description:
    """What a caption claims. `relations` index into `mentions`."""

    style: str  # "short" or "long"
    mentions: tuple[Mention, ...]
    relations: tuple[tuple[int, str, int], ...] = ()
    count: int | None = None
    background: str | None = None


@dataclass(frozen=True)
class Unit:
    """One detail unit: its text (with any leading space) and the facts it asserts.

    Facts are tuples: ("count",), ("background",), ("shape", i), ("colour", i), ("size", i),
    ("position", i), ("relation", k) with i a mention index and k a relation index.
    """

    text: str
    facts: tuple[tuple, ...] = field(default=())


class Grammar:
    """Shared skeleton; subclasses supply the phrases of one language."""

    lang = ""
    separator = " "  # put between units; Japanese uses ""

    # -- phrases every language provides ---------------------------------------------------
    def intro(self, count: int, background: str) -> str:
        raise NotImplementedError

    def object_subject(self, m: Mention) -> str:
        """Sentence-initial indefinite noun phrase introducing an object (long captions)."""
        raise NotImplementedError

    def object_position(self, m: Mention) -> str:
        """Predicate locating the object just introduced, ending the sentence."""
        raise NotImplementedError

    def relation_sentence(self, a: Mention, relation: str, b: Mention) -> str:
        raise NotImplementedError

    def short_first(self, m: Mention) -> str:
        """Lower-case indefinite noun phrase: a one-object short caption."""
        raise NotImplementedError

    def short_second(self, relation: str, m: Mention) -> str:
        """Continuation of `short_first` relating it to a second object."""
        raise NotImplementedError

    def shape_noun(self, shape: str) -> str:
        raise NotImplementedError

    # -- assembly ------------------------------------------------------------------------------
    def units(self, description: Description) -> list[Unit]:
        d = description
        texts_facts: list[tuple[str, tuple]] = []
        if d.style == "short":
            if not 1 <= len(d.mentions) <= 2:
                raise ValueError("a short caption describes one or two objects")
            texts_facts.append((self.short_first(d.mentions[0]), _object_facts(0)))
            for k, (a, relation, b) in enumerate(d.relations[:1]):
                if (a, b) != (0, 1):
                    raise ValueError("a short caption relates its first object to its second")
                texts_facts.append((self.short_second(relation, d.mentions[1]), (("relation", k),) + _object_facts(1)))
        elif d.style == "long":
            texts_facts.append((self.intro(d.count, d.background), (("count",), ("background",))))
            for i, m in enumerate(d.mentions):
                texts_facts.append((self.object_subject(m), _object_facts(i)))
                texts_facts.append((self.object_position(m), (("position", i),)))
            for k, (a, relation, b) in enumerate(d.relations):
                texts_facts.append((self.relation_sentence(d.mentions[a], relation, d.mentions[b]), (("relation", k),)))
        else:
            raise ValueError(f"unknown caption style {d.style!r}; expected 'short' or 'long'")
        return [Unit((self.separator if i else "") + text, facts) for i, (text, facts) in enumerate(texts_facts)]

    def caption(self, description: Description) -> str:
        return "".join(u.text for u in self.units(description))


class CopulaGrammar(Grammar):
    """Languages whose sentences read "<noun phrase> <copula> <where>" (en, de, fr, es): each
    supplies its noun and prepositional phrases, copula, nouns and positions."""

    copula = ""
    nouns: dict[str, tuple[str, str]] = {}  # shape -> (noun, grammatical gender)
    positions: dict[str, str] = {}  # position key -> phrase

    def noun_phrase(self, m: Mention, definite: bool, with_size: bool) -> str:
        """The object as a subject: indefinite when introduced, definite when referred back to."""
        raise NotImplementedError

    def prepositional_phrase(self, relation: str, m: Mention, definite: bool) -> str:
        raise NotImplementedError

    def shape_noun(self, shape: str) -> str:
        return self.nouns[shape][0]

    def object_subject(self, m: Mention) -> str:
        return capitalise(self.noun_phrase(m, definite=False, with_size=True))

    def object_position(self, m: Mention) -> str:
        return f"{self.copula} {self.positions[POSITION_KEYS[m.cell]]}."

    def relation_sentence(self, a: Mention, relation: str, b: Mention) -> str:
        subject = capitalise(self.noun_phrase(a, definite=True, with_size=False))
        return f"{subject} {self.copula} {self.prepositional_phrase(relation, b, definite=True)}."

    def short_first(self, m: Mention) -> str:
        return self.noun_phrase(m, definite=False, with_size=True)

    def short_second(self, relation: str, m: Mention) -> str:
        return self.prepositional_phrase(relation, m, definite=False)


def _object_facts(i: int) -> tuple:
    return (("shape", i), ("colour", i), ("size", i))


def capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def get_grammar(lang: str) -> Grammar:
    """The grammar for a language code."""
    from . import de, en, es, fr, ja

    grammars = {"en": en.English, "de": de.German, "fr": fr.French, "es": es.Spanish, "ja": ja.Japanese}
    if lang not in grammars:
        raise ValueError(f"no world grammar for language {lang!r}; available: {', '.join(LANGUAGES)}")
    return grammars[lang]()
