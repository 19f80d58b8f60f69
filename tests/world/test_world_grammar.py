"""Captions in five languages: detail units join to the caption, agreement and word order are right."""
import random
import re

import pytest

from scoring.world.captions import describe_long, describe_short, realise, scene_captions
from scoring.world.grammar import LANGUAGES, get_grammar
from scoring.world.scene import generate_scenes

SCENES = generate_scenes(20_000, 250)

# Independent facts about the nouns (not read from the grammar tables).
DE_GENDER = {"Kreis": "m", "Stern": "m", "Quadrat": "n", "Dreieck": "n", "Kreuz": "n", "Raute": "f"}
FR_FEMININE = {"étoile", "croix"}
ES_FEMININE = {"estrella", "cruz"}
# German: (article -> (gender, case)) and the adjective ending each requires.
DE_ARTICLE_ENDING = {
    ("ein", "m", "nom"): "er", ("ein", "n", "nom"): "es", ("eine", "f", "nom"): "e",
    ("einem", "m", "dat"): "en", ("einem", "n", "dat"): "en", ("einer", "f", "dat"): "en",
    ("der", "m", "nom"): "e", ("das", "n", "nom"): "e", ("die", "f", "nom"): "e",
    ("dem", "m", "dat"): "en", ("dem", "n", "dat"): "en", ("der", "f", "dat"): "en",
    ("vom", "m", "dat"): "en", ("vom", "n", "dat"): "en",
}
DE_PREPOSITIONS = ("von", "über", "unter", "neben")


def all_captions():
    for scene in SCENES:
        for style, per_lang in scene_captions(scene).items():
            for lang, cap in per_lang.items():
                yield scene, style, lang, cap


def test_units_join_to_every_caption_and_carry_facts():
    seen = set()
    for _, style, lang, cap in all_captions():
        seen.add((style, lang))
        assert "".join(cap.units) == cap.text
        assert len(cap.units) == len(cap.unit_facts)
        assert all(unit.strip() for unit in cap.units)
        assert all(facts for facts in cap.unit_facts)  # every unit adds a visual detail
        for noun in cap.critical_objects:
            assert noun in cap.text
    assert seen == {(s, l) for s in ("short", "long") for l in LANGUAGES}


def test_short_and_long_regimes():
    checked = {"short": 0, "long": 0, "long en": 0}
    for scene, style, lang, cap in all_captions():
        if style == "short":
            assert 1 <= len(cap.description.mentions) <= 2
            checked["short"] += 1
        else:
            assert len(cap.description.mentions) == len(scene.objects) >= 3
            checked["long"] += 1
            if lang == "en":
                assert 40 <= len(cap.text.split()) <= 120  # whitespace tokens
                checked["long en"] += 1
    # every scene has a short caption; those of three or more objects a long one too
    many = sum(len(scene.objects) >= 3 for scene in SCENES)
    assert many >= 100
    assert checked == {"short": 250 * len(LANGUAGES), "long": many * len(LANGUAGES), "long en": many}


def test_japanese_has_no_spaces_and_uses_particles():
    checked = {"ja": 0, "long": 0, "two objects": 0}
    for _, style, lang, cap in all_captions():
        if lang != "ja":
            continue
        assert " " not in cap.text and "\u3000" not in cap.text
        checked["ja"] += 1
        if style == "long":
            assert cap.text.endswith("。") and "には" in cap.text and "が" in cap.text
            checked["long"] += 1
        elif len(cap.description.mentions) == 2:
            assert re.search("が.+の(左|右|上|下|隣)にある$", cap.text)
            checked["two objects"] += 1
    many = sum(len(scene.objects) >= 3 for scene in SCENES)
    assert checked["ja"] == 250 + many and checked["long"] == many >= 100 and checked["two objects"] >= 50, checked


def test_european_sentences_are_well_formed():
    long_captions = 0
    for _, style, lang, cap in all_captions():
        if lang == "ja":
            continue
        assert "  " not in cap.text and cap.text == cap.text.strip()
        if style == "long":
            sentences = [s for s in cap.text.split(". ") if s]
            assert len(sentences) >= 2 and all(s[0].isupper() for s in sentences)
            assert cap.text.endswith(".")
            long_captions += 1
    assert long_captions == sum(len(scene.objects) >= 3 for scene in SCENES) * (len(LANGUAGES) - 1) >= 400


