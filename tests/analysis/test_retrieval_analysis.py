"""COCO-SM Recall@K and NDCG@20 against hand computations."""
import math

import numpy as np
import pytest

from scoring.analysis.retrieval import cosine_similarity, ndcg_at_k, recall_at_k, retrieval_table

# 4 caption queries x 3 images; captions 0,1 belong to image 0, caption 2 to 1, caption 3 to 2
SIMILARITY = np.array([
    [0.9, 0.1, 0.2],   # own image first      -> rank 0
    [0.3, 0.5, 0.4],   # own image last       -> rank 2
    [0.2, 0.6, 0.1],   # own image first      -> rank 0
    [0.5, 0.1, 0.4],   # own image second     -> rank 1
])
TEXT_TO_IMAGE = [0, 0, 1, 2]


def test_recall_at_k_by_hand():
    assert recall_at_k(SIMILARITY, TEXT_TO_IMAGE, ks=(1, 2, 3)) == {"R@1": 0.5, "R@2": 0.75, "R@3": 1.0}


def test_ndcg_by_hand():
    english = np.array([[0.03, 0.01, 0.02]])
    other = np.array([[0.01, 0.02, 0.03]])    # ranks images 2, 1, 0
    relevance = np.exp(100 * english[0]) / np.exp(100 * english[0]).sum()  # e^3, e^1, e^2 normalised
    discount = [1 / math.log2(2), 1 / math.log2(3)]
    dcg = relevance[2] * discount[0] + relevance[1] * discount[1]
    ideal = relevance[0] * discount[0] + relevance[2] * discount[1]
    assert ndcg_at_k(other, english, k=2) == pytest.approx(dcg / ideal)
    assert ndcg_at_k(english, english, k=2) == pytest.approx(1.0)


def test_table_per_language():
    rng = np.random.default_rng(0)
    english = rng.normal(size=(6, 4))
    table = retrieval_table({"en": english, "de": english + rng.normal(0, 0.01, (6, 4)), "xx": -english},
                            [0, 0, 1, 2, 3, 3], ks=(1, 5, 10), ndcg_at=20).set_index("lang")
    assert table.loc["en", "NDCG@20"] == pytest.approx(1.0)
    assert table.loc["de", "NDCG@20"] > table.loc["xx", "NDCG@20"]
    assert table.loc["en", "R@10"] == 1.0  # only 4 images
    with pytest.raises(ValueError, match="image index"):
        recall_at_k(SIMILARITY, [0, 0, 1, 7])


def test_cosine_similarity_normalises():
    sim = cosine_similarity([[2.0, 0.0], [1.0, 1.0]], [[5.0, 0.0]])
    assert sim[:, 0] == pytest.approx([1.0, math.sqrt(0.5)])


def test_ties_count_as_a_random_order_of_the_tied_images():
    # Every image scored alike (here 4 images): the right one is equally likely at any of
    # the 4 positions, so R@K = K / 4, not 1 (ties used to go to the query).
    flat = np.zeros((3, 4))
    assert recall_at_k(flat, [0, 1, 3], ks=(1, 2, 4)) == pytest.approx({"R@1": 0.25, "R@2": 0.5, "R@4": 1.0})
    # Query 0: one image strictly higher (h = 1), two others tied with its own (t = 2):
    # its position is uniform on 1..3, so P(top 1) = 0, P(top 2) = 1/3, P(top 3) = 2/3.
    # Query 1: own image first, no ties: a hit for every K.
    sims = np.array([[0.5, 0.9, 0.5, 0.5, 0.1],
                     [0.8, 0.1, 0.2, 0.3, 0.4]])
    assert recall_at_k(sims, [0, 0], ks=(1, 2, 3, 4)) == pytest.approx(
        {"R@1": (0 + 1) / 2, "R@2": (1 / 3 + 1) / 2, "R@3": (2 / 3 + 1) / 2, "R@4": 1.0})
