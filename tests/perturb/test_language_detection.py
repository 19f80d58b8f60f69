"""Automatic language detection (`scoring.language_id`) and what the Perturbation lab does
with a language it has no tagger for."""
from __future__ import annotations

import pytest

from app.perturb_lab import perturb_caption
from scoring.language_id import UNKNOWN, detect_language
from scoring.perturb.ops import PRMCS_OPS
from scoring.perturb.pos import TaggerUnavailableError

HEBREW = "איש רוכב על סוס לבן ליד הים"


@pytest.mark.parametrize("text, lang", [
    (HEBREW, "he"),  # was "ko" (and "zh" for other Hebrew captions): guessed among the twelve only
    ("כלב רץ על החוף", "he"),
    ("ελληνικά λέξεις για ένα σκύλο", "el"),
    ("🐶🏖️☀️", UNKNOWN),  # was "zh"
    ("👍👍", UNKNOWN),
    ("123 456 !!!", UNKNOWN),
    ("🐶 a dog runs on the beach 🏖️", "en"),  # emoji beside words do not pull the guess
    ("un perro corre en la playa", "es"),
    ("Ein Hund läuft am Strand", "de"),
    ("一只狗在海滩上跑", "zh"),
    ("犬が浜辺を走っている", "ja"),
    ("собака бежит по пляжу", "ru"),
    ("a large blue circle", "en"),  # langid.py took it for Spanish
    ("a blue circle", "en"),
    ("la casa roja", "es"),  # a short caption clearly in another language still is
    ("un grande cerchio blu", "it"),
    ("un coche rojo", "es"),  # langid.py: Italian
    ("pájaros en el cielo", "es"),
    ("une femme tient un parapluie", "fr"),
    ("um cachorro na praia", "pt"),  # langid.py: English
])
def test_detection(text, lang):
    assert detect_language(text) == lang


def test_the_prior_follows_the_default_language():
    # Five words Lingua finds as English as French (0.327 against 0.326): the default decides...
    assert detect_language("le train arrive en gare", default="fr") == "fr"
    assert detect_language("le train arrive en gare", default="en") == "en"
    # ...but not against clear evidence.
    assert detect_language("ein großer blauer Kreis", default="es") == "de"
    assert detect_language("a large blue circle", default="es") == "en"


def test_all_five_on_hebrew_run_the_four_that_need_no_tagger_and_say_why_not_the_fifth():
    results = perturb_caption(HEBREW, "all", None, 3, "auto", None)
    assert [r.op for r in results] == list(PRMCS_OPS)
    assert {r.lang for r in results} == {"he"}
    done = {r.op: r for r in results if not r.noop}
    assert set(done) == {"repetition", "removal", "masking", "jumble"}
    assert all(set(r.text.replace("[MASK]", "").split()) <= set(HEBREW.split()) for r in done.values())
    [substitution] = [r for r in results if r.op == "substitution"]
    assert substitution.noop and substitution.text == HEBREW
    assert substitution.noop_reason.startswith("POS tagging unavailable for he: CapLens has no tagger")
    with pytest.raises(TaggerUnavailableError, match="unavailable for he"):  # asked for alone: a clear error
        perturb_caption(HEBREW, "substitution", None, 3, "auto", None)


def test_emoji_only_captions_perturb_as_language_unknown():
    results = perturb_caption("🐶 🏖️ ☀️ 🐱", "all", None, 1, "auto", None)
    assert {r.lang for r in results} == {UNKNOWN}
    assert [r.op for r in results if not r.noop] == ["repetition", "removal", "masking", "jumble"]
    assert "language is unknown" in results[-1].noop_reason


def test_a_chosen_language_is_checked_and_lower_cased_and_auto_detects():
    from scoring.language_id import check_language, known_codes, resolve_language

    assert resolve_language("DE", "a dog") == "de" and resolve_language(" sv ", "a dog") == "sv"
    assert resolve_language("auto", "ein Hund läuft über die Wiese") == "de" == resolve_language("", "ein Hund läuft über die Wiese")
    assert {"en", "ja", "he", "sv", "zu"} <= known_codes() and len(known_codes()) == 75
    assert resolve_language("und", "🐶") == UNKNOWN  # what a result row says of a caption without letters
    assert [check_language(tag) for tag in ("en-US", "pt_BR", "zh-Hans", "EN-gb")] == ["en", "pt", "zh", "en"]
    for typo in ("xx", "english", "xx-US", "-en"):
        with pytest.raises(ValueError, match=rf"^unknown language code '{typo}': give a two-letter ISO 639-1 code "
                                             r"\(en, de, fr, es, ja, it, pt, nl, ru, zh, ko, ar, \.\.\.\) or 'auto' to detect it$"):
            resolve_language(typo, "a dog")
    assert check_language("Auto") == "auto"
