"""Images to model inputs: each image decoded once, preprocessed once per configuration.

Two preprocessing modes (docs/scoring.md):

* ``reference``: the checkpoint's own image processor (Pillow) on the decoded image, equal to
  what published scores were computed with;
* ``fast``: the same resize (Pillow's filter weights, applied as matrix products), centre
  crop and normalisation as tensor operations on the device, on images decoded by nvJPEG
  in batches (CUDA) or by Pillow in threads (CPU). CLIP-S stays within 2e-3 of
  ``reference`` (tests/scoring/test_pixels.py); nvJPEG's decoder differs from libjpeg's by
  a level or two per pixel, which is most of the difference on CUDA.

Default: ``fast`` on CUDA, ``reference`` elsewhere; ``$CAPLENS_PREPROCESS`` overrides.

Decoded images live in a cache bounded in bytes and keyed by content hash, so an image
shared by several captions, metrics or calls is decoded once. :func:`encode_images` runs
the image towers of several backbones over one pass of the images: backbones with the same
preprocessing configuration (CLIP, PAC-S and SPECS all use CLIP's 224-px recipe) share the
pixels, and the next batch is decoded and preprocessed while the current one runs.
"""
from __future__ import annotations

import functools
import math
import os
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol, Sequence

import numpy as np
import torch

from scoring import stages
from scoring.batching import map_halving, memory_batch_size
from scoring.cache import LRUCache
from PIL import Image

from scoring.images import (
    ImageDecodeError, ImageInput, ImageLimits, bytes_key, exif_orientation, image_key, image_limits, jpeg_fits_limits,
    load_image, open_checked, read_image_bytes, scan_jpeg_header,
)
from scoring.transfer import named_stream, pinned_views, to_device

MODES = ("reference", "fast")
# Pillow's resampling filters (codes as image processors store them; 0, nearest, is a plain
# lookup): support and kernel.
_FILTERS = {
    1: (3.0, lambda x: _sinc(x) * _sinc(x / 3.0) if -3.0 <= x < 3.0 else 0.0),  # Lanczos
    2: (1.0, lambda x: 1.0 - abs(x) if abs(x) < 1.0 else 0.0),  # bilinear
    3: (2.0, lambda x: _bicubic(abs(x))),  # bicubic, a = -0.5
    4: (0.5, lambda x: 1.0 if -0.5 <= x < 0.5 else 0.0),  # box
    5: (1.0, lambda x: _sinc(x) * (0.54 + 0.46 * math.cos(math.pi * x)) if abs(x) < 1.0 else 0.0),  # Hamming
}
RESIZE_BYTES = 512 << 20  # float64 working set of one resize step
PRECISION_BITS = 32 - 8 - 2  # Pillow's fixed-point weights for 8-bit images
DECODE_WORKERS = min(8, os.cpu_count() or 1)
# Threads reading and hashing image files ($CAPLENS_READ_THREADS): from the page cache each file
# holds the GIL for most of its read, so many threads contend (benchmarks/bench_decode.py
# measures 1 to 16); a network file system wants more. A task reads a few dozen files.
READ_WORKERS = max(1, int(os.environ.get("CAPLENS_READ_THREADS") or min(2, os.cpu_count() or 1)))
READ_TASK_FILES = 32


def tensor_bytes(value) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    width, height = value.size  # a PIL image
    return width * height * len(value.getbands())


def default_mode(device: torch.device) -> str:
    """``$CAPLENS_PREPROCESS`` if set, else fast on CUDA and reference elsewhere."""
    chosen = os.environ.get("CAPLENS_PREPROCESS") or ("fast" if device.type == "cuda" else "reference")
    if chosen not in MODES:
        raise ValueError(f"CAPLENS_PREPROCESS={chosen!r}: expected one of {', '.join(MODES)}")
    return chosen


def _size_field(size, key: str):
    if size is None:
        return None
    value = size.get(key) if hasattr(size, "get") else getattr(size, key, None)
    return int(value) if value else None


