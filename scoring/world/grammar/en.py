"""English captions."""
from __future__ import annotations

from . import CopulaGrammar, Mention

NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
POSITIONS = {
    "top-left": "at the top left", "top": "at the top", "top-right": "at the top right",
    "left": "on the left", "centre": "in the centre", "right": "on the right",
    "bottom-left": "at the bottom left", "bottom": "at the bottom", "bottom-right": "at the bottom right",
}
RELATIONS = {"left of": "to the left of", "right of": "to the right of", "above": "above", "below": "below",
             "next to": "next to"}


def indefinite_article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


class English(CopulaGrammar):
    lang = "en"
    copula = "is"
    positions = POSITIONS

    def shape_noun(self, shape: str) -> str:
        return shape

    def intro(self, count: int, background: str) -> str:
        noun = "shape" if count == 1 else "shapes"
        return f"The picture shows {NUMBERS[count]} {noun} on {indefinite_article(background)} {background} background."

    def noun_phrase(self, m: Mention, definite: bool, with_size: bool) -> str:
        words = ([m.size] if with_size else []) + [m.colour, m.shape]
        return " ".join(["the" if definite else indefinite_article(words[0]), *words])

    def prepositional_phrase(self, relation: str, m: Mention, definite: bool) -> str:
        return f"{RELATIONS[relation]} {self.noun_phrase(m, definite, with_size=not definite)}"
