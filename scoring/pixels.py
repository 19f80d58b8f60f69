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
import warnings
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Protocol, Sequence

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


def _resize_axis(batch: torch.Tensor, size: int, resample: int, axis: int) -> torch.Tensor:
    """One Pillow resampling pass along ``axis`` (-1 width, -2 height), rounded to 8 bits.

    In float64, where 8-bit pixels times 22-bit weights add up exactly, as Pillow's integer
    arithmetic does."""
    if batch.shape[axis] == size:
        return batch
    weights = torch.from_numpy(resample_weights(batch.shape[axis], size, resample)).to(batch.device)
    out = batch @ weights.T if axis == -1 else weights @ batch
    return torch.floor_(out.add_(0.5)).clamp_(0, 255)


def _resize(images: list[torch.Tensor], target: tuple[int, int], resample: int) -> torch.Tensor:
    """Same-size uint8 images resized as Pillow would, in slices that bound the memory."""
    height, width = images[0].shape[-2:]
    if (height, width) == tuple(target):
        return torch.stack(images).float()
    per_image = 3 * 8 * (height * width + height * target[1] + target[0] * target[1])
    step = max(1, RESIZE_BYTES // per_image)
    parts = []
    for start in range(0, len(images), step):
        batch = torch.stack(images[start : start + step]).double()
        batch = _resize_axis(_resize_axis(batch, target[1], resample, -1), target[0], resample, -2)
        parts.append(batch.float())
    return torch.cat(parts)


def preprocess_fast(images: Sequence[torch.Tensor], config: PreprocessConfig) -> torch.Tensor:
    """(N, 3, h, w) float32 model input from uint8 (3, H, W) tensors, on their device.

    Images of one size are resized together, with Pillow's filter weights as two matrix
    products (width, then height, each rounded to 8 bits as Pillow does), so the pixels
    equal the reference processor's Pillow resize.
    """
    if not images:
        raise ValueError("no images to preprocess")
    by_size: dict[tuple[int, int], list[int]] = defaultdict(list)
    for index, image in enumerate(images):
        by_size[tuple(image.shape[-2:])].append(index)
    parts: list[torch.Tensor | None] = [None] * len(images)
    for (height, width), indices in by_size.items():
        batch = _resize([images[i] for i in indices], config.resized_size(height, width), config.resample)
        if config.crop is not None:
            batch = _center_crop(batch, config.crop)
        for row, index in enumerate(indices):
            parts[index] = batch[row]
    pixels = torch.stack(parts)
    device = pixels.device
    mean = torch.tensor(config.mean, device=device).view(1, -1, 1, 1)
    std = torch.tensor(config.std, device=device).view(1, -1, 1, 1)
    return (pixels * config.rescale - mean) / std


class ImageTower(Protocol):
    """What :func:`encode_images` needs of a backbone with an image tower."""

    preprocess: PreprocessConfig
    image_processor: object
    pipeline: "ImagePipeline"

    def encode_pixels(self, pixels: torch.Tensor) -> torch.Tensor: ...

    def image_bytes_per_item(self) -> int: ...


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
        self._side_stream = None

    # -- reading -------------------------------------------------------------------------
    def identify(self, images: Sequence[ImageInput | None]) -> tuple[list[str | None], dict[str, ImageInput]]:
        """Content keys of ``images`` (None stays None) and, per key, the encoded bytes (or
        the PIL image) to decode later: each distinct file is read and hashed once, in threads."""
        identities = [None if image is None else _identity(image) for image in images]
        distinct: dict[tuple, ImageInput] = {}
        for identity, image in zip(identities, images):
            if identity is not None:
                distinct.setdefault(identity, image)
        sources = list(distinct.values())
        # A few dozen files per task: one task per file cost more in the pool than its read.
        step = max(1, min(READ_TASK_FILES, -(-len(sources) // READ_WORKERS)))
        chunks = [sources[start : start + step] for start in range(0, len(sources), step)]
        with stages.stage("read"):
            read = [pair for chunk in self._readers.map(_read_keyed_all, chunks) for pair in chunk]
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
                out[key] = tensor.to(self.device, non_blocking=True)
        return out

    # -- preprocessing ------------------------------------------------------------------
    def pixels_for(self, tower: ImageTower, decoded: list) -> torch.Tensor:
        """Model input for ``tower`` from :meth:`decode`'s output (float32, on the device)."""
        with stages.stage("preprocess"):
            if self.mode == "fast":
                return preprocess_fast(decoded, tower.preprocess)
            pixels = tower.image_processor(images=decoded, return_tensors="pt")["pixel_values"]
            return pixels.to(self.device, non_blocking=True)

    def pixels(self, tower: ImageTower, keys: Sequence[str], sources: Sequence[ImageInput]) -> torch.Tensor:
        return self.pixels_for(tower, self.decode(keys, sources))

    # -- batching -------------------------------------------------------------------------
    def chunk_size(self, towers: Sequence[ImageTower]) -> int:
        """Images per pass: what free device memory holds for the largest tower, capped."""
        if self.device.type != "cuda":
            return 32
        decode_and_resize = 16 << 20  # a ~1 MP image as uint8 plus its float copy while resizing
        per_image = decode_and_resize + max(tower.image_bytes_per_item() for tower in towers)
        return memory_batch_size(self.device, per_image, cap=256)

    def ahead(self, batches: Sequence, prepare: Callable) -> Iterator[tuple[object, object]]:
        """(batch, prepare(batch)) in order, preparing the next batch on a worker thread
        (and, on CUDA, a side stream) while the caller works on the current one."""
        if stages.is_serial() or not self.overlap or len(batches) < 2:
            for batch in batches:
                yield batch, prepare(batch)
            return
        with ThreadPoolExecutor(1, thread_name_prefix="caplens-prepare") as worker:
            future = worker.submit(self._prepare_on_side_stream, prepare, batches[0])
            for index, batch in enumerate(batches):
                prepared, event = future.result()
                if index + 1 < len(batches):
                    future = worker.submit(self._prepare_on_side_stream, prepare, batches[index + 1])
                if event is not None:
                    current = torch.cuda.current_stream(self.device)
                    current.wait_event(event)
                    for tensor in prepared.values():
                        tensor.record_stream(current)
                yield batch, prepared

    def _prepare_on_side_stream(self, prepare: Callable, batch):
        if self.device.type != "cuda":
            return prepare(batch), None
        if self._side_stream is None:
            self._side_stream = torch.cuda.Stream(self.device)
        with torch.cuda.stream(self._side_stream):
            prepared = prepare(batch)
            event = torch.cuda.Event()
            event.record(self._side_stream)
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
    """Batched GPU decoding; a batch nvJPEG rejects goes back to Pillow (which says why)."""
    if not jpegs:
        return {}
    from torchvision.io import ImageReadMode, decode_jpeg

    with warnings.catch_warnings():  # the bytes are only read: no writable copy of each file
        warnings.filterwarnings("ignore", "The given buffer is not writable")
        encoded = [torch.frombuffer(data, dtype=torch.uint8) for data, _ in jpegs.values()]
    try:
        decoded = decode_jpeg(encoded, mode=ImageReadMode.RGB, device=device)
    except RuntimeError:
        return {}
    return {key: orient(image, orientation) for (key, (_, orientation)), image in zip(jpegs.items(), decoded)}


def _pil_tensor(source: ImageInput) -> torch.Tensor:
    image = load_image(source)
    return torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1)


def encode_images(towers: Sequence[ImageTower], keys: Sequence[str], sources: Mapping[str, ImageInput]) -> list[torch.Tensor]:
    """Embeddings of ``keys`` (distinct) from every tower, in one pass over the images.

    Returns one (len(keys), D) float32 tensor per tower, on the device. Towers with equal
    preprocessing share the pixels; a tower whose forward runs out of memory continues with
    half the batch.
    """
    if not towers or not keys:
        return [torch.zeros(0) for _ in towers]
    pipeline = towers[0].pipeline
    groups: dict[PreprocessConfig, list[int]] = defaultdict(list)
    for index, tower in enumerate(towers):
        groups[tower.preprocess].append(index)
    leaders = {config: towers[members[0]] for config, members in groups.items()}
    size = pipeline.chunk_size(towers)
    batches = [list(keys[start : start + size]) for start in range(0, len(keys), size)]
    forward_sizes = [size] * len(towers)

    def prepare(batch: list[str]) -> dict[PreprocessConfig, torch.Tensor]:
        decoded = pipeline.decode(batch, [sources[key] for key in batch])
        return {config: pipeline.pixels_for(leader, decoded) for config, leader in leaders.items()}

    rows: list[list[torch.Tensor]] = [[] for _ in towers]
    for _, prepared in pipeline.ahead(batches, prepare):
        for config, members in groups.items():
            for index in members:
                with stages.stage("vision"):
                    outputs, forward_sizes[index] = map_halving(
                        towers[index].encode_pixels, prepared[config], forward_sizes[index]
                    )
                rows[index].extend(outputs)
    return [torch.cat(parts) for parts in rows]
