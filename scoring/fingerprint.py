"""Fingerprints: of image content (the key of the image store and of the embedding caches) and
of a metric's scores (the one key under which its values are stored and reused).

A stored value may only be served where scoring again would give the same value, so a score's
key digests everything the value depends on: the metric's registry row (every setting but its
display name: family, variant, w, prefix, token limit, BLEU order, extra fields such as SPECS'
scale), the row of each backbone it reads (kind, source, revision, tokenizer, token limit,
precision) and, for local checkpoints, their files' sizes and modification times (a checkpoint
retrained in place gets a new key), and for CIDEr-D the document frequencies its IDF comes from.
CIDEr-D with the IDF of the items scored together has no key: its value depends on the batch.
Not digested: a hub checkpoint's files (it is keyed by repository and revision name, so a
revision that moves, such as "main", must be pinned to a commit), and where a value was computed
(the device, the precision picked for it when the backbone's row names none, fast or reference
image preprocessing), which moves values by floating-point rounding only.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from scoring.registry import COMPANION_FIELDS


def content_fingerprint(*parts: bytes) -> str:
    """SHA-256 hex digest of the bytes: the same picture under any file name gets one key."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    return digest.hexdigest()


def _checkpoint_files(spec) -> list[str]:
    """Name, size and modification time of every local file a backbone loads (its `path`, a
    tokenizer folder, a `head_file`), so one retrained in place at the same path gets a new
    fingerprint; none for a hub checkpoint."""
    roots = [spec.path, spec.tokenizer if isinstance(spec.tokenizer, Path) else None, spec.extra.get("head_file")]
    found = []
    for root in (Path(r) for r in roots if r and Path(r).exists()):
        files = [root] if root.is_file() else sorted(f for f in root.rglob("*") if f.is_file())
        found += [f"{f}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files]
    return found


def _towers_a_head_names(spec) -> list[str]:
    """The backbones a local CapLens-R head folder names in its caplens_r.json: where the
    metric's registry row leaves one out, the metric reads the head's (scoring.metrics.caplens_r)."""
    about = Path(spec.path) / "caplens_r.json" if spec.kind == "caplens-r" and spec.path else None
    if about is None or not about.is_file():
        return []
    try:
        named = json.loads(about.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []  # the metric cannot load such a head either
    return [named[key] for key in COMPANION_FIELDS if isinstance(named.get(key), str)] if isinstance(named, dict) else []


def _backbones_read(registry, spec) -> list[str]:
    """Names of the backbones `spec`'s values depend on: its text and vision backbones, any
    backbone an extra field names (CapLens-R's text_backbone), the towers a CapLens-R head
    names itself, and the backbones those borrow a tokenizer from (``tokenizer = "@clip"``)."""
    wanted = [spec.backbone, spec.vision_backbone]
    wanted += [value for value in spec.extra.values() if isinstance(value, str)]
    found: list[str] = []
    while wanted:
        name = wanted.pop(0)
        if not name or name in found or name not in registry.backbones:
            continue
        found.append(name)
        backbone = registry.backbones[name]
        wanted += _towers_a_head_names(backbone)
        if isinstance(backbone.tokenizer, str) and backbone.tokenizer.startswith("@"):
            wanted.append(backbone.tokenizer[1:])
    return found


def document_frequency_digest(frequencies) -> str:
    """SHA-1 of CIDEr-D document frequencies (a `coco.CiderDocumentFrequency`): the number of
    reference sets and every n-gram's count."""
    digest = hashlib.sha1(str(frequencies.reference_sets).encode())
    for ngram, count in sorted(frequencies.counts.items()):
        digest.update(f"{' '.join(ngram)}\t{count}\n".encode("utf-8"))
    return digest.hexdigest()


def score_fingerprint(scorer, metric: str, document_frequency=None) -> str | None:
    """Key of `metric`'s values under `scorer`: ``<profile>:<16 hex digits>``, a digest of every
    setting of the metric's registry row but its display name, of each backbone it reads (its
    registry row and a local checkpoint's files) and, for CIDEr-D, of `document_frequency` (a
    `coco.CiderDocumentFrequency`, the IDF its values were or will be computed with).

    None for CIDEr-D without `document_frequency`: its IDF then comes from the items scored
    together, so a value depends on the batch it was scored in and must not be stored.
    `document_frequency` is ignored for every other metric."""
    registry = scorer.registry
    spec = registry.metrics[scorer.canonical_name(metric)]
    frequencies = None
    if spec.family == "cider":
        if document_frequency is None:
            return None
        frequencies = document_frequency_digest(document_frequency)
    setting = {key: value for key, value in asdict(spec).items() if key != "name"}
    backbones = [[asdict(registry.backbones[name]), _checkpoint_files(registry.backbones[name])]
                 for name in _backbones_read(registry, spec)]
    payload = json.dumps([setting, backbones, frequencies], sort_keys=True, default=str)
    return f"{scorer.profile}:{hashlib.sha1(payload.encode('utf-8')).hexdigest()[:16]}"
