"""The scoring API the app, the CLI and the analysis code use (see docs/scoring.md).

    scorer = get_scorer("hub")
    results = scorer.score([ScoreItem(image="cat.jpg", candidate="A cat on a mat.")])
    results["CLIP-S"].values  # one float (or None) per item

Backbones load lazily, once per Scorer, and are shared by every metric that uses them
(CLIP-S, RefCLIP-S and MCS use one CLIP vision tower).  A backbone that cannot be had makes
only its metrics unavailable, with the reason.
"""
from __future__ import annotations

import logging
import threading
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from scoring import stages
from scoring.backbones import BackboneUnavailable, fetch, load_backbone, select_placement
from scoring.backbones.graphs import capture_pending, device_work
from scoring.cache import LRUCache
from scoring.images import ImageInput
from scoring.metrics import build_metric
from scoring.metrics.base import MetricInfo, MetricUnavailable, ScoreContext
from scoring.pixels import ImageEncoder, ImagePipeline
from scoring.registry import Registry, RegistryError, canonical_metric_name, load_registry, overrides_stamp
from scoring.transfer import named_stream
from scoring.user_registry import training_note

__all__ = ["MetricInfo", "MetricResult", "ScoreItem", "Scorer", "get_scorer", "metric_names"]

LOG = logging.getLogger(__name__)
Progress = Callable[..., object]  # called as progress(fraction, desc=...) — gr.Progress fits


@dataclass
class ScoreItem:
    """One caption to score: its image (PIL, bytes or path), references, language."""

    image: ImageInput | None
    candidate: str
    references: list[str] = field(default_factory=list)
    lang: str = "en"
    image_id: str | None = None


@dataclass
class MetricResult:
    """Scores of one metric over the items of a score() call.

    ``values[i]`` is None where item i lacks what the metric needs (image, references);
    ``unavailable`` is the reason when the whole metric cannot run; ``aggregate`` is the
    corpus-level value (the mean of the values, except BLEU and METEOR, whose toolkit
    corpus scores are not means).
    """

    name: str
    values: list[float | None]
    unavailable: str | None = None
    truncated: list[bool] = field(default_factory=list)
    backbone: str = ""
    aggregate: float | None = None

    @property
    def available(self) -> bool:
        return self.unavailable is None


