"""UMIC negatives: random captions, embedding-mined hard negatives, the four-per-positive set."""
import numpy as np
import pytest

from scoring.perturb.negatives import (
    hard_negative,
    most_similar_images,
    random_caption_negative,
    umic_negatives,
)

CAPTIONS = {
    "beach": ["a dog runs on the beach", "a brown dog running by the sea"],
    "sand": ["a dog digs in the sand", "a puppy playing on sand"],
    "street": ["a red car parked on a street"],
    "kitchen": ["a woman cooking in a kitchen"],
    "park": ["a man walks a dog in the park"],
}
IDS = ["beach", "sand", "street", "kitchen", "park"]
# Hand-made image embeddings: beach is closest to sand, then park, then street.
EMBEDDINGS = np.array(
    [
        [1.0, 0.0, 0.0],
        [0.95, 0.3, 0.0],
        [0.2, 0.0, 1.0],
        [0.0, 1.0, 0.1],
        [0.8, 0.0, 0.5],
    ]
)


def test_most_similar_images_ranks_by_cosine():
    ranked = most_similar_images("beach", IDS, EMBEDDINGS, top_k=3)
    assert [image for image, _ in ranked] == ["sand", "park", "street"]
    similarities = [s for _, s in ranked]
    assert similarities == sorted(similarities, reverse=True)
    assert similarities[0] == pytest.approx(0.95 / np.linalg.norm([0.95, 0.3, 0.0]))


def test_hard_negative_is_a_caption_of_a_top3_similar_image():
    seen = set()
    for seed in range(30):
        negative = hard_negative("beach", CAPTIONS, IDS, EMBEDDINGS, parent="a dog runs on the beach", seed=seed)
        assert negative.kind == "hard"
        assert negative.source_image_id in {"sand", "park", "street"}
        assert negative.text in CAPTIONS[negative.source_image_id]
        seen.add(negative.source_image_id)
    assert seen == {"sand", "park", "street"}  # kitchen (least similar) never
    assert hard_negative("beach", CAPTIONS, IDS, EMBEDDINGS, seed=4) == hard_negative("beach", CAPTIONS, IDS, EMBEDDINGS, seed=4)


def test_random_negative_comes_from_another_image():
    sources = {random_caption_negative("beach", CAPTIONS, seed=s).source_image_id for s in range(40)}
    assert "beach" not in sources and len(sources) >= 3


def test_umic_set_has_the_four_kinds():
    negatives = umic_negatives("beach", CAPTIONS["beach"][0], CAPTIONS, seed=5)
    assert [n.kind for n in negatives] == ["keyword-substitution", "random", "repeat-remove", "permutation"]
    assert all(n.parent == CAPTIONS["beach"][0] for n in negatives)
    kinds = {
        umic_negatives("beach", CAPTIONS["beach"][0], CAPTIONS, seed=s, image_ids=IDS, embeddings=EMBEDDINGS)[1].kind
        for s in range(30)
    }
    assert kinds == {"random", "hard"}  # hard negatives half of the time
    keyword = negatives[0]
    assert not keyword.noop and keyword.text != keyword.parent


def test_bad_embeddings_are_clear_errors():
    with pytest.raises(ValueError, match="shape"):
        most_similar_images("beach", IDS, EMBEDDINGS[:3])
    with pytest.raises(LookupError, match="no embedding"):
        most_similar_images("moon", IDS, EMBEDDINGS)
    with pytest.raises(ValueError, match="together"):
        umic_negatives("beach", "a dog", CAPTIONS, embeddings=EMBEDDINGS)
    with pytest.raises(ValueError, match="other captioned image"):
        random_caption_negative("beach", {"beach": ["a dog"]})


# UMIC §3.2 (SPEC.md, "UMIC negatives"): keyword substitution replaces 30 % of the nouns, verbs
# and adjectives with same-POS words of the training captions; repetition & removal samples
# 30 % of the words and repeats or removes each sampled word with probability 50 %. The
# expected counts below are worked out by hand from those numbers, not read from the code.

# 10 keywords: tall old man rides brown horse green field white fences (positions 1-4, 6, 7,
# 10, 11, 13, 14); the rest (a, a, near, a, with) are not nouns, verbs or adjectives.
TEN_KEYWORDS = "a tall old man rides a brown horse near a green field with white fences"
TEN_KEYWORD_POSITIONS = {1, 2, 3, 4, 6, 7, 10, 11, 13, 14}
# Same tags word for word, so every keyword of TEN_KEYWORDS has a same-POS alternative.
OTHER_IMAGE = "a short young woman walks a black dog past a red house with blue doors"


def _replaced_positions(before: str, after: str) -> set[int]:
    old, new = before.split(), after.split()
    assert len(old) == len(new)  # keywords are replaced one word for one word
    return {i for i, (a, b) in enumerate(zip(old, new)) if a != b}


