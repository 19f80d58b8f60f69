"""German captions: gender, case and strong/weak/mixed adjective declension.

Locative prepositions (links von, rechts von, über, unter, neben) govern the dative;
"von dem" contracts to "vom".
"""
from __future__ import annotations

from . import CopulaGrammar, Mention

NOUNS = {"circle": ("Kreis", "m"), "square": ("Quadrat", "n"), "triangle": ("Dreieck", "n"),
         "star": ("Stern", "m"), "diamond": ("Raute", "f"), "cross": ("Kreuz", "n")}
COLOURS = {"red": "rot", "blue": "blau", "green": "grün", "yellow": "gelb", "purple": "violett",
           "brown": "braun", "black": "schwarz", "white": "weiß"}
SIZES = {"small": "klein", "large": "groß"}
BACKGROUNDS = {"grey": "grau", "light blue": "hellblau", "light green": "hellgrün", "cream": "cremefarben"}
NUMBERS = {1: "eine", 2: "zwei", 3: "drei", 4: "vier", 5: "fünf", 6: "sechs"}
POSITIONS = {
    "top-left": "oben links", "top": "oben", "top-right": "oben rechts",
    "left": "links", "centre": "in der Mitte", "right": "rechts",
    "bottom-left": "unten links", "bottom": "unten", "bottom-right": "unten rechts",
}
RELATIONS = {"left of": "links von", "right of": "rechts von", "above": "über", "below": "unter",
             "next to": "neben"}

INDEFINITE = {"nom": {"m": "ein", "n": "ein", "f": "eine"}, "acc": {"m": "einen", "n": "ein", "f": "eine"},
              "dat": {"m": "einem", "n": "einem", "f": "einer"}}
DEFINITE = {"nom": {"m": "der", "n": "das", "f": "die"}, "acc": {"m": "den", "n": "das", "f": "die"},
            "dat": {"m": "dem", "n": "dem", "f": "der"}}
# Adjective endings after ein-words (mixed) and der-words (weak).
MIXED = {"nom": {"m": "er", "n": "es", "f": "e"}, "acc": {"m": "en", "n": "es", "f": "e"},
         "dat": {"m": "en", "n": "en", "f": "en"}}
WEAK = {"nom": {"m": "e", "n": "e", "f": "e"}, "acc": {"m": "en", "n": "e", "f": "e"},
        "dat": {"m": "en", "n": "en", "f": "en"}}


def noun_phrase(m: Mention, definite: bool, case: str, with_size: bool) -> str:
    noun, gender = NOUNS[m.shape]
    article = (DEFINITE if definite else INDEFINITE)[case][gender]
    ending = (WEAK if definite else MIXED)[case][gender]
    adjectives = ([SIZES[m.size]] if with_size else []) + [COLOURS[m.colour]]
    return " ".join([article] + [a + ending for a in adjectives] + [noun])


def prepositional_phrase(relation: str, m: Mention, definite: bool) -> str:
    phrase = f"{RELATIONS[relation]} {noun_phrase(m, definite, 'dat', with_size=not definite)}"
    return phrase.replace("von dem ", "vom ")


class German(CopulaGrammar):
    lang = "de"
    copula = "ist"
    nouns = NOUNS
    positions = POSITIONS

    def intro(self, count: int, background: str) -> str:
        noun = "Form" if count == 1 else "Formen"
        return f"Das Bild zeigt {NUMBERS[count]} {noun} auf einem {BACKGROUNDS[background]}en Hintergrund."

    def noun_phrase(self, m: Mention, definite: bool, with_size: bool) -> str:
        return noun_phrase(m, definite, "nom", with_size)  # subjects are nominative

    def prepositional_phrase(self, relation: str, m: Mention, definite: bool) -> str:
        return prepositional_phrase(relation, m, definite)
