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