@dataclass(frozen=True)
class PreprocessConfig:
    """Resize, centre crop and normalisation read from a checkpoint's image processor."""

    shortest_edge: int | None  # resize so the shorter side has this length …
    resize_to: tuple[int, int] | None  # … or to exactly (height, width)
    crop: tuple[int, int] | None
    resample: int
    rescale: float
    mean: tuple[float, ...]
    std: tuple[float, ...]

    @classmethod
    def of(cls, processor) -> "PreprocessConfig":
        size = processor.size if getattr(processor, "do_resize", True) else None
        shortest = _size_field(size, "shortest_edge")
        height, width = _size_field(size, "height"), _size_field(size, "width")
        crop = None
        if getattr(processor, "do_center_crop", False):
            crop = (_size_field(processor.crop_size, "height"), _size_field(processor.crop_size, "width"))
        normalise = getattr(processor, "do_normalize", True)
        return cls(
            shortest_edge=shortest,
            resize_to=(height, width) if shortest is None and height and width else None,
            crop=crop,
            resample=int(getattr(processor, "resample", 3) or 0),
            rescale=float(processor.rescale_factor) if getattr(processor, "do_rescale", True) else 1.0,
            mean=tuple(float(v) for v in processor.image_mean) if normalise else (0.0, 0.0, 0.0),
            std=tuple(float(v) for v in processor.image_std) if normalise else (1.0, 1.0, 1.0),
        )

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """Output size of the resize step, computed as transformers computes it."""
        if self.resize_to is not None:
            return self.resize_to
        if self.shortest_edge is None:
            return height, width
        short, long = (width, height) if width <= height else (height, width)
        new_long = int(self.shortest_edge * long / short)
        return (new_long, self.shortest_edge) if width <= height else (self.shortest_edge, new_long)


def orient(image: torch.Tensor, orientation: int) -> torch.Tensor:
    """Apply an EXIF orientation (2-8) to a (C, H, W) tensor, as PIL's exif_transpose does."""
    if orientation == 2:
        return image.flip(-1)
    if orientation == 3:
        return image.flip(-1, -2)
    if orientation == 4:
        return image.flip(-2)
    if orientation == 5:
        return image.transpose(-1, -2)
    if orientation == 6:
        return torch.rot90(image, -1, dims=(-2, -1))
    if orientation == 7:
        return image.flip(-1, -2).transpose(-1, -2)
    if orientation == 8:
        return torch.rot90(image, 1, dims=(-2, -1))
    return image