class Scorer:
    """Metrics of one registry profile with shared, lazily loaded backbones and caches."""

    def __init__(self, profile: str | Path | None = None, device: str | None = None, preprocess: str | None = None,
                 threads: int | None = None, registry: Registry | None = None):
        """``preprocess``: "fast" (on the device) or "reference" (each checkpoint's own image
        processor); default fast on CUDA, reference elsewhere (docs/scoring.md). ``threads``:
        the CPU threads scoring may keep busy (torch's and the pipeline's; default: torch's
        choice, with text and image passes overlapping). One runs every stage in turn, so a
        worker given one CPU, such as a Ray actor, uses one and no more. ``registry``: one already
        loaded instead of the profile's (registration scores a new entry before writing it)."""
        if threads is not None:
            if threads < 1:
                raise ValueError("threads must be at least 1")
            torch.set_num_threads(threads)
        self._profile_request = profile if registry is None else registry.profile
        self._overrides_stamp = overrides_stamp()
        self.registry: Registry = registry if registry is not None else load_registry(profile)
        if self.registry.profile == "tiny":
            from scoring.tiny import ensure_tiny_checkpoints

            ensure_tiny_checkpoints()
        elif self.registry.profile == "bench":
            from scoring.bench import ensure_bench_checkpoints

            ensure_bench_checkpoints()
        self.placement = select_placement(device)
        self.images = ImagePipeline(self.placement.device, preprocess, threads=threads)
        self._text_worker = ThreadPoolExecutor(1, thread_name_prefix="caplens-text")
        self._metrics = {name: build_metric(spec) for name, spec in self.registry.metrics.items()}
        self._backbones: dict[str, object] = {}
        self._failures: dict[str, str] = {}
        self._lock = threading.RLock()

    def refresh(self) -> bool:
        """Re-read the registry if an override file changed (e.g. a trained run was
        registered): new metrics appear, backbones whose entry is unchanged stay loaded.
        A file edited into an invalid state is logged and the last good registry kept, so
        a typo in registry.toml does not stop a running app from scoring."""
        stamp = overrides_stamp()
        if stamp == self._overrides_stamp:
            return False
        try:
            registry = load_registry(self._profile_request)
        except RegistryError as exc:
            LOG.warning("registry not reloaded, keeping the previous one: %s", exc)
            self._overrides_stamp = stamp
            return False
        with self._lock:
            self._backbones = {name: loaded for name, loaded in self._backbones.items()
                               if registry.backbones.get(name) == self.registry.backbones.get(name)}
            self._failures = {}  # a checkpoint that was missing may exist now
            self._metrics = {name: build_metric(spec) for name, spec in registry.metrics.items()}
            self.registry = registry
            self._overrides_stamp = stamp
        return True

    # -- registry views ----------------------------------------------------------------
    @property
    def profile(self) -> str:
        return self.registry.profile

    def metric_names(self) -> list[str]:
        """Metric names in registry order, spelled as the registry spells them."""
        return list(self._metrics)

    def canonical_name(self, name: str) -> str:
        """Registry spelling of a case-insensitive metric name (LookupError if unknown)."""
        return canonical_metric_name(self.registry, name)

    def info(self, name: str) -> MetricInfo:
        name = self.canonical_name(name)
        info = self._metrics[name].info(self.backbone_label(name))
        note = training_note(self.registry.metrics[name])
        return replace(info, description=f"{info.description} {note}") if note else info

    def backbone_label(self, name: str) -> str:
        spec = self.registry.metrics[self.canonical_name(name)]
        labels = [self.registry.backbones[b].label for b in (spec.backbone, spec.vision_backbone) if b]
        return " + ".join(labels)

    # -- backbones ---------------------------------------------------------------------
    def backbone(self, name: str):
        """The loaded backbone ``name``; BackboneUnavailable (remembered) when it cannot load."""
        with self._lock:
            if name in self._backbones:
                return self._backbones[name]
            if name in self._failures:
                raise BackboneUnavailable(self._failures[name])
            spec = self.registry.backbones[name]
            try:
                loaded = load_backbone(spec, self.placement, self._resolve_reference, self.images)
            except BackboneUnavailable as exc:
                self._failures[name] = str(exc)
                raise
            self._backbones[name] = loaded
            return loaded

    def _resolve_reference(self, name: str) -> Path:
        if name not in self.registry.backbones:
            raise BackboneUnavailable(f"tokenizer reference @{name} names no backbone")
        return fetch(self.registry.backbones[name])

    def unavailable_reason(self, name: str) -> str | None:
        """Why metric ``name`` cannot run (loads its backbones to find out), else None."""
        name = self.canonical_name(name)
        spec = self.registry.metrics[name]
        try:
            for backbone in (spec.backbone, spec.vision_backbone):
                if backbone:
                    self.backbone(backbone)
            self._metrics[name].check_available()
        except (BackboneUnavailable, MetricUnavailable) as exc:
            return str(exc)
        return None

    def warm_up(self, metrics: Sequence[str] | None = None) -> dict[str, str | None]:
        """Load the backbones of ``metrics`` (all by default) and start METEOR's Java
        process, so the first score() is fast; returns each metric's unavailable reason.
        Safe to run in a background thread while the app starts."""
        names = self.metric_names() if metrics is None else [self.canonical_name(m) for m in metrics]
        reasons = {}
        for name in names:
            reasons[name] = self.unavailable_reason(name)
            if reasons[name] is None:
                try:
                    self._metrics[name].warm_up()
                except MetricUnavailable as exc:
                    reasons[name] = str(exc)
        return reasons

    def clear_caches(self) -> None:
        """Forget every cached embedding and pair score, so that the next score() computes from
        its own items only: a corpus batch then scores bit for bit the same in any process."""
        with self._lock:
            for backbone in self._backbones.values():
                for value in vars(backbone).values():
                    if isinstance(value, LRUCache):
                        value.clear()

    # -- embeddings for other areas (hard negatives, retrieval analysis) --------------------
    def image_embeddings(self, images: Sequence[ImageInput], backbone: str = "clip") -> np.ndarray:
        """(N, D) L2-normalised float32 image embeddings of a CLIP-like backbone (cached)."""
        model = self.backbone(backbone)
        if not hasattr(model, "image_embeddings"):
            raise ValueError(f"backbone {backbone!r} has no image tower")
        with device_work(self.placement.device):
            return model.image_embeddings(list(images))

    def text_embeddings(self, texts: Sequence[str], backbone: str = "clip", prefix: str = "") -> np.ndarray:
        """(N, D) L2-normalised float32 text embeddings (CLIP-like or multilingual backbone)."""
        model = self.backbone(backbone)
        if not hasattr(model, "text_embeddings"):
            raise ValueError(f"backbone {backbone!r} has no text encoder")
        with device_work(self.placement.device):
            embedded, _ = model.text_embeddings([prefix + t for t in texts])
        return embedded

    # -- scoring -----------------------------------------------------------------------
    def score(
        self, items: Sequence[ScoreItem], metrics: Sequence[str] | None = None, progress: Progress | None = None,
        cider_document_frequency=None,
    ) -> dict[str, MetricResult]:
        """Score every item with every requested metric (all by default), registry order.

        Bad input (unknown metric, unreadable image, wrong types) raises before anything is
        scored; a metric that cannot run returns ``unavailable`` and the others still score.
        ``cider_document_frequency`` (a ``coco.CiderDocumentFrequency``) gives CIDEr-D the IDF
        of a whole corpus when these items are one batch of it.
        """
        items = list(items)
        names = self.metric_names() if metrics is None else [self.canonical_name(m) for m in metrics]
        names = [n for n in self.metric_names() if n in set(names)]
        _validate(items)
        if self.placement.device.type == "cuda":
            capture_pending()  # the small batches the last requests met, captured as CUDA graphs
        with device_work(self.placement.device):
            context = self._embed_requested(names, items, cider_document_frequency)
            results: dict[str, MetricResult] = {}
            for index, name in enumerate(names):
                if progress is not None:
                    progress(index / max(len(names), 1), desc=f"scoring {name}")
                results[name] = self._score_one(name, context)
        if progress is not None:
            progress(1.0, desc="done")
        return results

    def _embed_requested(self, names: list[str], items: list[ScoreItem], cider_document_frequency) -> ScoreContext:
        """Read the images and compute every metric's embeddings at once, before any metric
        runs: one batch of texts per text tower (started first, on a second thread), one pass
        over the images for all image towers, which starts on the first files read while the
        rest are still being read. Returns the context the metrics score from."""
        # Which texts and which towers' images the metrics read depends on which items have an
        # image, not on its content: known before any file is read.
        provisional = ScoreContext(items=items, image_keys=[None if item.image is None else "" for item in items],
                                   backbone=self.backbone)
        wanted = self._requests(names, provisional)
        texts_done = self._encode_requested_texts(wanted["text"])
        streaming = self._image_encoder(wanted["image"])
        keys, sources = self.images.identify([item.image for item in items],
                                             consume=None if streaming is None else streaming.add)
        if streaming is not None:
            for tower, rows in zip(streaming.towers, streaming.finish()):
                if streaming.keys:
                    tower.store_images(streaming.keys, rows)
        context = ScoreContext(items=items, image_keys=keys, backbone=self.backbone, sources=sources,
                               cider_document_frequency=cider_document_frequency)
        texts_done.result()
        return context

    def _image_encoder(self, wanted: dict[str, dict[str, None]]) -> ImageEncoder | None:
        """An encoder for the image towers some metric will read, fed while the files are read.
        It takes every image not yet cached in one of them (a metric that reads only some items'
        images, as RefCLIP-S alone on items without references, gets a few more encoded than
        it reads), so every image a metric then asks for is cached."""
        loaded = self._loaded(b for b, inputs in wanted.items() if inputs)
        towers = [tower for tower in loaded.values() if hasattr(tower, "encode_pixels")]
        return ImageEncoder(towers) if towers else None

    def _requests(self, names: list[str], context: ScoreContext) -> dict[str, dict[str, dict[str, None]]]:
        """Per kind ("text", "image") and backbone, the distinct inputs that the metrics will read."""
        wanted: dict[str, dict[str, dict[str, None]]] = {"text": defaultdict(dict), "image": defaultdict(dict)}
        for name in names:
            for request in self._metrics[name].embedding_requests(context):
                wanted[request.kind][request.backbone].update(dict.fromkeys(request.inputs))
        return wanted

    def _loaded(self, backbones) -> dict[str, object]:
        """The backbones that load; one that cannot is skipped here and its metrics say why when they run."""
        loaded = {}
        for backbone in backbones:
            try:
                loaded[backbone] = self.backbone(backbone)
            except BackboneUnavailable:
                continue
        return loaded

    def _encode_requested_texts(self, texts: dict[str, dict[str, None]]) -> Future:
        """Every metric's texts, one batch per text tower, started before the images are read,
        on a second thread (on CUDA, its own stream, so its kernels run beside the image
        towers' instead of queueing behind them) while the files are read, decoded and encoded.
        Serially (one thread, or a stage-timing run) they are encoded before returning."""
        loaded = self._loaded(texts)
        jobs = [(loaded[b], list(wanted)) for b, wanted in texts.items() if b in loaded and wanted]
        device = self.placement.device

        def encode_texts() -> None:
            with torch.cuda.stream(self._text_stream()) if device.type == "cuda" else nullcontext():
                for backbone, wanted in jobs:
                    backbone.text_embeddings(wanted)

        if jobs and self.images.overlap and not stages.is_serial():
            return self._text_worker.submit(encode_texts)
        done: Future = Future()
        encode_texts()
        done.set_result(None)
        return done

    def _text_stream(self) -> "torch.cuda.Stream":
        return named_stream(self.placement.device, "text")

    def _score_one(self, name: str, context: ScoreContext) -> MetricResult:
        metric = self._metrics[name]
        label = self.backbone_label(name)
        n = len(context.items)
        try:
            with stages.stage("similarity"):
                output = metric.compute(context)
        except (BackboneUnavailable, MetricUnavailable) as exc:
            return MetricResult(name, [None] * n, str(exc), [False] * n, label, None)
        present = [v for v in output.values if v is not None]
        aggregate = output.aggregate if output.aggregate is not None else (float(np.mean(present)) if present else None)
        return MetricResult(name, output.values, None, output.truncated, label, aggregate)


