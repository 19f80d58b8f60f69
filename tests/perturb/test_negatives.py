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