def test_umic_keyword_substitution_replaces_30_percent_of_the_keywords():
    captions = {"horse": [TEN_KEYWORDS], "woman": [OTHER_IMAGE]}
    for seed in range(25):
        negative = umic_negatives("horse", TEN_KEYWORDS, captions, seed=seed)[0]
        assert negative.kind == "keyword-substitution"
        replaced = _replaced_positions(TEN_KEYWORDS, negative.text)
        assert len(replaced) == 3, (seed, negative.text)  # 30 % of 10 keywords
        assert replaced <= TEN_KEYWORD_POSITIONS  # only nouns, verbs and adjectives move
    # 7 keywords (old man rides brown horse green field): 30 % of 7 = 2.1, so 2 words.
    seven = "an old man rides a brown horse in a green field"
    for seed in range(10):
        negative = umic_negatives("horse", seven, {"horse": [seven], "woman": [OTHER_IMAGE]}, seed=seed)[0]
        assert len(_replaced_positions(seven, negative.text)) == 2, (seed, negative.text)


def test_umic_repeat_remove_samples_30_percent_and_splits_them_50_50():
    """200 seeds x 20 distinct words = 4,000 word draws. In the output a word that appears
    twice was repeated, one that is gone was removed. Binomial standard errors: 0.007 for the
    sampled share (p = 0.3) and 0.014 for the repeat share of about 1,200 sampled words, so
    the bounds below sit about 3-4 standard errors out and a split of 40/60 (or a sampling
    rate of 0.25 or 0.35) falls outside them."""
    words = ("one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
             "fifteen sixteen seventeen eighteen nineteen twenty").split()
    caption = " ".join(words)
    captions = {"numbers": [caption], "other": ["a cat on a mat"]}
    repeated = removed = 0
    for seed in range(200):
        negative = umic_negatives("numbers", caption, captions, seed=seed)[2]
        assert negative.kind == "repeat-remove"
        out = negative.text.split()
        assert set(out) <= set(words)
        counts = [out.count(word) for word in words]
        assert set(counts) <= {0, 1, 2}
        repeated += counts.count(2)
        removed += counts.count(0)
    sampled = repeated + removed
    assert 0.27 <= sampled / (200 * len(words)) <= 0.33
    assert 0.45 <= repeated / sampled <= 0.55


# Provenance: each negative records what it was made from, so a fine-tuning set can be
# traced and rebuilt; every field is checked, not only the text.

def test_random_and_hard_negatives_record_their_provenance():
    parent = CAPTIONS["beach"][0]
    rnd = random_caption_negative("beach", CAPTIONS, parent=parent, seed=7)
    assert (rnd.kind, rnd.parent, rnd.image_id, rnd.seed, rnd.similarity) == ("random", parent, "beach", 7, None)
    assert rnd.text in CAPTIONS[rnd.source_image_id] and rnd.source_image_id != "beach"
    assert (rnd.changed_spans, rnd.noop, rnd.noop_reason) == ((), False, None)
    default = random_caption_negative("beach", CAPTIONS)
    assert (default.parent, default.seed) == ("", 0)
    assert default == random_caption_negative("beach", CAPTIONS, seed=0)
    hard = hard_negative("beach", CAPTIONS, IDS, EMBEDDINGS, parent=parent, seed=7)
    assert (hard.kind, hard.parent, hard.image_id, hard.seed) == ("hard", parent, "beach", 7)
    expected = dict(most_similar_images("beach", IDS, EMBEDDINGS))
    assert hard.similarity == pytest.approx(expected[hard.source_image_id])
    default = hard_negative("beach", CAPTIONS, IDS, EMBEDDINGS)
    assert (default.parent, default.seed) == ("", 0)
    assert default == hard_negative("beach", CAPTIONS, IDS, EMBEDDINGS, seed=0)
    assert rnd.to_dict()["text"] == rnd.text and rnd.to_dict()["changed_spans"] == []


def test_word_level_negatives_record_the_perturbation():
    from scoring.perturb.ops import perturb

    caption = "a tall old man rides a brown horse near a green field"
    captions = {"horse": [caption], "woman": [OTHER_IMAGE]}
    negatives = umic_negatives("horse", caption, captions, seed=3)
    corpus = [caption, OTHER_IMAGE]  # the default corpus: every caption, images in sorted order
    for negative, op, op_corpus in ((negatives[0], "keyword-substitution", corpus),
                                    (negatives[2], "repeat-remove", None), (negatives[3], "permutation", None)):
        result = perturb(caption, op, seed=3, lang="en", corpus=op_corpus)
        assert (negative.kind, negative.parent, negative.image_id, negative.seed) == (op, caption, "horse", 3)
        assert negative.text == result.text
        assert negative.changed_spans == tuple(result.changed_spans) and negative.changed_spans
        assert (negative.noop, negative.noop_reason) == (False, None)
    # A caption the operation cannot change says so
    single = umic_negatives("horse", "horse", {"horse": ["horse"], "woman": [OTHER_IMAGE]}, seed=0)[3]
    assert single.noop and single.noop_reason and single.changed_spans == ()


