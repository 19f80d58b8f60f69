"""The Metric protocol shared by every family, and the pieces metrics are built from."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Sequence

import numpy as np

from scoring.registry import MetricSpec

if TYPE_CHECKING:  # pragma: no cover
    from scoring.api import ScoreItem


class MetricUnavailable(RuntimeError):
    """The whole metric cannot run here; the message is the reason shown to the user."""


@dataclass(frozen=True)
class MetricInfo:
    """What a metric measures and needs; shown in the UI and `caplens score --help`."""

    name: str
    family: str
    needs_image: bool
    needs_references: bool
    languages: tuple[str, ...] | None  # None: any language
    backbone: str  # human-readable backbone label ("" for n-gram metrics)
    description: str
    range: tuple[float, float]  # the lowest and highest value the formula can give (attainable bounds)
    citation: str
    w: float = 1.0
    prefix: str = ""
    higher_is_better: bool = True  # every shipped metric scores a better caption higher
    one_word_languages: tuple[str, ...] = ()  # languages in which it reads a whole caption as one word


def one_word_note(lang: str) -> str:
    """Why word-overlap values in a language written without spaces are not word overlap; the one
    wording of the Score tab's per-batch status and the collection views' notes."""
    return (f"each {lang} caption is read as one word ({lang} is written without spaces, and the COCO "
            f"toolkit splits words at spaces), so the {lang} values are not word overlap")


@dataclass
class MetricOutput:
    values: list[float | None]
    truncated: list[bool]
    aggregate: float | None = None  # set when the metric's corpus value is not the mean


@dataclass
class ScoreContext:
    """What a metric may use while scoring one batch of items."""

    items: Sequence["ScoreItem"]
    image_keys: list[str | None]
    backbone: Any  # callable: name -> loaded backbone (raises BackboneUnavailable)
    memo: dict = field(default_factory=dict)  # shared between metrics of one score() call
    sources: dict = field(default_factory=dict)  # image key -> encoded bytes or PIL image, read once
    cider_document_frequency: Any = None  # coco.CiderDocumentFrequency of a whole corpus, else the batch's


@dataclass(frozen=True)
class EmbeddingRequest:
    """Embeddings a metric will read. Metrics on embedding towers list them in
    ``embedding_requests(context)``; the Scorer computes every metric's requests together
    (texts batched per text tower, images in one pass over all image towers) before any
    metric runs, so each metric then finds them cached."""

    backbone: str
    kind: str  # "text" or "image"
    inputs: tuple[str, ...]  # texts, or image keys


class Metric(Protocol):
    """What the Scorer calls on a metric. A family subclasses it to inherit the three optional
    hooks below (each a no-op by default) and implements ``info`` and ``compute``."""

    spec: MetricSpec
    needs_image: bool
    needs_references: bool

    def info(self, backbone_label: str) -> MetricInfo:
        """Name, inputs, the attainable ``range``, ``higher_is_better``, description, citation."""
        ...

    def compute(self, context: ScoreContext) -> MetricOutput:
        """One value per item of ``context`` (None where the item lacks what the metric needs)."""
        ...

    def embedding_requests(self, context: ScoreContext) -> list[EmbeddingRequest]:
        """Embeddings ``compute`` will read, so the Scorer computes every metric's at once. The
        Scorer asks before any image file is read (``context.image_keys`` then holds a
        placeholder per item with an image): which inputs are requested may depend on the items,
        not on the images' content."""
        return []

    def check_available(self) -> None:
        """Raise MetricUnavailable with the reason when the metric cannot run here (its
        backbones are checked by the Scorer before this is called)."""

    def warm_up(self) -> None:
        """Start what the first ``compute`` would otherwise wait for (METEOR's Java process)."""


def harmonic_mean(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise 2ab/(a+b) of non-negative scores, 0 where both are 0 (RefCLIP-S, RefPAC-S):
    there the numerator is 0 too, so dividing it by 1 gives the 0."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    total = a + b
    return 2 * a * b / np.where(total > 0, total, 1.0)


def rows_with(context: ScoreContext, *, image: bool = False, references: bool = False) -> list[int]:
    """Indices of the items that have what a metric needs."""
    picked = []
    for i, item in enumerate(context.items):
        if image and item.image is None:
            continue
        if references and not item.references:
            continue
        picked.append(i)
    return picked


def nothing_scored(context: ScoreContext) -> MetricOutput:
    """The output when no item has what the metric needs: no value anywhere, nothing cut."""
    n = len(context.items)
    return MetricOutput([None] * n, [False] * n)


def scatter(n: int, rows: list[int], values, flags=None) -> tuple[list[float | None], list[bool]]:
    out: list[float | None] = [None] * n
    truncated = [False] * n
    for j, i in enumerate(rows):
        out[i] = float(values[j])
        if flags is not None:
            truncated[i] = bool(flags[j])
    return out, truncated
