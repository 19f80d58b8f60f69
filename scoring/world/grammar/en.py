"""English captions."""
from __future__ import annotations

from . import POSITION_KEYS, Grammar, Mention, capitalise

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


class English(Grammar):
    lang = "en"

    def shape_noun(self, shape: str) -> str:
        return shape

    def _indefinite(self, m: Mention) -> str:
        return f"{indefinite_article(m.size)} {m.size} {m.colour} {m.shape}"

    def _definite(self, m: Mention) -> str:
        return f"the {m.colour} {m.shape}"

    def intro(self, count: int, background: str) -> str:
        noun = "shape" if count == 1 else "shapes"
        return f"The picture shows {NUMBERS[count]} {noun} on {indefinite_article(background)} {background} background."

    def object_subject(self, m: Mention) -> str:
        return capitalise(self._indefinite(m))

    def object_position(self, m: Mention) -> str:
        return f"is {POSITIONS[POSITION_KEYS[m.cell]]}."

    def relation_sentence(self, a: Mention, relation: str, b: Mention) -> str:
        return f"{capitalise(self._definite(a))} is {RELATIONS[relation]} {self._definite(b)}."

    def short_first(self, m: Mention) -> str:
        return self._indefinite(m)

    def short_second(self, relation: str, m: Mention) -> str:
        return f"{RELATIONS[relation]} {self._indefinite(m)}"
