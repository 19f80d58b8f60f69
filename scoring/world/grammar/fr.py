"""French captions: gender agreement, size adjective before the noun, colour after it,
elision (l'étoile) and de + article contraction (du, de la, de l', d'un)."""
from __future__ import annotations

from . import CopulaGrammar, Mention

NOUNS = {"circle": ("cercle", "m"), "square": ("carré", "m"), "triangle": ("triangle", "m"),
         "star": ("étoile", "f"), "diamond": ("losange", "m"), "cross": ("croix", "f")}
COLOURS = {"red": ("rouge", "rouge"), "blue": ("bleu", "bleue"), "green": ("vert", "verte"),
           "yellow": ("jaune", "jaune"), "purple": ("violet", "violette"), "brown": ("marron", "marron"),
           "black": ("noir", "noire"), "white": ("blanc", "blanche")}
SIZES = {"small": ("petit", "petite"), "large": ("grand", "grande")}
BACKGROUNDS = {"grey": "gris", "light blue": "bleu clair", "light green": "vert clair", "cream": "crème"}
NUMBERS = {1: "une", 2: "deux", 3: "trois", 4: "quatre", 5: "cinq", 6: "six"}
POSITIONS = {
    "top-left": "en haut à gauche", "top": "en haut", "top-right": "en haut à droite",
    "left": "à gauche", "centre": "au centre", "right": "à droite",
    "bottom-left": "en bas à gauche", "bottom": "en bas", "bottom-right": "en bas à droite",
}
RELATIONS = {"left of": "à gauche de", "right of": "à droite de", "above": "au-dessus de",
             "below": "au-dessous de", "next to": "à côté de"}
VOWELS = "aeiouéèêàâîôûh"


def _gender_index(gender: str) -> int:
    return 0 if gender == "m" else 1


def noun_phrase(m: Mention, definite: bool, with_size: bool) -> str:
    noun, gender = NOUNS[m.shape]
    g = _gender_index(gender)
    head = ([SIZES[m.size][g]] if with_size else []) + [noun, COLOURS[m.colour][g]]
    words = " ".join(head)
    if not definite:
        return f"{('un', 'une')[g]} {words}"
    if words[0] in VOWELS:
        return f"l'{words}"
    return f"{('le', 'la')[g]} {words}"


def de_phrase(noun_phrase_text: str) -> str:
    """'de' + noun phrase with the obligatory contractions."""
    for article, contracted in (("le ", "du "), ("un ", "d'un "), ("une ", "d'une ")):
        if noun_phrase_text.startswith(article):
            return contracted + noun_phrase_text[len(article):]
    return "de " + noun_phrase_text


def prepositional_phrase(relation: str, m: Mention, definite: bool) -> str:
    preposition = RELATIONS[relation][: -len(" de")]
    return f"{preposition} {de_phrase(noun_phrase(m, definite, with_size=not definite))}"


class French(CopulaGrammar):
    lang = "fr"
    copula = "est"
    nouns = NOUNS
    positions = POSITIONS

    def intro(self, count: int, background: str) -> str:
        noun = "forme" if count == 1 else "formes"
        return f"L'image montre {NUMBERS[count]} {noun} sur un fond {BACKGROUNDS[background]}."

    def noun_phrase(self, m: Mention, definite: bool, with_size: bool) -> str:
        return noun_phrase(m, definite, with_size)

    def prepositional_phrase(self, relation: str, m: Mention, definite: bool) -> str:
        return prepositional_phrase(relation, m, definite)
