"""Every field of a perturbation, worked out by hand where the draws cannot vary (p = 0 or 1):
the new text, its changed spans (zero-width where words were removed, adjacent changes merged),
the tokens, and for a caption left as it was the exact reason. Also the removed words behind
each zero-width span, the JSON form, the defaults and the errors."""
import pytest

from scoring.perturb.ops import (
    PosVocabulary, canonical_op, default_p, default_p_text, perturb, perturb_all, removed_words,
)

CAPTION = "a dog runs fast"


def fields(result):
    return result.text, result.changed_spans, result.tokens, result.noop, result.noop_reason


def test_every_token_drawn():
    assert fields(perturb("a dog runs", "repetition", p=1.0)) == (
        "a a dog dog runs runs", [(2, 3), (8, 11), (17, 21)], ("a", "a", "dog", "dog", "runs", "runs"), False, None)
    assert fields(perturb("a dog runs", "masking", p=1.0)) == (  # adjacent changes make one span
        "[MASK] [MASK] [MASK]", [(0, 20)], ("[MASK]",) * 3, False, None)
    # Removal keeps one drawn word (chosen by the seed); a zero-width span marks each gap.
    by_kept = {"a": ("a", [(1, 1)], ["dog runs fast"]), "dog": ("dog", [(0, 0), (3, 3)], ["a", "runs fast"]),
               "runs": ("runs", [(0, 0), (4, 4)], ["a dog", "fast"]), "fast": ("fast", [(0, 0)], ["a dog runs"])}
    seen = set()
    for seed in range(12):
        result = perturb(CAPTION, "removal", p=1.0, seed=seed)
        text, spans, removed = by_kept[result.text]
        assert (result.changed_spans, result.tokens, result.noop) == (spans, (text,), False)
        assert removed_words(result) == removed
        seen.add(text)
    assert len(seen) >= 3  # the seed chooses which word stays


def test_repeat_remove_marks_repeats_and_gaps():
    """p = 1: every word is repeated or removed, 50/50 by the seed. Seed 2 removes "a" and
    "runs" and repeats "dog" and "fast": a gap at 0, the second "dog", a gap where "runs" was,
    the second "fast". Seed 3 removes "a", "dog" and "fast": one gap for the two removed in a
    row, the second "runs", a gap at the end."""
    assert fields(perturb(CAPTION, "repeat-remove", p=1.0, seed=2)) == (
        "dog dog fast fast", [(0, 0), (4, 7), (8, 8), (13, 17)], ("dog", "dog", "fast", "fast"), False, None)
    assert fields(perturb(CAPTION, "repeat-remove", p=1.0, seed=3)) == (
        "runs runs", [(0, 0), (5, 9), (9, 9)], ("runs", "runs"), False, None)
    assert removed_words(perturb(CAPTION, "repeat-remove", p=1.0, seed=3)) == []  # a removal's words only


@pytest.mark.parametrize("op, text, p, reason, tokens", [
    ("repetition", CAPTION, 0.0, "no token was drawn (p=0, 4 tokens)", ("a", "dog", "runs", "fast")),
    ("removal", "dog", 0.0, "no token was drawn (p=0, 1 token)", ("dog",)),
    ("masking", CAPTION, 0.0, "no token was drawn (p=0, 4 tokens)", ("a", "dog", "runs", "fast")),
    ("repeat-remove", CAPTION, 0.0, "no token was drawn (p=0, 4 tokens)", ("a", "dog", "runs", "fast")),
    ("removal", "dog", 1.0, "removing the only token would leave no caption", ("dog",)),
    ("jumble", "dog dog", None, "fewer than two distinct tokens: no order to change", ("dog", "dog")),
])
def test_a_caption_left_as_it_was_says_why(op, text, p, reason, tokens):
    result = perturb(text, op, p=p, seed=3)
    assert fields(result) == (text, [], tokens, True, reason)
    assert removed_words(result) == []


def test_repeat_remove_of_a_lone_word_never_removes_it():
    outcomes = [perturb("dog", "repeat-remove", p=1.0, seed=seed) for seed in range(30)]
    left = [r for r in outcomes if r.noop]
    assert left and all(fields(r) == ("dog", [], ("dog",), True, "removing the only token would leave no caption")
                        for r in left)
    assert all(fields(r) == ("dog dog", [(4, 7)], ("dog", "dog"), False, None) for r in outcomes if not r.noop)


