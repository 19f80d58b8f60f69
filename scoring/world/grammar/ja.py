"""Japanese captions: adjectives before the noun, particles が/は/の/に, no spaces."""
from __future__ import annotations

from . import POSITION_KEYS, Grammar, Mention

NOUNS = {"circle": "円", "square": "四角形", "triangle": "三角形", "star": "星", "diamond": "ひし形",
         "cross": "十字"}
COLOURS = {"red": "赤い", "blue": "青い", "green": "緑の", "yellow": "黄色い", "purple": "紫の",
           "brown": "茶色の", "black": "黒い", "white": "白い"}
SIZES = {"small": "小さい", "large": "大きい"}
BACKGROUNDS = {"grey": "灰色", "light blue": "水色", "light green": "薄緑色", "cream": "クリーム色"}
NUMBERS = {1: "一つ", 2: "二つ", 3: "三つ", 4: "四つ", 5: "五つ", 6: "六つ"}
POSITIONS = {
    "top-left": "左上", "top": "上", "top-right": "右上", "left": "左", "centre": "中央", "right": "右",
    "bottom-left": "左下", "bottom": "下", "bottom-right": "右下",
}
RELATIONS = {"left of": "左", "right of": "右", "above": "上", "below": "下", "next to": "隣"}


def noun_phrase(m: Mention, with_size: bool) -> str:
    return (SIZES[m.size] if with_size else "") + COLOURS[m.colour] + NOUNS[m.shape]


class Japanese(Grammar):
    lang = "ja"
    separator = ""

    def shape_noun(self, shape: str) -> str:
        return NOUNS[shape]

    def intro(self, count: int, background: str) -> str:
        return f"画像には{BACKGROUNDS[background]}の背景に{NUMBERS[count]}の図形があります。"

    def object_subject(self, m: Mention) -> str:
        return noun_phrase(m, with_size=True) + "が"

    def object_position(self, m: Mention) -> str:
        return f"{POSITIONS[POSITION_KEYS[m.cell]]}にあります。"

    def relation_sentence(self, a: Mention, relation: str, b: Mention) -> str:
        return f"{noun_phrase(a, with_size=False)}は{noun_phrase(b, with_size=False)}の{RELATIONS[relation]}にあります。"

    def short_first(self, m: Mention) -> str:
        return noun_phrase(m, with_size=True)

    def short_second(self, relation: str, m: Mention) -> str:
        return f"が{noun_phrase(m, with_size=True)}の{RELATIONS[relation]}にある"
