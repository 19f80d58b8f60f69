"""UMIC negative captions (UMIC §3.2) for contrastive fine-tuning.

Four kinds per positive caption, one of each per batch item as UMIC trains:
keyword substitution, a random caption of another image (a hard negative, the caption of
one of the most similar other images, half of the time when image embeddings are given),
repetition & removal, and word-order permutation. The word-level three come from
`scoring.perturb.ops`.

Hard-negative mining takes precomputed image embeddings as plain arrays: this package does
not import `scoring`; the scoring package computes the embeddings and calls these
functions.
"""
from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from scoring.perturb.ops import perturb

NEGATIVE_KINDS = ("keyword-substitution", "random", "hard", "repeat-remove", "permutation")
HARD_NEGATIVE_PROBABILITY = 0.5  # UMIC: hard negatives half of the time
TOP_K_SIMILAR = 3  # UMIC: captions of the top-3 most similar images


@dataclass(frozen=True)
class Negative:
    """A negative caption for the positive `parent` of image `image_id`.

    kind: one of NEGATIVE_KINDS.
    source_image_id / similarity: the image the caption was borrowed from (random and hard
    negatives) and its image-embedding cosine similarity to `image_id` (hard negatives).
    noop: the perturbation could not change the caption (see `noop_reason`).
    """

    text: str
    kind: str
    parent: str
    image_id: str
    seed: int
    source_image_id: str | None = None
    similarity: float | None = None
    changed_spans: tuple[tuple[int, int], ...] = ()
    noop: bool = False
    noop_reason: str | None = None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["changed_spans"] = [list(span) for span in self.changed_spans]
        return data


def _other_images(image_id: str, captions_by_image: Mapping[str, Sequence[str]]) -> list[str]:
    """Other images that have at least one caption, in sorted (machine-independent) order."""
    if image_id not in captions_by_image:
        raise LookupError(f"image {image_id!r} is not in captions_by_image")
    others = sorted(
        key for key, captions in captions_by_image.items()
        if key != image_id and any(c and c.strip() for c in captions)
    )
    if not others:
        raise ValueError("negatives from other images need at least one other captioned image")
    return others


def _pick_caption(captions: Sequence[str], rng: random.Random) -> str:
    return rng.choice([c for c in captions if c and c.strip()])


def random_caption_negative(
    image_id: str,
    captions_by_image: Mapping[str, Sequence[str]],
    *,
    parent: str = "",
    seed: int = 0,
) -> Negative:
    """A caption of a randomly chosen other image (UMIC "random captions")."""
    rng = random.Random(seed)
    source = rng.choice(_other_images(image_id, captions_by_image))
    text = _pick_caption(captions_by_image[source], rng)
    return Negative(text, "random", parent, image_id, seed, source_image_id=source)


def most_similar_images(
    image_id: str,
    image_ids: Sequence[str],
    embeddings,
    *,
    top_k: int = TOP_K_SIMILAR,
    candidates: Sequence[str] | None = None,
) -> list[tuple[str, float]]:
    """The `top_k` other images closest to `image_id` by cosine similarity of embeddings.

    embeddings: array-like of shape (len(image_ids), dim), row i for image_ids[i].
    candidates: restrict to these image ids (e.g. images that have captions).
    Ties are broken by image id so the order is the same on every machine.
    """
    ids = [str(i) for i in image_ids]
    matrix = np.asarray(embeddings, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != len(ids):
        raise ValueError(
            f"embeddings must have shape (len(image_ids)={len(ids)}, dim), got {matrix.shape}"
        )
    if len(set(ids)) != len(ids):
        raise ValueError("image_ids contains duplicates")
    if image_id not in ids:
        raise LookupError(f"image {image_id!r} has no embedding")
    if top_k < 1:
        raise ValueError("top_k must be at least 1")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if np.any(norms == 0) or not np.all(np.isfinite(matrix)):
        raise ValueError("embeddings must be finite and non-zero")
    unit = matrix / norms
    similarities = unit @ unit[ids.index(image_id)]
    allowed = set(candidates) if candidates is not None else None
    ranked = sorted(
        (
            (-round(float(similarities[row]), 12), ids[row])
            for row in range(len(ids))
            if ids[row] != image_id and (allowed is None or ids[row] in allowed)
        )
    )
    return [(other, -negative) for negative, other in ranked[:top_k]]


def hard_negative(
    image_id: str,
    captions_by_image: Mapping[str, Sequence[str]],
    image_ids: Sequence[str],
    embeddings,
    *,
    parent: str = "",
    seed: int = 0,
    top_k: int = TOP_K_SIMILAR,
) -> Negative:
    """A caption of one of the `top_k` most similar other images (UMIC hard negative)."""
    rng = random.Random(seed)
    neighbours = most_similar_images(
        image_id, image_ids, embeddings, top_k=top_k,
        candidates=_other_images(image_id, captions_by_image),
    )
    if not neighbours:
        raise ValueError("no other captioned image has an embedding")
    source, similarity = rng.choice(neighbours)
    text = _pick_caption(captions_by_image[source], rng)
    return Negative(text, "hard", parent, image_id, seed, source_image_id=source, similarity=similarity)


def umic_negatives(
    image_id: str,
    caption: str,
    captions_by_image: Mapping[str, Sequence[str]],
    *,
    lang: str = "en",
    seed: int = 0,
    image_ids: Sequence[str] | None = None,
    embeddings=None,
    corpus=None,
    hard_probability: float = HARD_NEGATIVE_PROBABILITY,
) -> list[Negative]:
    """The four UMIC negatives of one positive caption, in a fixed order.

    keyword-substitution, random-or-hard caption, repeat-remove, permutation. Without
    `embeddings` (and `image_ids`) the second is always a random caption. `corpus`
    defaults to every caption in `captions_by_image` (the "captions in the training set");
    when generating negatives for many captions, pass one prebuilt
    `scoring.perturb.ops.PosVocabulary` instead so the dictionary is built once.
    """
    if (image_ids is None) != (embeddings is None):
        raise ValueError("pass image_ids and embeddings together")
    rng = random.Random(seed)
    if corpus is None:
        corpus = [c for key in sorted(captions_by_image) for c in captions_by_image[key]]
    negatives = [_from_perturbation(caption, "keyword-substitution", image_id, seed, lang, corpus)]
    borrow_seed = rng.randrange(2**31)
    if embeddings is not None and rng.random() < hard_probability:
        negatives.append(
            hard_negative(image_id, captions_by_image, image_ids, embeddings, parent=caption, seed=borrow_seed)
        )
    else:
        negatives.append(random_caption_negative(image_id, captions_by_image, parent=caption, seed=borrow_seed))
    negatives.append(_from_perturbation(caption, "repeat-remove", image_id, seed, lang, None))
    negatives.append(_from_perturbation(caption, "permutation", image_id, seed, lang, None))
    return negatives


def _from_perturbation(caption, op, image_id, seed, lang, corpus) -> Negative:
    result = perturb(caption, op, seed=seed, lang=lang, corpus=corpus)
    return Negative(
        result.text, op, caption, image_id, seed,
        changed_spans=tuple(result.changed_spans), noop=result.noop, noop_reason=result.noop_reason,
    )
