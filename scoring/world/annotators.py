"""Simulated annotators: oracle scores in, noisy "human" ratings out.

Each annotator has a fixed bias (some rate harshly, some leniently) and a noise level, drawn
from the annotator's seed. Ratings follow CapEval1k: an overall score in [0, 1] plus fluency,
relevance and descriptiveness, each derived from the part of the oracle it reflects.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from .errors import Candidate

RATING_STEP = 0.05  # annotators use a slider with 5 % steps


@dataclass(frozen=True)
class Annotator:
    name: str
    bias: float
    noise: float

    @classmethod
    def from_seed(cls, seed: int) -> "Annotator":
        rng = random.Random(f"annotator-{seed}")
        return cls(f"sim-annotator-{seed}", round(rng.gauss(0.0, 0.06), 4), round(rng.uniform(0.04, 0.14), 4))

    def _noisy(self, value: float, rng: random.Random) -> float:
        rated = value + self.bias + rng.gauss(0.0, self.noise)
        return round(min(1.0, max(0.0, round(rated / RATING_STEP) * RATING_STEP)), 2)

    def rate(self, candidate: Candidate, item_key: str) -> dict:
        """One rating of a candidate; the same annotator rates the same item the same way."""
        rng = random.Random(f"{self.name}-{item_key}")
        oracle = candidate.oracle
        asserted = oracle.correct + oracle.wrong
        relevance = oracle.correct / asserted if asserted else 0.0
        return {
            "annotator": self.name,
            "overall": self._noisy(oracle.score, rng),
            "fluency": self._noisy(1.0 - 0.5 * oracle.damage, rng),
            "relevance": self._noisy(relevance, rng),
            "descriptiveness": self._noisy(oracle.coverage, rng),
        }


def panel(size: int = 3, first_seed: int = 0) -> list[Annotator]:
    """`size` annotators with distinct biases and noise levels."""
    if size < 1:
        raise ValueError("an annotator panel needs at least one annotator")
    return [Annotator.from_seed(first_seed + i) for i in range(size)]
