"""A fluency model learned from a rating study, read by CapLens-R.

Image-text embeddings barely see grammar: "a green small circle", "an small green circle" and
"small green circle" embed like the fluent caption. A word trigram language model does see them:
the word pairs and triples of damaged text are rare or absent in fluent text. CapLens-R fits one
per language on the texts a study says are fluent, every reference and every rated caption
whose mean fluency rating reaches a threshold, so the raters' fluency judgements teach the
metric what fluent text looks like (SLOR-style fluency features; Kann et al., CoNLL 2018).

The model is an interpolated trigram model with absolute discounting (d = 0.75) whose lowest
order counts continuations (Kneser & Ney, 1995). Per caption it gives five numbers: the mean
and the lowest log-probability of its tokens, the share of its word pairs and of its word
triples never seen in fluent text, and whether any pair was unseen. Tokens: lower-cased words
and punctuation; Chinese and Japanese script one character per token.
"""
from __future__ import annotations

import gzip
import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np

FEATURES = 5
DISCOUNT = 0.75
START, END = "<s>", "</s>"
FILE_NAME = "fluency_lm.json.gz"
ANY_LANGUAGE = "*"  # the model of all languages together, for a caption in a language the study had none of
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"\w+|[^\w\s]")


def tokens(text: str) -> list[str]:
    """Padded tokens of a text: two starts, the words (CJK script one character each), one end."""
    out: list[str] = []
    for word in text.lower().split():
        out += list(word) if _CJK.search(word) else _WORD.findall(word)
    return [START, START, *out, END]


class TrigramModel:
    """Interpolated absolute-discount trigram model with continuation counts at the lowest order."""

    def __init__(self, trigrams: Counter):
        self.trigrams = trigrams
        self.bigrams: Counter = Counter()
        self.context2: Counter = Counter()  # (h2, h1) -> count
        self.types2: Counter = Counter()  # (h2, h1) -> distinct next words
        for (h2, h1, w), n in trigrams.items():
            self.bigrams[(h1, w)] += n
            self.context2[(h2, h1)] += n
            self.types2[(h2, h1)] += 1
        self.context1: Counter = Counter()
        self.types1: Counter = Counter()
        self.continuations: Counter = Counter()  # w -> distinct words seen before it
        for (h1, w), n in self.bigrams.items():
            self.context1[h1] += n
            self.types1[h1] += 1
            self.continuations[w] += 1
        self.bigram_types = len(self.bigrams)
        self.vocabulary = len(self.continuations) + 1  # + the unseen word

    @classmethod
    def fit(cls, texts) -> "TrigramModel":
        counts: Counter = Counter()
        for text in texts:
            tk = tokens(text)
            counts.update(zip(tk, tk[1:], tk[2:]))
        return cls(counts)

    def probability(self, h2: str, h1: str, w: str) -> float:
        p = (self.continuations[w] + 0.5) / (self.bigram_types + 0.5 * self.vocabulary)
        for count, context, types in ((self.bigrams[(h1, w)], self.context1[h1], self.types1[h1]),
                                      (self.trigrams[(h2, h1, w)], self.context2[(h2, h1)], self.types2[(h2, h1)])):
            if context:
                p = max(count - DISCOUNT, 0.0) / context + DISCOUNT * types / context * p
        return p

    def features(self, text: str) -> list[float]:
        tk = tokens(text)
        logs, unseen2, unseen3 = [], 0, 0
        for h2, h1, w in zip(tk, tk[1:], tk[2:]):
            logs.append(math.log(self.probability(h2, h1, w)))
            unseen2 += self.bigrams[(h1, w)] == 0
            unseen3 += self.trigrams[(h2, h1, w)] == 0
        n = len(logs)
        return [sum(logs) / n, min(logs), unseen2 / n, unseen3 / n, float(unseen2 > 0)]

    def to_json(self) -> list:
        return sorted([*key, n] for key, n in self.trigrams.items())

    @classmethod
    def from_json(cls, rows: list) -> "TrigramModel":
        return cls(Counter({(h2, h1, w): int(n) for h2, h1, w, n in rows}))


class FluencyModel:
    """One trigram model per language (and one of all languages), and the mean and spread of
    each feature over the training captions, so the head reads standardised features."""

    def __init__(self, models: dict[str, TrigramModel], mean=None, scale=None, about: dict | None = None):
        self.models = models
        self.mean = np.zeros(FEATURES) if mean is None else np.asarray(mean, dtype=np.float64)
        self.scale = np.ones(FEATURES) if scale is None else np.asarray(scale, dtype=np.float64)
        self.about = about or {}

    @classmethod
    def fit(cls, texts_by_language: dict[str, list[str]], about: dict | None = None) -> "FluencyModel":
        if not any(texts_by_language.values()):
            raise ValueError("the fluency model has no fluent text to learn from: the set has no references "
                             "and no caption rated fluent")
        models = {lang: TrigramModel.fit(texts) for lang, texts in sorted(texts_by_language.items()) if texts}
        models[ANY_LANGUAGE] = TrigramModel.fit(t for lang in sorted(texts_by_language) for t in texts_by_language[lang])
        return cls(models, about=about)

    def raw(self, texts, languages) -> np.ndarray:
        """(N, 5) unstandardised features, each text by its language's model."""
        out = np.zeros((len(texts), FEATURES), dtype=np.float64)
        for k, (text, lang) in enumerate(zip(texts, languages)):
            out[k] = self.models.get(lang or "", self.models[ANY_LANGUAGE]).features(text)
        return out

    def standardise_on(self, raw: np.ndarray) -> None:
        self.mean = raw.mean(axis=0)
        self.scale = np.maximum(raw.std(axis=0), 1e-6)

    def standardised(self, raw: np.ndarray) -> np.ndarray:
        return ((raw - self.mean) / self.scale).astype(np.float32)

    def features(self, texts, languages) -> np.ndarray:
        return self.standardised(self.raw(texts, languages))

    def save(self, folder: Path) -> None:
        payload = {"about": self.about, "mean": self.mean.tolist(), "scale": self.scale.tolist(),
                   "models": {lang: model.to_json() for lang, model in self.models.items()}}
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        (folder / FILE_NAME).write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))  # same model, same bytes

    @classmethod
    def load(cls, folder: Path) -> "FluencyModel":
        payload = json.loads(gzip.decompress((folder / FILE_NAME).read_bytes()).decode("utf-8"))
        return cls({lang: TrigramModel.from_json(rows) for lang, rows in payload["models"].items()},
                   payload["mean"], payload["scale"], payload.get("about"))