def test_json_form_and_defaults():
    result = perturb("a dog runs", "repetition", p=1.0, seed=4)
    assert result.to_dict() == {
        "text": "a a dog dog runs runs", "op": "repetition", "p": 1.0, "seed": 4, "lang": "en",
        "parent": "a dog runs", "changed_spans": [[2, 3], [8, 11], [17, 21]], "noop": False, "noop_reason": None,
        "tokens": ["a", "a", "dog", "dog", "runs", "runs"],
    }
    swapped = perturb("a dog chases a cat", "substitution", critical=["dog", "cat"])
    assert swapped.to_dict()["tokens"] is None and swapped.to_dict()["changed_spans"] == [[2, 5], [15, 18]]
    assert perturb(CAPTION, "jumble") == perturb(CAPTION, "jumble", seed=0, lang="en")
    assert perturb(CAPTION, "jumble").lang == "en" and perturb(CAPTION, "jumble").p is None
    assert [r.op for r in perturb_all(CAPTION, seed=2)] == ["repetition", "removal", "masking", "jumble", "substitution"]
    assert perturb_all(CAPTION, seed=2)[1] == perturb(CAPTION, "removal", seed=2)
    assert (default_p("removal"), default_p("Permutation"), default_p("repetition")) == (0.6, None, 0.4)
    assert default_p_text() == "repetition 0.4, removal 0.6, masking 0.4, keyword-substitution 0.3, repeat-remove 0.3"


def test_errors_name_the_problem():
    with pytest.raises(ValueError) as error:
        canonical_op("shuffle")
    assert str(error.value) == ("unknown operation 'shuffle'; choose one of: repetition, removal, masking, jumble, "
                                "substitution, keyword-substitution, repeat-remove (aliases: permutation (= jumble))")
    assert canonical_op(" Permutation ") == "jumble"
    with pytest.raises(ValueError, match=r"^seed must be an integer, got 'x'$"):
        perturb(CAPTION, "jumble", seed="x")
    with pytest.raises(ValueError, match=r"^seed must be an integer, got True$"):
        perturb(CAPTION, "jumble", seed=True)
    with pytest.raises(ValueError, match=r"^caption text is empty: nothing to perturb$"):
        perturb("  ", "jumble")


def test_substitution_swaps_critical_objects_longest_first():
    swapped = perturb("a hot dog near a dog", "substitution", critical=["dog", "hot dog"])
    assert fields(swapped) == ("a dog near a hot dog", [(2, 5), (13, 20)], None, False, None)
    assert perturb("a hot dog near a dog", "substitution", critical="dog; ;hot dog").critical == ("dog", "hot dog")
    same = perturb("a dog and a dog", "substitution", critical=["dog", "dog"])
    assert fields(same) == ("a dog and a dog", [], None, True, "fewer than two distinct critical objects to swap")
    with pytest.raises(ValueError, match=r"^critical object 'dog' does not occur in the caption$"):
        perturb("a cat", "substitution", critical=["dog", "cat"])
    with pytest.raises(ValueError, match=r"^critical object 'dog' does not occur in the caption outside the other"):
        perturb("a hot dog", "substitution", critical=["hot dog", "dog"])
    # Without critical objects the nouns swap; adjacent nouns are one compound slot.
    assert perturb("a dog sees a cat", "substitution").text == "a cat sees a dog"
    compound = perturb("the dog house is big", "substitution")
    assert fields(compound) == ("the dog house is big", [], None, True, "fewer than two distinct nouns to swap")


def test_keyword_substitution_draws_from_the_corpus_by_part_of_speech():
    vocabulary = PosVocabulary(["a red cat sleeps", "a blue bird sings", "  "])
    assert vocabulary.lang == "en" and vocabulary.by_upos["ADJ"] == ["blue", "red"]
    one = perturb("a red dog runs", "keyword-substitution", p=0.01, corpus=vocabulary, seed=1)
    assert fields(one) == ("a blue dog runs", [(2, 6)], None, False, None)  # round(0.03) = 0, but at least one
    every = perturb("a red dog runs", "keyword-substitution", p=1.0, corpus=vocabulary, seed=1)
    assert fields(every) == ("a blue cat sleeps", [(2, 6), (7, 10), (11, 17)], None, False, None)
    # Without a corpus the caption's own words are the vocabulary.
    assert perturb("a red dog and a blue cat", "keyword-substitution", p=1.0, seed=0).text == "a blue cat and a red dog"
    assert fields(perturb("and then", "keyword-substitution")) == (
        "and then", [], None, True, "the caption has no nouns, verbs or adjectives")
    assert fields(perturb("a dog", "keyword-substitution")) == (
        "a dog", [], None, True, "no other word of the same part of speech in the corpus (pass more captions as corpus)")
    with pytest.raises(ValueError, match=r"^corpus must be a list of captions \(or a PosVocabulary\), not one string$"):
        perturb("a red dog runs", "keyword-substitution", corpus="a cat")
    with pytest.raises(ValueError, match=r"^vocabulary is for de, caption is en$"):
        perturb("a red dog runs", "keyword-substitution", corpus=PosVocabulary(["ein Hund"], "de"))


