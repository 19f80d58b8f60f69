"""Property tests of the perturbations over many captions and seeds in every language."""
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scoring.perturb.examples import PRMCS_FIGURES
from scoring.perturb.ops import ALL_OPS, MASK_TOKEN, perturb
from scoring.perturb.pos import unavailable_reason
from scoring.perturb.tokenize import detokenize, joiner, tokenize

LANGS = ("en", "de", "fr", "es", "ja")

# Word pools per language: the figure captions' words plus common caption words.
_EXTRA = {
    "en": "a the dog cat man woman red blue small big sits runs on in with near table street tree car two",
    "de": "ein eine der die Hund Katze Mann Frau rot blau klein sitzt läuft auf in mit neben Tisch Straße Baum",
    "fr": "un une le la chien chat homme femme rouge bleu petit assis court sur dans avec près table rue arbre",
    "es": "un una el la perro gato hombre mujer rojo azul pequeño sentado corre sobre en con cerca mesa calle",
    "ja": "犬 猫 男性 女性 赤い 青い 小さな 座る 走る の に で と が を 机 道 木 車 二人 。 、",
}
LEXICON = {
    lang: sorted(set(tokenize(PRMCS_FIGURES[lang].caption, lang)) | set(_EXTRA[lang].split()))
    for lang in LANGS
}

SEEDS = st.integers(min_value=0, max_value=2**40)
PROPERTY_SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def captions(lang):
    words = st.lists(st.sampled_from(LEXICON[lang]), min_size=1, max_size=30)
    return words.map(lambda ws: detokenize(ws, lang))


def lang_and_caption():
    return st.sampled_from(LANGS).flatmap(lambda lang: st.tuples(st.just(lang), captions(lang)))


def token_flags(result):
    """For each output token: does a non-empty changed span cover it?"""
    separator = joiner(result.lang)
    flags, position = [], 0
    for index, token in enumerate(result.tokens):
        if index:
            position += len(separator)
        start, end = position, position + len(token)
        position = end
        flags.append(any(s < e and s <= start and end <= e for s, e in result.changed_spans))
    return flags


def assert_spans_well_formed(result):
    spans = result.changed_spans
    assert spans == sorted(spans)
    for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
        assert e1 <= s2
    for start, end in spans:
        assert 0 <= start <= end <= len(result.text)
    if result.tokens is not None:
        separator = joiner(result.lang)
        starts, ends, position = set(), set(), 0
        for index, token in enumerate(result.tokens):
            if index:
                position += len(separator)
            starts.add(position)
            ends.add(position + len(token))
            position += len(token)
        for start, end in spans:
            if start == end:  # removal marker: at a token start or at the very end
                assert start in starts or start == len(result.text)
            else:
                assert start in starts and end in ends
    if result.noop:
        assert result.text == result.parent and spans == [] and result.noop_reason


@PROPERTY_SETTINGS
@given(lang_and_caption(), SEEDS, st.floats(0.05, 1.0))
def test_jumble_keeps_the_multiset_of_tokens(case, seed, p):
    lang, caption = case
    parent = tokenize(caption, lang)
    result = perturb(caption, "jumble", seed=seed, lang=lang, p=p)
    assert result.p is None
    assert Counter(result.tokens) == Counter(parent)
    assert_spans_well_formed(result)
    if len(set(parent)) >= 2:
        assert not result.noop and list(result.tokens) != parent
        assert detokenize(result.tokens, lang) == result.text
        # Exactly the positions whose token changed are highlighted.
        assert token_flags(result) == [new != old for new, old in zip(result.tokens, parent)]
    else:
        assert result.noop


@PROPERTY_SETTINGS
@given(lang_and_caption(), SEEDS, st.floats(0.0, 1.0))
def test_removal_keeps_a_subsequence(case, seed, p):
    lang, caption = case
    parent = tokenize(caption, lang)
    result = perturb(caption, "removal", seed=seed, lang=lang, p=p)
    assert_spans_well_formed(result)
    kept = iter(parent)
    assert all(token in kept for token in result.tokens)  # subsequence
    assert len(result.tokens) >= 1
    if not result.noop:
        assert len(result.tokens) < len(parent)
        assert result.changed_spans and all(s == e for s, e in result.changed_spans)
        assert detokenize(result.tokens, lang) == result.text


@PROPERTY_SETTINGS
@given(lang_and_caption(), SEEDS, st.floats(0.0, 1.0))
def test_masking_keeps_the_token_count(case, seed, p):
    lang, caption = case
    parent = tokenize(caption, lang)
    result = perturb(caption, "masking", seed=seed, lang=lang, p=p)
    assert_spans_well_formed(result)
    assert len(result.tokens) == len(parent)
    assert all(new in (old, MASK_TOKEN) for new, old in zip(result.tokens, parent))
    if not result.noop:
        assert token_flags(result) == [new == MASK_TOKEN for new in result.tokens]
        assert detokenize(result.tokens, lang) == result.text


@PROPERTY_SETTINGS
@given(lang_and_caption(), SEEDS, st.floats(0.0, 1.0))
def test_repetition_only_duplicates_tokens_in_place(case, seed, p):
    lang, caption = case
    parent = tokenize(caption, lang)
    result = perturb(caption, "repetition", seed=seed, lang=lang, p=p)
    assert_spans_well_formed(result)
    if result.noop:
        return
    flags = token_flags(result)
    # The highlighted tokens are the duplicates: each repeats the token before it, and
    # dropping them gives back the parent.
    assert [t for t, f in zip(result.tokens, flags) if not f] == parent
    for index, flag in enumerate(flags):
        if flag:
            assert index > 0 and not flags[index - 1]
            assert result.tokens[index] == result.tokens[index - 1]
    assert len(result.tokens) > len(parent)


