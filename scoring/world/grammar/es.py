"""Spanish captions: gender agreement, colour and size after the noun, de + el -> del."""
from __future__ import annotations

from . import CopulaGrammar, Mention

NOUNS = {"circle": ("círculo", "m"), "square": ("cuadrado", "m"), "triangle": ("triángulo", "m"),
         "star": ("estrella", "f"), "diamond": ("rombo", "m"), "cross": ("cruz", "f")}
COLOURS = {"red": ("rojo", "roja"), "blue": ("azul", "azul"), "green": ("verde", "verde"),
           "yellow": ("amarillo", "amarilla"), "purple": ("morado", "morada"), "brown": ("marrón", "marrón"),
           "black": ("negro", "negra"), "white": ("blanco", "blanca")}
SIZES = {"small": ("pequeño", "pequeña"), "large": ("grande", "grande")}
BACKGROUNDS = {"grey": "gris", "light blue": "azul claro", "light green": "verde claro", "cream": "crema"}
NUMBERS = {1: "una", 2: "dos", 3: "tres", 4: "cuatro", 5: "cinco", 6: "seis"}
POSITIONS = {
    "top-left": "arriba a la izquierda", "top": "arriba", "top-right": "arriba a la derecha",
    "left": "a la izquierda", "centre": "en el centro", "right": "a la derecha",
    "bottom-left": "abajo a la izquierda", "bottom": "abajo", "bottom-right": "abajo a la derecha",
}
RELATIONS = {"left of": "a la izquierda de", "right of": "a la derecha de", "above": "encima de",
             "below": "debajo de", "next to": "al lado de"}


def noun_phrase(m: Mention, definite: bool, with_size: bool) -> str:
    noun, gender = NOUNS[m.shape]
    g = 0 if gender == "m" else 1
    article = (("el", "la") if definite else ("un", "una"))[g]
    words = [article, noun, COLOURS[m.colour][g]] + ([SIZES[m.size][g]] if with_size else [])
    return " ".join(words)


def prepositional_phrase(relation: str, m: Mention, definite: bool) -> str:
    phrase = f"{RELATIONS[relation]} {noun_phrase(m, definite, with_size=not definite)}"
    return phrase.replace(" de el ", " del ")


class Spanish(CopulaGrammar):
    lang = "es"
    copula = "está"
    nouns = NOUNS
    positions = POSITIONS

    def intro(self, count: int, background: str) -> str:
        noun = "forma" if count == 1 else "formas"
        return f"La imagen muestra {NUMBERS[count]} {noun} sobre un fondo {BACKGROUNDS[background]}."

    def noun_phrase(self, m: Mention, definite: bool, with_size: bool) -> str:
        return noun_phrase(m, definite, with_size)

    def prepositional_phrase(self, relation: str, m: Mention, definite: bool) -> str:
        return prepositional_phrase(relation, m, definite)