def test_keyword_substitution_by_context_takes_a_word_seen_between_the_same_neighbours():
    """A vocabulary `by_context` swaps a colour only for a word seen between the same two words,
    whatever the tagger calls it; a word whose slot holds no other word is never drawn."""
    corpus = ["a small red circle", "a small blue circle", "a large red square", "the square is at the top left",
              "the circle is at the bottom left"]
    vocabulary = PosVocabulary(corpus, by_context=True)
    assert vocabulary.by_context[("small", "circle")] == ["blue", "red"]
    assert vocabulary.by_context[("the", "left")] == ["bottom", "top"]
    seen = {perturb("a small red circle", "keyword-substitution", p=1e-6, corpus=vocabulary, seed=seed).text
            for seed in range(40)}
    # a colour for a colour, a size for a size, a shape for a shape: never "a red red circle"
    assert seen == {"a small blue circle", "a large red circle", "a small red square"}
    assert {perturb("the square is at the top left", "keyword-substitution", p=1e-6, corpus=vocabulary,
                    seed=seed).text for seed in range(40)} == {"the square is at the bottom left",
                                                               "the circle is at the top left"}
    lonely = perturb("a large red square", "keyword-substitution", corpus=PosVocabulary(["a large red square"],
                                                                                          by_context=True))
    assert fields(lonely) == ("a large red square", [], None, True,
                              "no other word between the same neighbours in the corpus")
    # the tag-based vocabulary would have mixed sizes and colours (both adjectives)
    assert set(PosVocabulary(corpus).by_upos["ADJ"]) >= {"small", "large", "red", "blue"}


def test_repeat_remove_never_leaves_a_word_unrepeated():
    """Every kept word is repeated; when every word was drawn for removal, one is repeated."""
    for seed in range(60):
        tokens = perturb(CAPTION, "repeat-remove", p=1.0, seed=seed).tokens
        assert len(tokens) >= 2 and tokens[0::2] == tokens[1::2], seed


def test_removed_words_rebuild_the_parent():
    result = perturb("a man in a white shirt rides a brown horse on the beach", "removal", seed=0)
    assert fields(result)[:3] == ("a a beach", [(0, 0), (2, 2), (4, 4)], ("a", "a", "beach"))
    groups = removed_words(result)
    assert groups == ["a man in", "white shirt rides", "brown horse on the"]
    rebuilt = " ".join([groups[0], "a", groups[1], "a", groups[2], "beach"])
    assert rebuilt == result.parent
    japanese = perturb("赤い犬が走る", "removal", p=0.6, seed=1, lang="ja")  # words joined without spaces
    assert (japanese.text, japanese.tokens, removed_words(japanese)) == ("赤い走る", ("赤い", "走る"), ["犬が"])


def test_slots_whole_words_compounds_and_the_vocabulary_fallbacks():
    # Critical objects: longest first, so "dog" does not claim the inside of "hot dog".
    assert perturb("a dog near a hot dog", "substitution", critical=["dog", "hot dog"]).text == "a hot dog near a dog"
    assert perturb("a dog near hotdogs", "substitution", critical=["dog", "near"]).text == "a near dog hotdogs"
    assert perturb("the dog house near the car park", "substitution").text == "the car park near the dog house"
    # A noun without a word of its fine tag takes any noun; other words take only their own tag.
    assert perturb("a dog", "keyword-substitution", p=1.0, corpus=PosVocabulary(["two cats"])).text == "a cats"
    assert perturb("a dog running", "keyword-substitution", p=1.0, corpus=PosVocabulary(["a red cat"])).text == \
        "a cat running"
    # A blank caption in the corpus is skipped, not the end of it.
    assert PosVocabulary(["a red cat", " ", "a blue bird"]).by_upos["ADJ"] == ["blue", "red"]
    with pytest.raises(ValueError, match=r"^p must be a number between 0 and 1, got 'x'$"):
        perturb(CAPTION, "removal", p="x")


def test_keyword_substitution_without_a_corpus_tags_the_caption_in_its_language():
    """The Spanish tagger reads perro and gato as nouns of one tag (they swap), "rojo" as a proper
    noun and "azul" as the only adjective (nothing to swap with). Tagged as English, no word would
    have an alternative."""
    result = perturb("un perro rojo y un gato azul", "keyword-substitution", p=1.0, lang="es")
    assert fields(result) == ("un gato rojo y un perro azul", [(3, 7), (18, 23)], None, False, None)
