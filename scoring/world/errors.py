"""Candidate captions with controlled errors, and the oracle score that knows how good each is.

Content errors edit the language-neutral description (so every language carries the same
error); grammatical damage edits the realised text of one detail unit (so units still join to
the caption). The oracle checks every fact a caption asserts against the scene graph.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field, replace

from .captions import Caption, realise
from .grammar import Description, Mention
from .scene import COLOURS, GRID, RELATIONS, SHAPES, Scene, relation_holds, spatial_relation

CONTENT_ERRORS = ("colour", "shape", "relation", "missing", "hallucinated")
GRAMMAR_DAMAGE = ("agreement", "word-order", "dropped-word")
WRONG_FACT_WEIGHT = 2.0  # a false claim costs twice what a true one earns
GRAMMAR_PENALTY = 0.25  # per damaged unit
COVERAGE_FLOOR = 0.6  # a flawless caption naming one object of many still scores 0.6 + 0.4 * coverage


@dataclass(frozen=True)
class Oracle:
    """Ground-truth quality of a caption for its scene, in [0, 1], with its parts."""

    score: float
    correct: int
    wrong: int
    coverage: float
    damage: int


@dataclass(frozen=True)
class Candidate:
    """A candidate caption for a scene, what was done to it, and its oracle score."""

    scene_id: str
    caption: Caption
    errors: tuple[str, ...]
    oracle: Oracle
    damage: tuple[str, ...] = field(default=())

    @property
    def text(self) -> str:
        return self.caption.text

    def to_dict(self) -> dict:
        return {"scene_id": self.scene_id, **self.caption.to_dict(), "errors": list(self.errors),
                "grammar_damage": list(self.damage), "oracle": round(self.oracle.score, 4),
                "oracle_correct": self.oracle.correct, "oracle_wrong": self.oracle.wrong,
                "oracle_coverage": round(self.oracle.coverage, 4)}


# -- facts and the oracle ----------------------------------------------------------------------
def fact_holds(scene: Scene, d: Description, fact: tuple) -> bool:
    kind = fact[0]
    if kind == "count":
        return d.count == len(scene.objects)
    if kind == "background":
        return d.background == scene.background
    if kind == "relation":
        a, relation, b = d.relations[fact[1]]
        oa, ob = d.mentions[a].oid, d.mentions[b].oid
        return oa is not None and ob is not None and relation_holds(scene, oa, relation, ob)
    m = d.mentions[fact[1]]
    if m.oid is None:
        return False
    o = scene.objects[m.oid]
    return {"shape": o.shape == m.shape, "colour": o.colour == m.colour, "size": o.size == m.size,
            "position": o.cell == m.cell}[kind]


def oracle_score(scene: Scene, caption: Caption, damage: int = 0) -> Oracle:
    """Share of true claims (false ones weigh double), scaled by coverage, minus grammar penalties."""
    facts = [f for unit in caption.unit_facts for f in unit]
    verdicts = [fact_holds(scene, caption.description, f) for f in facts]
    correct, wrong = sum(verdicts), len(verdicts) - sum(verdicts)
    precision = max(0.0, 1.0 - WRONG_FACT_WEIGHT * wrong / max(1, len(verdicts)))
    real = {m.oid for m in caption.description.mentions if m.oid is not None}
    coverage = len(real) / len(scene.objects)
    score = precision * (COVERAGE_FLOOR + (1 - COVERAGE_FLOOR) * coverage) - GRAMMAR_PENALTY * damage
    return Oracle(min(1.0, max(0.0, score)), correct, wrong, coverage, damage)


# -- content errors on descriptions ------------------------------------------------------------
def _used_kinds(d: Description) -> set[tuple[str, str]]:
    return {(m.shape, m.colour) for m in d.mentions}


def _scene_kinds(scene: Scene) -> set[tuple[str, str]]:
    return {(o.shape, o.colour) for o in scene.objects}


def _change_attribute(scene: Scene, d: Description, rng: random.Random, attribute: str) -> Description | None:
    real = [i for i, m in enumerate(d.mentions) if m.oid is not None]
    if not real:
        return None
    i = rng.choice(real)
    m = d.mentions[i]
    taken = _used_kinds(d) | _scene_kinds(scene)
    if attribute == "colour":
        options = [c for c in COLOURS if (m.shape, c) not in taken]
        new = replace(m, colour=rng.choice(options)) if options else None
    else:
        options = [s for s in SHAPES if (s, m.colour) not in taken]
        new = replace(m, shape=rng.choice(options)) if options else None
    if new is None:
        return None
    return replace(d, mentions=d.mentions[:i] + (new,) + d.mentions[i + 1:])


def _wrong_relation(scene: Scene, d: Description, rng: random.Random) -> Description | None:
    if not d.relations:
        return None
    k = rng.randrange(len(d.relations))
    a, _, b = d.relations[k]
    oa, ob = d.mentions[a].oid, d.mentions[b].oid
    false = [r for r in RELATIONS if not relation_holds(scene, oa, r, ob)]
    relations = list(d.relations)
    relations[k] = (a, rng.choice(false), b)
    return replace(d, relations=tuple(relations))


def _drop_object(scene: Scene, d: Description, rng: random.Random) -> Description | None:
    if len(d.mentions) < 2:
        return None
    i = rng.randrange(len(d.mentions)) if d.style == "long" else 1
    mentions = d.mentions[:i] + d.mentions[i + 1:]
    relations = [] if d.style == "short" else [  # long captions relate neighbours: keep that, truthfully
        (j, scene.relation(mentions[j].oid, mentions[j + 1].oid), j + 1) for j in range(len(mentions) - 1)]
    return replace(d, mentions=mentions, relations=tuple(relations))


def _hallucinate(scene: Scene, d: Description, rng: random.Random) -> Description | None:
    taken = _used_kinds(d) | _scene_kinds(scene)
    kinds = [(s, c) for s in SHAPES for c in COLOURS if (s, c) not in taken]
    free = [(r, c) for r in range(GRID) for c in range(GRID) if all(o.cell != (r, c) for o in scene.objects)]
    if not kinds or not free:
        return None
    shape, colour = rng.choice(kinds)
    ghost = Mention(shape, colour, rng.choice(("small", "large")), rng.choice(free), None)
    if d.style == "short":  # the ghost becomes (or replaces) the second object
        base = d.mentions[:1]
        return replace(d, mentions=base + (ghost,), relations=((0, spatial_relation(base[0].cell, ghost.cell), 1),))
    last = len(d.mentions) - 1
    return replace(d, mentions=d.mentions + (ghost,),
                   relations=d.relations + ((last, spatial_relation(d.mentions[last].cell, ghost.cell), last + 1),))


def apply_error(scene: Scene, d: Description, kind: str, rng: random.Random) -> Description | None:
    """The description with one controlled content error, or None where the error does not apply."""
    if kind in ("colour", "shape"):
        return _change_attribute(scene, d, rng, kind)
    if kind == "relation":
        return _wrong_relation(scene, d, rng)
    if kind == "missing":
        return _drop_object(scene, d, rng)
    if kind == "hallucinated":
        return _hallucinate(scene, d, rng)
    raise ValueError(f"unknown error kind {kind!r}; expected one of {CONTENT_ERRORS}")


# -- grammatical damage on text ----------------------------------------------------------------
# Function words and their wrong forms: swapping one breaks agreement (gender, case, number).
AGREEMENT_SWAPS = {
    "en": {"is": "are", "a": "an", "an": "a", "shows": "show", "shapes": "shape"},
    "de": {"der": "die", "die": "der", "das": "der", "dem": "den", "den": "dem", "ein": "eine", "eine": "einen",
           "einem": "einer", "einer": "einem", "ist": "sind", "vom": "von"},
    "fr": {"le": "la", "la": "le", "un": "une", "une": "un", "est": "sont", "du": "de la"},
    "es": {"el": "la", "la": "el", "un": "una", "una": "un", "está": "están", "del": "de la"},
}
JA_PARTICLES = "がはにの"
JA_WRONG = {"が": "を", "は": "を", "に": "で", "の": "が"}
DROPPABLE = {
    "en": {"a", "an", "the", "is", "of", "to", "on", "at"},
    "de": {"der", "die", "das", "dem", "den", "ein", "eine", "einem", "einer", "ist", "von", "vom", "auf"},
    "fr": {"le", "la", "un", "une", "est", "de", "du", "sur"},
    "es": {"el", "la", "un", "una", "está", "de", "del", "sobre"},
}


def damage_text(text: str, lang: str, kind: str, rng: random.Random) -> str | None:
    """`text` with one grammatical defect of `kind`, or None where none applies."""
    if lang == "ja":
        return _damage_japanese(text, kind, rng)
    lead = text[: len(text) - len(text.lstrip())]
    words = text.split()
    lowered = [w.lower().strip(".") for w in words]
    if kind == "agreement":
        spots = [i for i, w in enumerate(lowered) if w in AGREEMENT_SWAPS[lang]]
        if not spots:
            return None
        i = rng.choice(spots)
        wrong = AGREEMENT_SWAPS[lang][lowered[i]]
        if words[i][0].isupper():
            wrong = wrong[0].upper() + wrong[1:]
        words[i] = wrong + ("." if words[i].endswith(".") else "")
    elif kind == "word-order":
        if len(words) < 3:
            return None
        i = rng.randrange(len(words) - 2)  # never move the sentence-final word and its full stop
        words[i], words[i + 1] = words[i + 1], words[i]
    elif kind == "dropped-word":
        spots = [i for i, w in enumerate(lowered) if w in DROPPABLE[lang] and not words[i].endswith(".")]
        if not spots or len(words) < 2:
            return None
        del words[rng.choice(spots)]
    else:
        raise ValueError(f"unknown grammatical damage {kind!r}; expected one of {GRAMMAR_DAMAGE}")
    damaged = lead + " ".join(words)
    return damaged if damaged != text else None


def _damage_japanese(text: str, kind: str, rng: random.Random) -> str | None:
    spots = [i for i, ch in enumerate(text) if ch in JA_PARTICLES and i > 0]
    if kind == "agreement":  # Japanese has no agreement; a wrong case particle is the closest defect
        if not spots:
            return None
        i = rng.choice(spots)
        return text[:i] + JA_WRONG[text[i]] + text[i + 1:]
    if kind == "dropped-word":
        if not spots:
            return None
        i = rng.choice(spots)
        return text[:i] + text[i + 1:]
    if kind == "word-order":  # swap two adjacent phrases (split after particles)
        chunks = [c for c in re.split(f"(?<=[{JA_PARTICLES}])", text) if c]
        if len(chunks) < 3:
            return None
        i = rng.randrange(len(chunks) - 2)
        chunks[i], chunks[i + 1] = chunks[i + 1], chunks[i]
        damaged = "".join(chunks)
        return damaged if damaged != text else None
    raise ValueError(f"unknown grammatical damage {kind!r}; expected one of {GRAMMAR_DAMAGE}")


def damage_caption(caption: Caption, kind: str, rng: random.Random) -> Caption | None:
    """The caption with one unit grammatically damaged (units still join to the text)."""
    order = list(range(len(caption.units)))
    rng.shuffle(order)
    for i in order:
        damaged = damage_text(caption.units[i], caption.lang, kind, rng)
        if damaged is not None:
            units = caption.units[:i] + (damaged,) + caption.units[i + 1:]
            return replace(caption, text="".join(units), units=units)
    return None


# -- candidate sets ----------------------------------------------------------------------------
def candidates_for(scene: Scene, description: Description, langs: tuple[str, ...], seed: int = 0,
                   damaged: bool = True) -> list[Candidate]:
    """The correct caption, one candidate per applicable content error, and grammatically damaged ones.

    The same content errors are used in every language (same rng draws), so per-language
    correlations compare like with like.
    """
    out: list[Candidate] = []
    variants: list[tuple[tuple[str, ...], Description]] = [((), description)]
    for kind in CONTENT_ERRORS:
        erred = apply_error(scene, description, kind, random.Random(f"{scene.seed}-{seed}-{description.style}-{kind}"))
        if erred is not None:
            variants.append(((kind,), erred))
    for lang in langs:
        for errors, d in variants:
            caption = realise(d, lang)
            out.append(Candidate(scene.scene_id, caption, errors, oracle_score(scene, caption)))
        if not damaged:
            continue
        for kind in GRAMMAR_DAMAGE:
            rng = random.Random(f"{scene.seed}-{seed}-{description.style}-{lang}-{kind}")
            broken = damage_caption(realise(description, lang), kind, rng)
            if broken is not None:
                out.append(Candidate(scene.scene_id, broken, (), oracle_score(scene, broken, damage=1), (kind,)))
    return out