def test_the_language_and_corpus_reach_keyword_substitution():
    """German keywords are replaced by German words of the corpus given (not by the default)."""
    caption = "ein großer Hund läuft über eine grüne Wiese"
    corpus = ["eine kleine Katze schläft auf einem roten Sofa"]
    captions = {"hund": [caption], "katze": corpus}
    from scoring.perturb.ops import perturb

    words = set(corpus[0].split()) | set(caption.split())
    read_as_english = 0
    for seed in range(5):
        negative = umic_negatives("hund", caption, captions, lang="de", seed=seed, corpus=corpus)[0]
        assert not negative.noop, negative.noop_reason
        new = set(negative.text.split()) - set(caption.split())
        assert new and new <= words, negative.text  # replacements come from the corpus given
        assert negative.text == perturb(caption, "keyword-substitution", seed=seed, lang="de", corpus=corpus).text
        english = perturb(caption, "keyword-substitution", seed=seed, lang="en", corpus=corpus)
        read_as_english += english.text != negative.text or english.noop
    assert read_as_english  # the language matters here, so passing it on is checked


def test_hard_negatives_only_borrow_from_images_with_captions():
    """The most similar image (sand) has only blank captions: it is never a source."""
    captions = {**CAPTIONS, "sand": ["", "   "]}
    sources = {hard_negative("beach", captions, IDS, EMBEDDINGS, seed=s).source_image_id for s in range(30)}
    assert sources == {"park", "street", "kitchen"}
    assert {random_caption_negative("beach", captions, seed=s).text for s in range(40)}.isdisjoint({"", "   "})
    only_blank = {"beach": ["a dog"], "sand": ["", " "]}
    with pytest.raises(ValueError, match="^negatives from other images need at least one other captioned image$"):
        random_caption_negative("beach", only_blank)
    with pytest.raises(LookupError, match="^image 'moon' is not in captions_by_image$"):
        random_caption_negative("moon", CAPTIONS)
    with pytest.raises(ValueError, match="^no other captioned image has an embedding$"):
        hard_negative("beach", {"beach": ["a dog"], "mars": ["a red planet"]}, IDS, EMBEDDINGS)


def test_most_similar_images_bounds_and_messages():
    assert most_similar_images("beach", IDS, EMBEDDINGS, top_k=1) == [("sand", pytest.approx(0.9535, abs=1e-4))]
    assert [i for i, _ in most_similar_images("beach", IDS, EMBEDDINGS, top_k=2)] == ["sand", "park"]
    assert [i for i, _ in most_similar_images("beach", IDS, EMBEDDINGS, candidates=["street", "kitchen"])] == [
        "street", "kitchen"]
    for kwargs, message in ((dict(top_k=0), "^top_k must be at least 1$"),):
        with pytest.raises(ValueError, match=message):
            most_similar_images("beach", IDS, EMBEDDINGS, **kwargs)
    with pytest.raises(ValueError, match="^image_ids contains duplicates$"):
        most_similar_images("beach", ["beach", "beach", "street", "kitchen", "park"], EMBEDDINGS)
    zero = EMBEDDINGS.copy()
    zero[2] = 0.0
    nan = EMBEDDINGS.copy()
    nan[3, 1] = np.nan
    for bad in (zero, nan):
        with pytest.raises(ValueError, match="^embeddings must be finite and non-zero$"):
            most_similar_images("beach", IDS, bad)


def test_integer_embeddings_rank_as_floats_and_ties_break_by_id():
    ids = ["q", "b", "a", "c"]
    ints = [[2, 0], [1, 1], [1, 1], [0, 3]]  # a and b tie exactly
    ranked = most_similar_images("q", ids, ints, top_k=3)
    assert [i for i, _ in ranked] == ["a", "b", "c"]
    assert ranked[0][1] == pytest.approx(2 ** -0.5) and ranked[2][1] == pytest.approx(0.0)


def test_the_borrowed_caption_of_a_umic_set_is_seeded_from_the_sets_seed_and_names_its_parent():
    import random

    parent = CAPTIONS["beach"][0]
    draw = random.Random(11)
    borrow_seed = draw.randrange(2**31)
    coin = draw.random()  # the draw that picks a hard negative when it falls below hard_probability
    below = umic_negatives("beach", parent, CAPTIONS, seed=11, image_ids=IDS, embeddings=EMBEDDINGS,
                           hard_probability=coin)  # equal: not below, so a random caption
    assert below[1] == random_caption_negative("beach", CAPTIONS, parent=parent, seed=borrow_seed)
    above = umic_negatives("beach", parent, CAPTIONS, seed=11, image_ids=IDS, embeddings=EMBEDDINGS,
                           hard_probability=coin + 1e-12)
    assert above[1] == hard_negative("beach", CAPTIONS, IDS, EMBEDDINGS, parent=parent, seed=borrow_seed)
    assert umic_negatives("beach", parent, CAPTIONS, seed=11) == umic_negatives("beach", parent, CAPTIONS, seed=11)
    assert umic_negatives("beach", parent, CAPTIONS) == umic_negatives("beach", parent, CAPTIONS, seed=0, lang="en")