@PROPERTY_SETTINGS
@given(lang_and_caption(), SEEDS, st.floats(0.05, 1.0))
def test_repeat_remove_and_permutation(case, seed, p):
    lang, caption = case
    parent = tokenize(caption, lang)
    mixed = perturb(caption, "repeat-remove", seed=seed, lang=lang, p=p)
    assert_spans_well_formed(mixed)
    assert set(mixed.tokens) <= set(parent) and len(mixed.tokens) >= 1
    permuted = perturb(caption, "permutation", seed=seed, lang=lang)
    assert Counter(permuted.tokens) == Counter(parent)
    assert_spans_well_formed(permuted)


@PROPERTY_SETTINGS
@given(lang_and_caption(), SEEDS, st.sampled_from([op for op in ALL_OPS if op not in ("substitution", "keyword-substitution")]))
def test_same_seed_same_result(case, seed, op):
    lang, caption = case
    first = perturb(caption, op, seed=seed, lang=lang).to_dict()
    assert perturb(caption, op, seed=seed, lang=lang).to_dict() == first
    assert first["parent"] == caption and first["op"] == op and first["seed"] == seed


# Critical objects that never occur inside the filler words, per language.
_OBJECTS = {
    "en": ["red car", "old church", "wooden bench", "striped umbrella", "black dog"],
    "de": ["rotes Auto", "alte Kirche", "Holzbank", "Regenschirm", "schwarzer Hund"],
    "fr": ["voiture rouge", "vieille église", "banc en bois", "parapluie rayé", "chien noir"],
    "es": ["coche rojo", "iglesia antigua", "banco de madera", "paraguas rayado", "perro negro"],
    "ja": ["赤い自動車", "古い教会", "木製のベンチ", "縞模様の傘", "黒い子犬"],
}
_FILLER = {
    "en": ["there is", "next to", "and", "behind", "in front of"],
    "de": ["da ist", "neben", "und", "hinter", "vor"],
    "fr": ["il y a", "à côté de", "et", "derrière", "devant"],
    "es": ["hay", "junto a", "y", "detrás de", "delante de"],
    "ja": ["があり", "の横に", "と", "の後ろに", "の前に"],
}


@st.composite
def caption_with_objects(draw):
    lang = draw(st.sampled_from(LANGS))
    objects = draw(st.lists(st.sampled_from(_OBJECTS[lang]), min_size=2, max_size=5, unique=True))
    parts = []
    for obj in objects:
        parts.append(draw(st.sampled_from(_FILLER[lang])))
        parts.append(obj)
    return lang, detokenize(parts, lang) + ("。" if lang == "ja" else "."), objects


@PROPERTY_SETTINGS
@given(caption_with_objects(), SEEDS)
def test_substitution_keeps_every_critical_object_and_changes_their_order(case, seed):
    lang, caption, objects = case
    result = perturb(caption, "substitution", seed=seed, lang=lang, critical=objects)
    assert not result.noop and result.p is None and result.critical == tuple(objects)
    assert_spans_well_formed(result)
    for obj in objects:
        assert result.text.count(obj) == caption.count(obj) == 1
    order = sorted(objects, key=caption.index)
    new_order = sorted(objects, key=result.text.index)
    assert new_order != order
    # Highlighted spans are exactly the objects that moved, in their new places.
    moved = [obj for obj, before in zip(new_order, order) if obj != before]
    assert [result.text[s:e] for s, e in result.changed_spans] == moved
    assert perturb(caption, "substitution", seed=seed, lang=lang, critical=objects) == result


def _tagged(lang):
    reason = unavailable_reason(lang)
    return pytest.param(lang, marks=pytest.mark.skipif(reason is not None, reason=reason or ""))


@pytest.mark.parametrize("lang", [_tagged(lang) for lang in LANGS])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_noun_substitution_without_critical_objects(lang, data):
    caption = data.draw(captions(lang))
    seed = data.draw(SEEDS)
    result = perturb(caption, "substitution", seed=seed, lang=lang)
    assert_spans_well_formed(result)
    if result.noop:
        assert result.noop_reason == "fewer than two distinct nouns to swap"
        return
    assert sorted(result.text) == sorted(caption)  # the same characters, rearranged
    assert result.text != caption


@pytest.mark.parametrize("lang", [_tagged(lang) for lang in LANGS])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_keyword_substitution_draws_words_from_the_corpus(lang, data):
    caption = data.draw(captions(lang))
    seed = data.draw(SEEDS)
    corpus = [PRMCS_FIGURES[lang].caption]
    result = perturb(caption, "keyword-substitution", seed=seed, lang=lang, corpus=corpus)
    assert_spans_well_formed(result)
    assert result.p == 0.3
    if result.noop:
        return
    vocabulary = set(tokenize(corpus[0], lang)) | set(tokenize(caption, lang))
    pieces = [result.text[s:e] for s, e in result.changed_spans]
    assert pieces
    # Every replacement is a word of the corpus (or of the caption) in the POS dictionary.
    joined = "".join(vocabulary) if lang == "ja" else " ".join(vocabulary)
    assert all(piece in joined for piece in pieces)


@settings(max_examples=60, deadline=None)
@given(
    st.text(min_size=1, max_size=60).filter(str.strip),
    SEEDS,
    st.sampled_from(["repetition", "removal", "masking", "jumble", "repeat-remove"]),
    st.sampled_from(["en", "ja"]),
)
def test_arbitrary_text_never_breaks_word_operations(text, seed, op, lang):
    result = perturb(text, op, seed=seed, lang=lang)
    assert_spans_well_formed(result)
    assert result.text.strip()
    assert all(token and not token.isspace() for token in result.tokens)
    if not result.noop:
        assert detokenize(result.tokens, lang) == result.text