def test_german_articles_adjectives_and_case_agree():
    pattern = re.compile(r"\b(ein|eine|einem|einer|der|das|die|dem|vom)\s+((?:[a-zäöüß]+\s+){1,2})([A-Z][a-zäöüß]+)")
    checked = 0
    for _, _, lang, cap in all_captions():
        if lang != "de":
            continue
        text = cap.text
        assert "von dem" not in text  # always contracted
        for match in pattern.finditer(text):
            article, adjectives, noun = match.group(1), match.group(2).split(), match.group(3)
            if noun not in DE_GENDER:
                continue  # "Bild", "Hintergrund" ...
            preceding = text[: match.start()].split()
            case = "dat" if (article == "vom" or (preceding and preceding[-1] in DE_PREPOSITIONS)) else "nom"
            key = (article.lower(), DE_GENDER[noun], case)
            assert key in DE_ARTICLE_ENDING, f"wrong article {article} for {noun} ({case}) in {text!r}"
            ending = DE_ARTICLE_ENDING[key]
            for adjective in adjectives:
                stem_ok = adjective.endswith(ending) and not adjective.endswith(ending + "n") if ending == "e" \
                    else adjective.endswith(ending)
                assert stem_ok, f"{adjective} should end in -{ending} before {noun} ({case}) in {text!r}"
            checked += 1
    assert checked > 500


def test_french_gender_elision_and_adjective_position():
    checked = 0
    for _, _, lang, cap in all_captions():
        if lang != "fr":
            continue
        text = cap.text
        assert " de le " not in text and " de un" not in text and " la étoile" not in text.lower()
        for match in re.finditer(r"\b(un|une|le|la|l'|du|d'un|d'une)\s*((?:petite?|grande?)\s+)?(cercle|carré|triangle|étoile|losange|croix)\s+(\w+)", text, re.I):
            article, size, noun, colour = match.group(1).lower(), (match.group(2) or "").strip(), match.group(3), match.group(4)
            feminine = noun in FR_FEMININE
            if article in ("un", "d'un", "le", "du"):
                assert not feminine, text
            if article in ("une", "d'une", "la"):
                assert feminine, text
            if size:
                assert size.endswith("e") == feminine, text  # petit/petite, grand/grande before the noun
            masculine_only = {"bleu", "vert", "violet", "noir", "blanc"}
            feminine_only = {"bleue", "verte", "violette", "noire", "blanche"}
            assert colour not in (masculine_only if feminine else feminine_only), text
            checked += 1
    assert checked > 500


def test_spanish_gender_and_contractions():
    checked = 0
    for _, _, lang, cap in all_captions():
        if lang != "es":
            continue
        text = cap.text
        assert " de el " not in text
        for match in re.finditer(r"\b(un|una|el|la|del)\s+(círculo|cuadrado|triángulo|estrella|rombo|cruz)\s+(\w+)(?:\s+(pequeño|pequeña|grande))?", text, re.I):
            article, noun, colour, size = match.group(1).lower(), match.group(2), match.group(3), match.group(4)
            feminine = noun in ES_FEMININE
            assert (article in ("una", "la")) == feminine, text
            if colour.endswith(("o", "a")) and colour not in ("crema",):
                assert colour.endswith("a") == feminine, text
            if size and size != "grande":
                assert size.endswith("a") == feminine, text
            checked += 1
    assert checked > 500


def test_every_language_realises_the_same_description():
    rng = random.Random(0)
    scene = SCENES[3]
    description = describe_short(scene, rng, objects=min(2, len(scene.objects)))
    captions = {lang: realise(description, lang) for lang in LANGUAGES}
    assert len({c.text for c in captions.values()}) == len(LANGUAGES)
    assert {len(c.units) for c in captions.values()} == {len(captions["en"].units)}


def test_unknown_language_and_style_are_rejected():
    with pytest.raises(ValueError, match="no world grammar"):
        get_grammar("xx")
    long = [s for s in SCENES if len(s.objects) >= 3][0]
    bad = describe_long(long).__class__("medium", describe_long(long).mentions)
    with pytest.raises(ValueError, match="style"):
        realise(bad, "en")
