"""Controlled errors change exactly what they say, and the oracle ranks them below the truth."""
import random

import pytest

from scoring.world.annotators import Annotator, panel
from scoring.world.captions import describe_long, describe_short, realise
from scoring.world.errors import (CONTENT_ERRORS, GRAMMAR_DAMAGE, apply_error, candidates_for, damage_caption,
                                  oracle_score)
from scoring.world.grammar import LANGUAGES
from scoring.world.scene import generate_scenes

SCENES = [s for s in generate_scenes(30_000, 120) if len(s.objects) >= 3]


def test_correct_long_caption_scores_one_and_errors_score_lower():
    checked = dict.fromkeys(CONTENT_ERRORS, 0)
    assert len(SCENES[:40]) == 40 and checked
    for scene in SCENES[:40]:
        truth = describe_long(scene)
        assert oracle_score(scene, realise(truth, "en")).score == 1.0
        for kind in CONTENT_ERRORS:
            erred = apply_error(scene, truth, kind, random.Random(1))
            if erred is None:  # this error does not apply to this scene
                continue
            oracle = oracle_score(scene, realise(erred, "en"))
            assert oracle.score < 1.0, kind
            if kind != "missing":
                assert oracle.wrong >= 1, kind
            checked[kind] += 1
    # every kind of error was applied to most of the 40 scenes (none may skip them all)
    assert min(checked.values()) >= 20, checked


def test_colour_and_shape_errors_change_only_that_attribute():
    scene = SCENES[0]
    truth = describe_long(scene)
    for kind in ("colour", "shape"):
        erred = apply_error(scene, truth, kind, random.Random(3))
        changed = [(a, b) for a, b in zip(truth.mentions, erred.mentions) if a != b]
        assert len(changed) == 1
        before, after = changed[0]
        other = "shape" if kind == "colour" else "colour"
        assert getattr(before, kind) != getattr(after, kind)
        assert getattr(before, other) == getattr(after, other)


def test_missing_and_hallucinated_objects():
    scene = SCENES[1]
    truth = describe_long(scene)
    missing = apply_error(scene, truth, "missing", random.Random(0))
    assert len(missing.mentions) == len(truth.mentions) - 1
    assert oracle_score(scene, realise(missing, "en")).coverage < 1.0
    ghost = apply_error(scene, truth, "hallucinated", random.Random(0))
    assert len(ghost.mentions) == len(truth.mentions) + 1 and ghost.mentions[-1].oid is None


def test_candidates_share_errors_across_languages():
    scene = SCENES[2]
    candidates = candidates_for(scene, describe_short(scene, random.Random(0), objects=2), LANGUAGES)
    by_lang = {lang: [(c.errors, c.damage, round(c.oracle.score, 6)) for c in candidates if c.caption.lang == lang]
               for lang in LANGUAGES}
    content = {lang: [x for x in rows if not x[1]] for lang, rows in by_lang.items()}
    assert all(content[lang] == content["en"] for lang in LANGUAGES)
    for cand in candidates:
        assert "".join(cand.caption.units) == cand.text
        assert 0.0 <= cand.oracle.score <= 1.0


def test_grammatical_damage_changes_text_and_costs_oracle():
    for lang in LANGUAGES:
        for scene in SCENES[:10]:
            caption = realise(describe_long(scene), lang)
            for kind in GRAMMAR_DAMAGE:
                broken = damage_caption(caption, kind, random.Random(2))
                assert broken is not None and broken.text != caption.text
                assert "".join(broken.units) == broken.text
                assert oracle_score(scene, broken, damage=1).score < oracle_score(scene, caption).score


def test_unknown_error_kind_is_rejected():
    with pytest.raises(ValueError, match="unknown error kind"):
        apply_error(SCENES[0], describe_long(SCENES[0]), "tense", random.Random(0))


def test_annotators_are_biased_noisy_and_reproducible():
    scene = SCENES[4]
    candidates = candidates_for(scene, describe_long(scene), ("en",))
    raters = panel(3)
    assert len({(r.bias, r.noise) for r in raters}) == 3
    ratings = [[r.rate(c, f"k{i}")["overall"] for i, c in enumerate(candidates)] for r in raters]
    assert ratings == [[r.rate(c, f"k{i}")["overall"] for i, c in enumerate(candidates)] for r in raters]
    assert all(0.0 <= v <= 1.0 for row in ratings for v in row)
    harsh, lenient = Annotator("harsh", -0.3, 0.0), Annotator("lenient", 0.3, 0.0)
    truth = candidates[0]
    assert harsh.rate(truth, "x")["overall"] < lenient.rate(truth, "x")["overall"]
    with pytest.raises(ValueError, match="needs at least one annotator"):
        panel(0)
