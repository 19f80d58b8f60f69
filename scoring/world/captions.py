"""Captions of a scene: descriptions chosen from the scene graph, realised in five languages.

Short captions name one or two objects (CLIP's regime); long captions describe every object
with its attributes and position plus the relations between neighbours in reading order
(40-120 tokens for scenes of three or more objects, SPECS's regime).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace

from .grammar import LANGUAGES, Description, Mention, get_grammar
from .scene import SHAPES, Scene

LONG_MIN_OBJECTS = 3  # fewer objects cannot fill 40 tokens without padding


@dataclass(frozen=True)
class Caption:
    """A caption with its detail units (joining them gives `text`) and what it claims."""

    lang: str
    text: str
    units: tuple[str, ...]
    unit_facts: tuple[tuple[tuple, ...], ...]
    critical_objects: tuple[str, ...]  # shape nouns as written, in order of mention
    description: Description

    @property
    def style(self) -> str:
        return self.description.style

    def to_dict(self) -> dict:
        return {"lang": self.lang, "text": self.text, "style": self.style, "detail_units": list(self.units),
                "critical_objects": list(self.critical_objects)}


def mention_of(scene: Scene, oid: int) -> Mention:
    o = scene.objects[oid]
    return Mention(o.shape, o.colour, o.size, o.cell, oid)


def describe_long(scene: Scene) -> Description:
    """Every object in reading order, each related to the next one."""
    mentions = tuple(mention_of(scene, o.oid) for o in scene.objects)
    relations = tuple((i, scene.relation(i, i + 1), i + 1) for i in range(len(mentions) - 1))
    return Description("long", mentions, relations, count=len(mentions), background=scene.background)


def describe_short(scene: Scene, rng: random.Random, objects: int | None = None) -> Description:
    """One object, or two related ones (chosen by `rng`)."""
    n = objects if objects is not None else rng.choice((1, 2)) if len(scene.objects) > 1 else 1
    if n not in (1, 2) or n > len(scene.objects):
        raise ValueError(f"a short caption of this scene names 1..{min(2, len(scene.objects))} objects, not {n}")
    oids = rng.sample(range(len(scene.objects)), n)
    mentions = tuple(mention_of(scene, oid) for oid in oids)
    relations = ((0, scene.relation(oids[0], oids[1]), 1),) if n == 2 else ()
    return Description("short", mentions, relations)


def realise(description: Description, lang: str) -> Caption:
    """The caption of `description` in `lang`."""
    grammar = get_grammar(lang)
    units = grammar.units(description)
    text = "".join(u.text for u in units)
    nouns: list[str] = []
    for m in description.mentions:
        noun = grammar.shape_noun(m.shape)
        if noun not in nouns:
            nouns.append(noun)
    return Caption(lang, text, tuple(u.text for u in units), tuple(u.facts for u in units), tuple(nouns), description)


def scene_captions(scene: Scene, langs: tuple[str, ...] = LANGUAGES, seed: int = 0) -> dict[str, dict[str, Caption]]:
    """{"short": {lang: Caption}, "long": {lang: Caption}} (long only for scenes with >= 3 objects).

    Every language realises the same description, so the captions are exact translations.
    """
    rng = random.Random(scene.seed * 7919 + seed)
    descriptions = {"short": describe_short(scene, rng)}
    if len(scene.objects) >= LONG_MIN_OBJECTS:
        descriptions["long"] = describe_long(scene)
    return {style: {lang: realise(d, lang) for lang in langs} for style, d in descriptions.items()}


def counterfactual_twin(scene: Scene, description: Description, rng: random.Random,
                        places_share: float | None = None) -> tuple[str, Scene, Description] | None:
    """(edit, twin scene, its description): `scene` changed in one fact that the short
    `description` states, and the same objects described in the changed scene, so the twin's
    caption is true of the twin only and the original's of the original only.

    The edit is one mentioned object's shape (to one no object of its colour has), or, for two
    related objects, their places: the two swap shape, colour and size, so the relation between
    them flips and every cell keeps its reading-order index. None when no edit changes the
    caption (one object whose colour already comes in every other shape). For contrastive
    training whose batch holds image pairs that differ only where a caption does.
    `places_share`: how often the places edit is drawn where it can be (None: as often as each
    shape edit)."""
    if description.style != "short" or any(m.oid is None for m in description.mentions):
        raise ValueError("a counterfactual twin needs a short description of objects in the scene")
    oids = [m.oid for m in description.mentions]
    edits = []
    if len(oids) == 2 and scene.relation(oids[1], oids[0]) != scene.relation(oids[0], oids[1]):
        edits.append("places")
    taken = {(o.shape, o.colour) for o in scene.objects}
    shape_options = {oid: [s for s in SHAPES if (s, scene.objects[oid].colour) not in taken] for oid in oids}
    edits += [f"shape:{oid}" for oid in oids if shape_options[oid]]
    if not edits:
        return None
    if places_share is not None and edits[0] == "places" and len(edits) > 1:
        edit = "places" if rng.random() < places_share else rng.choice(edits[1:])
    else:
        edit = rng.choice(edits)
    objects = list(scene.objects)
    if edit == "places":
        a, b = (scene.objects[oid] for oid in oids)
        objects[a.oid] = replace(a, shape=b.shape, colour=b.colour, size=b.size)
        objects[b.oid] = replace(b, shape=a.shape, colour=a.colour, size=a.size)
        moved = {a.oid: b.oid, b.oid: a.oid}  # where each described object now is
        edit = f"places:{min(oids)}-{max(oids)}"
    else:
        oid = int(edit.split(":")[1])
        new_shape = rng.choice(shape_options[oid])
        objects[oid] = replace(objects[oid], shape=new_shape)
        moved = {}
        edit = f"shape:{oid}:{new_shape}"
    twin = replace(scene, objects=tuple(objects))
    now = [moved.get(oid, oid) for oid in oids]
    relations = ((0, twin.relation(now[0], now[1]), 1),) if len(now) == 2 else ()
    return edit, twin, Description("short", tuple(mention_of(twin, oid) for oid in now), relations)