def _validate(items: list[ScoreItem]) -> None:
    for position, item in enumerate(items):
        if not isinstance(item, ScoreItem):
            raise ValueError(f"item {position} is {type(item).__name__}, expected ScoreItem")
        if not isinstance(item.candidate, str):
            raise ValueError(f"item {position}: candidate must be a string")
        if not isinstance(item.references, (list, tuple)) or not all(isinstance(r, str) for r in item.references):
            raise ValueError(f"item {position}: references must be a list of strings")


def freeze_long_lived_objects() -> None:
    """Keep Python's full garbage collections short. Each walks every tracked object (about
    700,000 once Gradio, torch, transformers and SQLAlchemy are loaded: 0.3-0.4 s on 2 cores
    with the GIL held; 400,000 and 0.19 s in a scoring process). In the app under a crowd of
    annotators one came every 5-30 s, since each request leaves cycles that reach the oldest
    generation, and every request in flight stalled with it; a corpus run's batches do the same.
    What is alive once the models are loaded lives as long as the process, so it is collected
    once and frozen (`gc.freeze`); later collections walk only what came since."""
    import gc

    gc.collect()
    gc.freeze()


_shared: dict[tuple[str, str | None], Scorer] = {}
_shared_lock = threading.Lock()


def get_scorer(profile: str | Path | None = None, device: str | None = None) -> Scorer:
    """Process-wide Scorer per (profile, device), so backbones and caches are shared."""
    from scoring.registry import default_profile

    key = (str(profile or default_profile()), device)
    with _shared_lock:
        if key not in _shared:
            _shared[key] = Scorer(profile, device)
        scorer = _shared[key]
    scorer.refresh()
    return scorer


def metric_names(profile: str | Path | None = None) -> list[str]:
    """Metric names of a profile without loading any model."""
    return list(load_registry(profile).metrics)


def info(name: str, profile: str | Path | None = None) -> MetricInfo:
    return get_scorer(profile).info(name)
