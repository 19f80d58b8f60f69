"""CIDEr-D with document frequencies of a whole corpus: batches score as the whole set does."""
from __future__ import annotations

import pytest

from scoring.api import ScoreItem
from scoring.metrics.coco import CiderDocumentFrequency, ptb_tokenize

pytestmark = pytest.mark.java

CANDIDATES = [
    "A man is riding a horse on the beach.",
    "Two dogs play with a red ball in the grass!",
    "a plate of food, with broccoli and rice",
    "A group of people standing next to a yellow bus.",
    "The cat sits on the window-sill, looking out.",
]
REFERENCES = [
    ["A person rides a brown horse along the beach.", "Man riding horse near the ocean", "a horse and rider on sand"],
    ["Two dogs are playing in the grass with a ball.", "dogs chasing a red ball"],
    ["A plate with broccoli, rice and meat.", "Food on a white plate.", "a healthy meal"],
    ["People waiting for a yellow school bus.", "A yellow bus parked near a crowd of people."],
    ["A cat sitting on a windowsill.", "The cat looks out of the window."],
]


def test_batches_with_corpus_frequencies_equal_the_whole_set(java, tiny_scorer):
    items = [ScoreItem(None, c, r) for c, r in zip(CANDIDATES, REFERENCES)]
    whole = tiny_scorer.score(items, ["CIDEr"])["CIDEr"].values
    frequencies = CiderDocumentFrequency()
    for refs in REFERENCES:
        frequencies.add(ptb_tokenize(refs))
    assert frequencies.reference_sets == 5
    batched = []
    for start in (0, 2, 4):
        batch = tiny_scorer.score(items[start:start + 2], ["CIDEr"], cider_document_frequency=frequencies)
        batched += batch["CIDEr"].values
    assert batched == whole  # the toolkit's arithmetic, bit for bit
    # Without the corpus frequencies a batch of one has no IDF and scores 0.
    alone = tiny_scorer.score(items[4:], ["CIDEr"])["CIDEr"].values
    assert alone == [0.0] and batched[4] > 0.5
    # Scoring does not grow the corpus table with the candidates' unseen n-grams.
    assert ("window-sill",) not in frequencies.counts and frequencies.counts[("window-sill",)] == 0.0
