"""Multilingual text-to-image retrieval in the COCO-SM protocol (unum-cloud/coco-sm).

For each language, a similarity matrix S (texts x images, cosine of L2-normalised
embeddings) gives:

- Recall@K (K = 1, 5, 10): share of caption queries whose own image is among the K most
  similar images. Ties are counted as expected under a random order of the tied images:
  with h images scored strictly higher than the right one and t other images scored equal
  to it, the right image's 0-based position is uniform on h..h+t, so it is among the top K
  with probability clamp((K - h) / (t + 1), 0, 1) (the plain hit (h < K) when t = 0).
  Embeddings that score every image alike therefore get chance level (K / N), not 1.
  Range [0, 1].
- NDCG@20 against English: how well language X's top-20 ranking agrees with the English
  one for the same query. Relevance of image j for query q is softmax_j(100 * S_en[q, j])
  (the English similarities sharpened by CLIP's logit scale); DCG of language X's top 20
  under those relevances, divided by the DCG of English's own top 20, averaged over
  queries. English against itself gives 1. Range [0, 1].

Captions of language X must be in the same order as the English ones (caption q in every
language is a translation of English caption q), which is how COCO-SM meta files are laid out.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

NDCG_AT = 20
LOGIT_SCALE = 100.0


def _matrix(similarity, name: str = "similarity") -> np.ndarray:
    matrix = np.asarray(similarity, dtype=float)
    if matrix.ndim != 2:
        raise ValueError(f"{name} must be a texts x images matrix, got shape {matrix.shape}")
    if np.isnan(matrix).any():
        raise ValueError(f"{name} contains nan")
    return matrix


def cosine_similarity(text_embeddings, image_embeddings) -> np.ndarray:
    """Texts x images cosine similarity of row-normalised embeddings."""
    texts = np.asarray(text_embeddings, dtype=float)
    images = np.asarray(image_embeddings, dtype=float)
    texts = texts / np.clip(np.linalg.norm(texts, axis=1, keepdims=True), 1e-12, None)
    images = images / np.clip(np.linalg.norm(images, axis=1, keepdims=True), 1e-12, None)
    return texts @ images.T


def _checked(similarity, text_to_image) -> tuple[np.ndarray, np.ndarray]:
    """(matrix, each query's own image's score) after checking the shapes and indices."""
    matrix = _matrix(similarity)
    targets = np.asarray(text_to_image, dtype=int)
    if targets.shape != (matrix.shape[0],):
        raise ValueError(f"text_to_image needs one image index per text ({matrix.shape[0]}), got {targets.shape}")
    if targets.min(initial=0) < 0 or targets.max(initial=0) >= matrix.shape[1]:
        raise ValueError("text_to_image holds an image index outside the similarity matrix")
    return matrix, matrix[np.arange(matrix.shape[0]), targets]


def correct_image_ranks(similarity, text_to_image) -> np.ndarray:
    """0-based rank of each query's own image counting only the images scored strictly
    higher (the best position it can have among its ties; `recall_at_k` also counts ties)."""
    matrix, own = _checked(similarity, text_to_image)
    return (matrix > own[:, None]).sum(axis=1)


def correct_image_ties(similarity, text_to_image) -> np.ndarray:
    """Number of other images scored exactly as each query's own image."""
    matrix, own = _checked(similarity, text_to_image)
    return (matrix == own[:, None]).sum(axis=1) - 1


def recall_at_k(similarity, text_to_image, ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
    """Text-to-image Recall@K for each K, keyed 'R@K'. A query whose own image has h images
    scored strictly higher and t others scored equal counts clamp((K - h) / (t + 1), 0, 1):
    the chance that the image lands in the top K when its ties are put in a random order
    (its position is uniform on h..h+t); without ties that is 1 if h < K, else 0."""
    higher = correct_image_ranks(similarity, text_to_image).astype(float)
    tied = correct_image_ties(similarity, text_to_image).astype(float)
    return {f"R@{k}": float(np.clip((k - higher) / (tied + 1.0), 0.0, 1.0).mean()) for k in ks}


def _softmax(rows: np.ndarray) -> np.ndarray:
    shifted = rows - rows.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=1, keepdims=True)


def _top_k(matrix: np.ndarray, k: int) -> np.ndarray:
    # Stable descending order: equal scores keep the lower image index first.
    return np.argsort(-matrix, axis=1, kind="stable")[:, :k]


def ndcg_at_k(similarity, reference_similarity, k: int = NDCG_AT, logit_scale: float = LOGIT_SCALE) -> float:
    """Mean NDCG@k of `similarity`'s rankings, graded by the reference (English) similarities."""
    matrix = _matrix(similarity)
    reference = _matrix(reference_similarity, "reference similarity")
    if matrix.shape != reference.shape:
        raise ValueError(f"similarity {matrix.shape} and reference {reference.shape} differ in shape")
    k = min(k, matrix.shape[1])
    relevance = _softmax(reference * logit_scale)
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    ranked = np.take_along_axis(relevance, _top_k(matrix, k), axis=1)
    ideal = np.take_along_axis(relevance, _top_k(reference, k), axis=1)
    return float(((ranked @ discounts) / (ideal @ discounts)).mean())


def retrieval_table(
    similarities: Mapping[str, np.ndarray],
    text_to_image,
    *,
    reference_lang: str = "en",
    ks: Sequence[int] = (1, 5, 10),
    ndcg_at: int = NDCG_AT,
) -> pd.DataFrame:
    """One row per language: R@1/5/10 and NDCG@20 against `reference_lang`.

    NDCG is nan for every language when the reference language is missing.
    """
    if not similarities:
        raise ValueError("no similarity matrices given")
    reference = similarities.get(reference_lang)
    rows = []
    for lang, matrix in similarities.items():
        row = {"lang": lang, **recall_at_k(matrix, text_to_image, ks)}
        row[f"NDCG@{ndcg_at}"] = ndcg_at_k(matrix, reference, ndcg_at) if reference is not None else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)
