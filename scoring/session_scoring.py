"""Scoring what a person typed: every image × caption with every chosen metric, remembering
scored pairs so that editing one caption sends only that caption to the scorer.

The memory is a plain dict the caller keeps per session (the app's `gr.State`), keyed by
(image hash, caption, references, language); the scorer's own embedding cache then encodes
only the new text.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Protocol

import pandas as pd

from scoring.api import ScoreItem
from scoring.language_id import AUTO, resolve_language

MAX_CACHED_ROWS = 2000


class DecodedImage(Protocol):
    """An uploaded image: decoded pixels, the raw bytes (its identity) and a display name."""

    image: object
    data: bytes
    name: str


@dataclass
class ScoreRequest:
    """One scoring request as a front end receives it."""

    images: list[DecodedImage]
    captions: list[str]
    references: list[str]
    lang: str = AUTO
    metrics: list[str] | None = None


@dataclass
class ScoreOutcome:
    """`frame`: one row per image × caption (#, image, caption, lang, one column per metric,
    "truncated by"); `availability`: per metric its backbone and status."""

    frame: pd.DataFrame
    metric_columns: list[str]
    availability: list[dict]
    messages: list[str] = field(default_factory=list)
    scored_now: int = 0


def _image_key(image: DecodedImage | None) -> str:
    return "" if image is None else hashlib.sha256(image.data).hexdigest()


def score_request(scorer, request: ScoreRequest, cache: dict | None = None) -> ScoreOutcome:
    """Score every image × caption pair of `request` (no image: text metrics only), reusing
    `cache` for pairs already scored. Unknown metric names raise LookupError."""
    cache = cache if cache is not None else {}
    names = [scorer.canonical_name(m) for m in request.metrics] if request.metrics else scorer.metric_names()
    meta: dict[str, dict] = cache.setdefault("_metrics", {})
    rows_cache: dict = cache.setdefault("_rows", {})
    images: list[DecodedImage | None] = list(request.images) or [None]
    refs = tuple(request.references)

    pairs = []
    for image in images:
        for caption in request.captions:
            lang = resolve_language(request.lang, caption)
            pairs.append((image, caption, lang, (_image_key(image), caption, refs, lang)))

    # Each key once, and each missing metric scored for it.
    unique: dict = {}
    for img, cap, lang, key in pairs:
        if not set(names) <= set(rows_cache.get(key, {})):
            unique.setdefault(key, (img, cap, lang))
    if unique:
        items = [ScoreItem(image=None if img is None else img.image, candidate=cap, references=list(refs), lang=lang,
                           image_id=None if img is None else img.name)
                 for img, cap, lang in unique.values()]
        results = scorer.score(items, names)
        for position, key in enumerate(unique):
            row = rows_cache.setdefault(key, {})
            for name, result in results.items():
                row[name] = (result.values[position], bool(result.truncated[position]) if result.truncated else False)
        for name, result in results.items():
            meta[name] = {"backbone": result.backbone, "unavailable": result.unavailable}
        for stale in list(rows_cache)[: max(0, len(rows_cache) - MAX_CACHED_ROWS)]:
            del rows_cache[stale]

    table_rows = []
    for number, (image, caption, lang, key) in enumerate(pairs, start=1):
        scored = rows_cache.get(key, {})
        row = {"#": number, "image": "" if image is None else image.name, "caption": caption, "lang": lang}
        for name in names:
            row[name] = scored.get(name, (None, False))[0]
        row["truncated by"] = ", ".join(n for n in names if scored.get(n, (None, False))[1])
        table_rows.append(row)
    frame = pd.DataFrame(table_rows, columns=["#", "image", "caption", "lang", *names, "truncated by"])
    availability = _availability(names, meta, [rows_cache.get(key, {}) for *_, key in pairs], bool(refs))
    return ScoreOutcome(frame=frame, metric_columns=names, availability=availability, scored_now=len(unique))


def _availability(names, meta: dict, rows: list[dict], with_references: bool) -> list[dict]:
    """Per metric: its backbone and "available", "unavailable: <reason>", or what these rows
    lack for it (references, else an image) when it scored none of them."""
    availability = []
    for name in names:
        info = meta.get(name, {})
        reason = info.get("unavailable")
        status = f"unavailable: {reason}" if reason else "available"
        if not reason and all(row.get(name, (None,))[0] is None for row in rows):
            status = "available (needs " + ("an image" if with_references else "references") + " for these rows)"
        availability.append({"metric": name, "backbone": info.get("backbone", ""), "status": status})
    return availability
