"""Fingerprints: of image content (the key of the image store and of the embedding caches) and
of checkpoints (the one key under which a metric's values are stored and reused).

A value scored with one checkpoint must never be served for another, so the key digests the
profile, each backbone's label and source and, for local checkpoints, their files' sizes and
modification times (a checkpoint retrained in place gets a new key).
"""
from __future__ import annotations

import hashlib
from pathlib import Path


def content_fingerprint(*parts: bytes) -> str:
    """SHA-256 hex digest of the bytes: the same picture under any file name gets one key."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    return digest.hexdigest()


def _checkpoint_identity(spec) -> str:
    """Label and source of a backbone; a local checkpoint adds its files' sizes and times, so
    one retrained in place at the same path gets a new fingerprint."""
    parts = [spec.label, spec.source]
    if spec.path is not None and Path(spec.path).exists():
        root = Path(spec.path)
        files = [root] if root.is_file() else sorted(f for f in root.rglob("*") if f.is_file())
        parts += [f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files]
    return "|".join(parts)


def score_fingerprint(scorer, metric: str) -> str:
    """Cache key of `metric`'s values under `scorer`: the profile plus a digest of the metric's
    backbones (label, checkpoint source and, for local checkpoints, their files), so values
    from another profile or checkpoint are never reused. Toolkit metrics have no backbone."""
    spec = scorer.registry.metrics[scorer.canonical_name(metric)]
    backbones = [scorer.registry.backbones[b] for b in (spec.backbone, spec.vision_backbone) if b]
    identity = " + ".join(_checkpoint_identity(b) for b in backbones) or "toolkit"
    return f"{scorer.profile}:{hashlib.sha1(identity.encode('utf-8')).hexdigest()[:16]}"