def _center_crop(batch: torch.Tensor, crop: tuple[int, int]) -> torch.Tensor:
    """transformers' centre crop: zero padding where the image is smaller, then floor offsets."""
    crop_h, crop_w = crop
    height, width = batch.shape[-2:]
    if crop_h > height or crop_w > width:
        pad_w, pad_h = max(crop_w - width, 0), max(crop_h - height, 0)
        batch = torch.nn.functional.pad(batch, (pad_w // 2, (pad_w + 1) // 2, pad_h // 2, (pad_h + 1) // 2))
        height, width = batch.shape[-2:]
    top, left = int((height - crop_h) / 2.0), int((width - crop_w) / 2.0)
    return batch[..., top : top + crop_h, left : left + crop_w]


def _sinc(x: float) -> float:
    if x == 0.0:
        return 1.0
    x *= math.pi
    return math.sin(x) / x


def _bicubic(x: float, a: float = -0.5) -> float:
    if x < 1.0:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    if x < 2.0:
        return (((x - 5) * x + 8) * x - 4) * a
    return 0.0


@functools.lru_cache(maxsize=256)
def resample_weights(in_size: int, out_size: int, resample: int) -> np.ndarray:
    """(out, in) matrix of Pillow's antialiased resampling weights for one axis, including
    its rounding of each weight to 22-bit fixed point, so that a matrix product computes
    what ``Image.resize`` computes."""
    matrix = np.zeros((out_size, in_size), dtype=np.float64)
    scale = in_size / out_size
    if resample == 0:  # nearest: Pillow samples at the pixel centre
        for out in range(out_size):
            matrix[out, min(int((out + 0.5) * scale), in_size - 1)] = 1.0
        return matrix
    support, kernel = _FILTERS.get(resample, _FILTERS[3])
    filter_scale = max(scale, 1.0)
    support *= filter_scale
    for out in range(out_size):
        centre = (out + 0.5) * scale
        first = max(int(centre - support + 0.5), 0)
        last = min(int(centre + support + 0.5), in_size)
        weights = np.array([kernel((x - centre + 0.5) / filter_scale) for x in range(first, last)])
        total = weights.sum()
        if total != 0:
            weights = weights / total
        fixed = np.where(weights < 0, np.ceil(weights * (1 << PRECISION_BITS) - 0.5),
                         np.floor(weights * (1 << PRECISION_BITS) + 0.5))
        matrix[out, first:last] = fixed / (1 << PRECISION_BITS)
    return matrix


@functools.lru_cache(maxsize=64)
def _axis_weights(in_size: int, out_size: int, resample: int, keep: tuple[int, int],
                  device: torch.device) -> tuple[torch.Tensor, int, int]:
    """Pillow's weights for the output pixels ``keep`` = [start, stop) of one axis, on the
    device, and the input span [lo, hi) that they read. A centre crop after the resize keeps
    only some outputs, and those read only a band of the input, so neither the rest of the
    outputs nor the rest of the input is computed or converted."""
    weights = resample_weights(in_size, out_size, resample)[keep[0] : keep[1]]
    used = np.flatnonzero(np.any(weights != 0, axis=0))
    lo, hi = (int(used[0]), int(used[-1]) + 1) if used.size else (0, in_size)
    return _shared_constant(torch.from_numpy(np.ascontiguousarray(weights[:, lo:hi])).to(device)), lo, hi


def _round8(batch: torch.Tensor) -> torch.Tensor:
    """Pillow's rounding of a resampling pass back to 8 bits."""
    return torch.floor_(batch.add_(0.5)).clamp_(0, 255)


def _crop_window(target: tuple[int, int], crop: tuple[int, int] | None) -> tuple[int, int, int, int] | None:
    """(top, left, height, width) of transformers' centre crop inside a resized image of size
    ``target``; None without a crop or when the crop is larger (then it pads: `_center_crop`)."""
    if crop is None or crop[0] > target[0] or crop[1] > target[1]:
        return None
    return int((target[0] - crop[0]) / 2.0), int((target[1] - crop[1]) / 2.0), crop[0], crop[1]


def _resize(images: list[torch.Tensor], target: tuple[int, int], resample: int,
            window: tuple[int, int, int, int] | None = None) -> torch.Tensor:
    """Same-size uint8 images resized to ``target`` as Pillow would (width pass, then height
    pass, each rounded to 8 bits), of which only ``window`` (top, left, height, width; all of
    it when None) is computed, in slices that bound the memory.

    In float64, where 8-bit pixels times 22-bit weights add up exactly, as Pillow's integer
    arithmetic does: the result does not depend on which inputs with zero weight are left out."""
    height, width = images[0].shape[-2:]
    top, left, out_h, out_w = window or (0, 0, *target)
    device = images[0].device
    cols, rows = None, None
    c0, c1, r0, r1 = left, left + out_w, top, top + out_h
    if width != target[1]:
        cols, c0, c1 = _axis_weights(width, target[1], resample, (left, left + out_w), device)
    if height != target[0]:
        rows, r0, r1 = _axis_weights(height, target[0], resample, (top, top + out_h), device)
    if cols is None and rows is None:  # already the target size: the window alone
        return torch.stack(images)[..., r0:r1, c0:c1].float()
    per_image = 3 * 8 * ((r1 - r0) * (c1 - c0) + (r1 - r0) * out_w + out_h * out_w)
    step = max(1, RESIZE_BYTES // per_image)
    parts = []
    for start in range(0, len(images), step):
        batch = torch.stack(images[start : start + step])[..., r0:r1, c0:c1].double()
        if cols is not None:
            batch = _round8(batch @ cols.T)
        if rows is not None:
            batch = _round8(rows @ batch)
        parts.append(batch.float())
    return parts[0] if len(parts) == 1 else torch.cat(parts)


@functools.lru_cache(maxsize=16)
def _normalisation(mean: tuple[float, ...], std: tuple[float, ...], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std as (1, C, 1, 1) tensors on the device, made once (each new one is a copy
    from the host that waits for the device)."""
    return (_shared_constant(torch.tensor(mean, device=device).view(1, -1, 1, 1)),
            _shared_constant(torch.tensor(std, device=device).view(1, -1, 1, 1)))


def _shared_constant(tensor: torch.Tensor) -> torch.Tensor:
    """A cached device tensor that threads read on other streams (the caller's, the preparing
    thread's): its copy from the host is finished before any other stream can see it."""
    if tensor.is_cuda:
        torch.cuda.current_stream(tensor.device).synchronize()
    return tensor


def preprocess_fast(images: Sequence[torch.Tensor], config: PreprocessConfig) -> torch.Tensor:
    """(N, 3, h, w) float32 model input from uint8 (3, H, W) tensors, on their device.

    Images of one size are resized together, with Pillow's filter weights as two matrix
    products (width, then height, each rounded to 8 bits as Pillow does), so the pixels
    equal the reference processor's Pillow resize; only the pixels the centre crop keeps are
    computed.
    """
    if not images:
        raise ValueError("no images to preprocess")
    by_size: dict[tuple[int, int], list[int]] = defaultdict(list)
    for index, image in enumerate(images):
        by_size[tuple(image.shape[-2:])].append(index)
    parts: list[torch.Tensor | None] = [None] * len(images)
    for (height, width), indices in by_size.items():
        target = config.resized_size(height, width)
        window = _crop_window(target, config.crop)
        batch = _resize([images[i] for i in indices], target, config.resample, window)
        if config.crop is not None and window is None:
            batch = _center_crop(batch, config.crop)
        if len(by_size) == 1:
            pixels = batch
            break
        for row, index in enumerate(indices):
            parts[index] = batch[row]
    else:
        pixels = torch.stack(parts)
    mean, std = _normalisation(config.mean, config.std, pixels.device)
    return (pixels * config.rescale - mean) / std


class ImageTower(Protocol):
    """What :func:`encode_images` needs of a backbone with an image tower."""

    preprocess: PreprocessConfig
    image_processor: object
    pipeline: "ImagePipeline"

    def encode_pixels(self, pixels: torch.Tensor) -> torch.Tensor: ...

    def image_bytes_per_item(self) -> int: ...

    def missing_images(self, keys: Sequence[str]) -> list[str]: ...


class ImagePipeline:
    """Decoding and preprocessing for one device, shared by every backbone on it."""

    def __init__(self, device: torch.device | str = "cpu", mode: str | None = None, cache_bytes: int | None = None,
                 threads: int | None = None):
        """``threads``: the CPU threads this pipeline may keep busy (default: every core). With
        one, nothing runs beside the caller: a worker given one CPU (a Ray actor) uses one."""
        self.device = torch.device(device)
        self.overlap = threads is None or threads > 1
        self.mode = mode or default_mode(self.device)
        if self.mode not in MODES:
            raise ValueError(f"unknown preprocessing mode {self.mode!r}; expected one of {', '.join(MODES)}")
        if cache_bytes is None:
            cache_bytes = (2 << 30) if self.device.type == "cuda" else (256 << 20)
        self.decoded = LRUCache(cache_bytes, weigh=tensor_bytes)
        self._workers = ThreadPoolExecutor(min(DECODE_WORKERS, threads or DECODE_WORKERS),
                                           thread_name_prefix="caplens-decode")
        self._readers = ThreadPoolExecutor(min(READ_WORKERS, threads or READ_WORKERS), thread_name_prefix="caplens-read")
        self._preparer = ThreadPoolExecutor(1, thread_name_prefix="caplens-prepare")

    # -- reading -------------------------------------------------------------------------
    def identify(self, images: Sequence[ImageInput | None],
                 consume: Callable[[list[tuple[str, ImageInput]]], None] | None = None,
                 ) -> tuple[list[str | None], dict[str, ImageInput]]:
        """Content keys of ``images`` (None stays None) and, per key, the encoded bytes (or
        the PIL image) to decode later: each distinct file is read and hashed once, in threads.

        ``consume`` gets the (key, source) pairs of each task of files as soon as it is read,
        in order, while the rest are still being read: the caller decodes and encodes the first
        images while later ones are on their way. With one thread (``threads=1``), or in a
        stage-timing run, every file is read first and ``consume`` gets them all at once."""
        identities = [None if image is None else _identity(image) for image in images]
        distinct: dict[tuple, ImageInput] = {}
        for identity, image in zip(identities, images):
            if identity is not None:
                distinct.setdefault(identity, image)
        sources = list(distinct.values())
        # A few dozen files per task: one task per file cost more in the pool than its read.
        step = max(1, min(READ_TASK_FILES, -(-len(sources) // READ_WORKERS)))
        chunks = [sources[start : start + step] for start in range(0, len(sources), step)]
        tasks = [self._readers.submit(_read_keyed_all, chunk) for chunk in chunks]
        streaming = self.overlap and not stages.is_serial()
        read: list[tuple[str, ImageInput]] = []
        for task in tasks:
            with stages.stage("read"):
                pairs = task.result()
            read.extend(pairs)
            if consume is not None and streaming:
                consume(pairs)
        if consume is not None and not streaming:
            consume(read)
        keyed = dict(zip(distinct, read))
        keys = [None if identity is None else keyed[identity][0] for identity in identities]
        return keys, dict(read)

    # -- decoding ------------------------------------------------------------------------
    def decode(self, keys: Sequence[str], sources: Sequence[ImageInput]) -> list:
        """Upright RGB images, one per key: uint8 (3, H, W) tensors on the device in fast
        mode, PIL images in reference mode. Each distinct key is decoded at most once."""
        kind = "tensor" if self.mode == "fast" else "pil"
        found: dict[str, object] = {}
        todo: dict[str, ImageInput] = {}
        for key, source in zip(keys, sources):
            if key in found or key in todo:
                continue
            cached = self.decoded.get((kind, key))
            if cached is None:
                todo[key] = source
            else:
                found[key] = cached
        if todo:
            with stages.stage("decode"):
                fresh = self._decode_tensors(todo) if kind == "tensor" else self._decode_pil(todo)
            for key, value in fresh.items():
                self.decoded.put((kind, key), value)
                found[key] = value
        return [found[key] for key in keys]

    def _decode_pil(self, todo: Mapping[str, ImageInput]) -> dict[str, object]:
        return dict(zip(todo, self._workers.map(load_image, todo.values())))

    def _decode_tensors(self, todo: Mapping[str, ImageInput]) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        on_gpu: dict[str, tuple[bytes, int]] = {}
        if self.device.type == "cuda":
            limits = image_limits()
            headers = {key: _nvjpeg_candidate(source, limits) for key, source in todo.items()}
            on_gpu = {key: header for key, header in headers.items() if header is not None}
            out.update(_decode_nvjpeg(on_gpu, self.device))
        rest = [key for key in todo if key not in out]
        if rest:
            arrays = self._workers.map(lambda key: _pil_tensor(todo[key]), rest)
            for key, tensor in zip(rest, arrays):
                out[key] = to_device(tensor, self.device)
        return out

    # -- preprocessing ------------------------------------------------------------------
    def pixels_for(self, tower: ImageTower, decoded: list) -> torch.Tensor:
        """Model input for ``tower`` from :meth:`decode`'s output (float32, on the device)."""
        with stages.stage("preprocess"):
            if self.mode == "fast":
                return preprocess_fast(decoded, tower.preprocess)
            pixels = tower.image_processor(images=decoded, return_tensors="pt")["pixel_values"]
            return to_device(pixels, self.device)

    def pixels(self, tower: ImageTower, keys: Sequence[str], sources: Sequence[ImageInput]) -> torch.Tensor:
        return self.pixels_for(tower, self.decode(keys, sources))

    # -- batching -------------------------------------------------------------------------
    def chunk_size(self, towers: Sequence[ImageTower]) -> int:
        """Images per pass: what free device memory holds for the largest tower, capped at
        ``$CAPLENS_IMAGE_BATCH`` (default 256 on CUDA, 32 elsewhere). Smaller passes start the
        towers sooner after the first files are read; larger ones run each forward fuller."""
        cap = int(os.environ.get("CAPLENS_IMAGE_BATCH") or (256 if self.device.type == "cuda" else 32))
        if self.device.type != "cuda":
            return cap
        decode_and_resize = 16 << 20  # a ~1 MP image as uint8 plus its float copy while resizing
        per_image = decode_and_resize + max(tower.image_bytes_per_item() for tower in towers)
        return memory_batch_size(self.device, per_image, cap=cap)

    def prepare_ahead(self, prepare: Callable, batch) -> Future:
        """Run ``prepare(batch)`` on the pipeline's preparing thread (on CUDA, on a side
        stream); the future holds (prepared tensors, the event they are ready at)."""
        return self._preparer.submit(self._prepare_on_side_stream, prepare, batch)

    def _prepare_on_side_stream(self, prepare: Callable, batch):
        if self.device.type != "cuda":
            return prepare(batch), None
        stream = named_stream(self.device, "prepare")
        with torch.cuda.stream(stream):
            prepared = prepare(batch)
            event = torch.cuda.Event()
            event.record(stream)
        return prepared, event


def _identity(image: ImageInput) -> tuple:
    """Same path, same file: read it once. Other inputs are told apart by object."""
    if isinstance(image, (str, os.PathLike)):
        return ("path", os.fspath(image))
    return ("object", id(image))


def _read_keyed_all(images: Sequence[ImageInput]) -> list[tuple[str, ImageInput]]:
    return [_read_keyed(image) for image in images]


def _read_keyed(image: ImageInput) -> tuple[str, ImageInput]:
    if isinstance(image, Image.Image):
        return image_key(image), image
    data = read_image_bytes(image)
    return bytes_key(data), data


def _nvjpeg_candidate(source: ImageInput, limits: ImageLimits) -> tuple[bytes, int] | None:
    """(bytes, EXIF orientation) of an 8-bit greyscale or colour JPEG of a kind nvJPEG decodes,
    within the size limits; None for anything nvJPEG should not get (other formats, CMYK,
    PIL inputs), which Pillow then decodes or refuses with the reason. Only a file with an
    EXIF block pays for Pillow's header parser (for its orientation)."""
    if not isinstance(source, (bytes, bytearray, memoryview, str, os.PathLike)):
        return None
    data = read_image_bytes(source)
    header = scan_jpeg_header(data)
    if header is None or header.components not in (1, 3) or not jpeg_fits_limits(header, len(data), limits):
        return None
    if not header.has_exif:
        return data, 1
    try:
        return data, exif_orientation(open_checked(data))
    except ImageDecodeError:
        return None


def _decode_nvjpeg(jpegs: Mapping[str, tuple[bytes, int]], device: torch.device) -> dict[str, torch.Tensor]:
    """Batched GPU decoding; a batch nvJPEG rejects goes back to Pillow (which says why). The
    files' bytes go to nvJPEG in one pinned buffer, so its copies to the device are queued,
    not made one by one while other threads' CUDA calls wait."""
    if not jpegs:
        return {}
    from torchvision.io import ImageReadMode, decode_jpeg

    encoded = pinned_views([data for data, _ in jpegs.values()])
    # torchvision allocates the decoded images on this thread's stream, but nvJPEG writes them
    # on its own: memory this stream freed whose kernels are still queued (the last batch's
    # resize) could be handed out and overwritten under them. Nothing is queued once it waits.
    torch.cuda.current_stream(device).synchronize()
    try:
        decoded = decode_jpeg(encoded, mode=ImageReadMode.RGB, device=device)
    except RuntimeError:
        return {}
    return {key: orient(image, orientation) for (key, (_, orientation)), image in zip(jpegs.items(), decoded)}


def _pil_tensor(source: ImageInput) -> torch.Tensor:
    image = load_image(source)
    return torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1)


class ImageEncoder:
    """Embeddings of images from every tower, computed while the files are still being read.

    :meth:`add` takes (key, source) pairs as they arrive (:meth:`ImagePipeline.identify`'s
    ``consume``); each full batch is decoded and preprocessed on the pipeline's preparing
    thread (on CUDA, a side stream) while the caller's thread runs the towers on the batch
    before it. :meth:`finish` encodes the rest and returns one (N, D) float32 tensor per tower,
    on the device, rows in the order of :attr:`keys`. Towers with equal preprocessing share
    the pixels; a tower whose forward runs out of memory continues with half the batch.
    A key is encoded once, and not at all when every tower has it cached already.
    """

    def __init__(self, towers: Sequence[ImageTower]):
        self.towers = list(towers)
        self.pipeline = self.towers[0].pipeline
        groups: dict[PreprocessConfig, list[int]] = defaultdict(list)
        for index, tower in enumerate(self.towers):
            groups[tower.preprocess].append(index)
        self._groups = dict(groups)
        self._leaders = {config: self.towers[members[0]] for config, members in groups.items()}
        self._size = self.pipeline.chunk_size(self.towers)
        self._forward_sizes = [self._size] * len(self.towers)
        self._overlap = self.pipeline.overlap and not stages.is_serial()
        self._sources: dict[str, ImageInput] = {}
        self._pending: list[str] = []
        self._in_flight: tuple[list[str], Future] | None = None
        self._rows: list[list[torch.Tensor]] = [[] for _ in self.towers]
        self.keys: list[str] = []

    def add(self, pairs: Sequence[tuple[str, ImageInput]]) -> None:
        fresh = {key: source for key, source in pairs if key not in self._sources}
        missing = set().union(*(tower.missing_images(list(fresh)) for tower in self.towers))
        for key, source in fresh.items():
            if key in missing:
                self._sources[key] = source
                self._pending.append(key)
        while len(self._pending) >= self._size:
            batch, self._pending = self._pending[: self._size], self._pending[self._size :]
            self._launch(batch)

    def finish(self) -> list[torch.Tensor]:
        if self._pending:
            batch, self._pending = self._pending, []
            if self._in_flight is None:  # nothing to overlap with: prepare it here
                self._encode(batch, self._prepare(batch))
            else:
                self._launch(batch)
        if self._in_flight is not None:
            self._encode_prepared(*self._in_flight)
            self._in_flight = None
        return [torch.cat(parts) if parts else torch.zeros(0) for parts in self._rows]

    def _launch(self, batch: list[str]) -> None:
        if not self._overlap:
            self._encode(batch, self._prepare(batch))
            return
        previous, self._in_flight = self._in_flight, (batch, self.pipeline.prepare_ahead(self._prepare, batch))
        if previous is not None:
            self._encode_prepared(*previous)

    def _prepare(self, batch: list[str]) -> dict[PreprocessConfig, torch.Tensor]:
        decoded = self.pipeline.decode(batch, [self._sources[key] for key in batch])
        return {config: self.pipeline.pixels_for(leader, decoded) for config, leader in self._leaders.items()}

    def _encode_prepared(self, batch: list[str], future: Future) -> None:
        prepared, event = future.result()
        if event is not None:
            current = torch.cuda.current_stream(self.pipeline.device)
            current.wait_event(event)
            for tensor in prepared.values():
                tensor.record_stream(current)
        self._encode(batch, prepared)

    def _encode(self, batch: list[str], prepared: dict[PreprocessConfig, torch.Tensor]) -> None:
        for config, members in self._groups.items():
            for index in members:
                with stages.stage("vision"):
                    outputs, self._forward_sizes[index] = map_halving(
                        self.towers[index].encode_pixels, prepared[config], self._forward_sizes[index]
                    )
                self._rows[index].extend(outputs)
        self.keys.extend(batch)


def encode_images(towers: Sequence[ImageTower], keys: Sequence[str], sources: Mapping[str, ImageInput]) -> list[torch.Tensor]:
    """Embeddings of ``keys`` (distinct) from every tower, in one pass over the images:
    one (len(keys), D) float32 tensor per tower, on the device."""
    if not towers or not keys:
        return [torch.zeros(0) for _ in towers]
    encoder = ImageEncoder(towers)
    encoder.add([(key, sources[key]) for key in keys])
    return encoder.finish()
