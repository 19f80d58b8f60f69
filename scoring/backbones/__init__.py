"""Backbones: the models behind the learned metrics, loaded lazily from the registry.

One factory (:func:`load_backbone`) turns a :class:`~scoring.registry.BackboneSpec` into a
loaded backbone object.  Every failure to obtain or load a checkpoint becomes
:class:`BackboneUnavailable` with a one-line reason, so only the metrics on that backbone
become unavailable.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import socket
from urllib.parse import urlparse
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from scoring.registry import BackboneSpec

# What a folder checkpoint needs from a hub repository: configs, tokenizer files and
# safetensors weights (small module folders such as 2_Dense whole).  PyTorch .bin weights are
# fetched only when a repository has no safetensors, so nothing is downloaded twice.
_HUB_FILES = ["*.json", "*.txt", "*.model", "*.safetensors", "1_Pooling/*", "2_Dense/*"]
_HUB_BIN_FALLBACK = ["*.json", "*.txt", "*.model", "*.bin", "1_Pooling/*", "2_Dense/*"]


@contextlib.contextmanager
def inference():
    """``torch.inference_mode`` with attention kept off cuDNN's SDPA backend.

    On an H100 (torch 2.11) the attention calls took about 4 ms each in a 1 x 5
    caption-edit round (cProfile, benchmarks/bench_latency.py), against microseconds for
    the linear layers. The suspected cause is cuDNN's attention, which builds an execution
    plan per new input shape while caption lengths change with every request; flash,
    memory-efficient and math kernels need no plan. (Not yet re-measured on a GPU.)
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    with torch.inference_mode(), sdpa_kernel(backends):
        yield


class BackboneUnavailable(RuntimeError):
    """A checkpoint cannot be had or loaded; the message is the user-facing reason."""


@dataclass(frozen=True)
class Placement:
    """Where and in which precision the models run."""

    device: torch.device
    dtype: torch.dtype

    @property
    def label(self) -> str:
        return f"{self.device.type}/{str(self.dtype).removeprefix('torch.')}"


def select_placement(device: str | None = None) -> Placement:
    """CUDA, then MPS, then CPU. The dtype is the default; on CUDA each backbone then runs in
    its own measured precision (:func:`placement_for`); elsewhere in fp32."""
    if device is None:
        if torch.cuda.is_available():
            device = "cuda"
        elif getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            device = "mps"
        else:
            device = "cpu"
    try:
        resolved = torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"unknown device {device!r}: {exc}") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available here")
    if resolved.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError(f"device {device!r} requested but MPS is not available here")
    if resolved.type == "cuda":
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    else:
        dtype = torch.float32
    return Placement(resolved, dtype)


TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# Precision of each backbone kind on CUDA, chosen from measured score deltas against fp32
# (docs/scoring.md, "Precision"): fp16 keeps the 10 mantissa bits that bf16 gives up, and
# these towers' activations stay far inside fp16's range. CPUs always run fp32.
CUDA_PRECISION = {"clip": "fp16", "openai-clip": "fp16", "longclip": "fp16", "st-text": "fp16", "blip-itm": "fp16"}


def placement_for(spec: BackboneSpec, placement: Placement) -> Placement:
    """The placement one backbone runs with: the registry's ``precision`` when set, else
    the measured default of its kind on CUDA; CPU and MPS keep the placement's dtype."""
    if placement.device.type != "cuda":
        return placement
    precision = spec.precision or CUDA_PRECISION[spec.kind]
    if precision == "bf16" and not torch.cuda.is_bf16_supported():
        precision = "fp16"
    return Placement(placement.device, TORCH_DTYPES[precision])


def fetch(spec: BackboneSpec) -> Path:
    """Local path of the checkpoint: the configured path, or a hub download (cached), with
    every file the registry pins by SHA-256 (``sha256``) verified (:func:`verify_checkpoint`)."""
    return verify_checkpoint(spec, _fetch(spec))


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_checkpoint(spec: BackboneSpec, local: Path) -> Path:
    """``local`` when every file pinned in the backbone's ``sha256`` table (file name relative
    to the checkpoint folder; for a single-file checkpoint, its own name) has that SHA-256;
    BackboneUnavailable naming the file and both digests otherwise, so a checkpoint that changed
    upstream, in the cache or on disk never scores under the pinned checkpoint's cache keys."""
    for name, expected in (spec.extra.get("sha256") or {}).items():
        if local.is_file():
            file = local if name == local.name else None
        else:
            file = local / name
        if file is None or not file.is_file():
            raise BackboneUnavailable(
                f"checkpoint {spec.source}: the registry pins the SHA-256 of {name}, which the checkpoint does not have")
        actual = file_sha256(file)
        if actual != expected.lower():
            raise BackboneUnavailable(
                f"checkpoint {spec.source}: {name} has SHA-256 {actual}, the registry pins {expected.lower()}: it is "
                f"not the pinned checkpoint (changed upstream, in the cache or on disk); delete {file} to fetch it "
                "again, or pin the new file in the registry")
    return local


PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


@functools.cache
def hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether the hub's host accepts a connection (asked once per process). Offline, a hub
    download otherwise spends about 23 s in huggingface_hub's retries before it fails, in
    every command; unreachable, checkpoints come from the local cache only. Behind a proxy the
    proxy decides, so the answer is yes; HF_HUB_OFFLINE=1 means no."""
    import huggingface_hub.constants as hub

    if hub.HF_HUB_OFFLINE:
        return False
    if any(os.environ.get(name) for name in PROXY_VARIABLES):
        return True
    endpoint = urlparse(hub.ENDPOINT)
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        socket.create_connection((endpoint.hostname, port), timeout=timeout_s).close()
    except OSError:
        return False
    return True


def _fetch(spec: BackboneSpec) -> Path:
    if spec.path is not None:
        if not spec.path.exists():
            hint = spec.extra.get("missing_hint")
            raise BackboneUnavailable(f"checkpoint not found: {spec.path}" + (f" ({hint})" if hint else ""))
        return spec.path
    local_only = not hub_reachable()  # the cached copy, or at once "not in the local cache"
    try:
        import huggingface_hub

        if spec.file:
            return Path(huggingface_hub.hf_hub_download(spec.hub, spec.file, revision=spec.revision,
                                                        local_files_only=local_only))
        folder = Path(huggingface_hub.snapshot_download(spec.hub, revision=spec.revision, allow_patterns=_HUB_FILES,
                                                        local_files_only=local_only))
        if not any(folder.glob("*.safetensors")):
            folder = Path(huggingface_hub.snapshot_download(spec.hub, revision=spec.revision,
                                                            allow_patterns=_HUB_BIN_FALLBACK, local_files_only=local_only))
        return folder
    except Exception as exc:  # offline, unknown repo, gated, network error: all mean "cannot have it"
        if local_only:
            raise BackboneUnavailable(f"cannot fetch {spec.source}: the hub is not reachable (offline) and there is "
                                      "no cached copy") from exc
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BackboneUnavailable(f"cannot fetch {spec.source} from the hub: {detail[:200]}") from exc


def fingerprint(spec: BackboneSpec, local: Path) -> str:
    """Identifies the weights for cache keys: source plus size/mtime of local files."""
    digest = hashlib.sha1(f"{spec.kind}|{spec.source}|{spec.max_tokens}".encode())
    files = [local] if local.is_file() else sorted(p for p in local.rglob("*") if p.is_file())
    for path in files:
        stat = path.stat()
        digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def quiet_progress_bars():
    """transformers' "Loading weights" and "Writing model shards" bars off inside the block, then
    as they were before it: a block inside another (a training run that loads a backbone) leaves
    them off until the outer one ends, and a user who turned them off keeps them off."""
    from transformers.utils import logging as hf_logging

    were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if were_on:
            hf_logging.enable_progress_bar()


def load_backbone(
    spec: BackboneSpec, placement: Placement, resolve_reference: Callable[[str], Path], pipeline=None
):
    """Load one backbone; ``resolve_reference("clip")`` fetches another backbone's folder
    (state-dict checkpoints borrow the tokenizer and image processor of a CLIP folder).
    Backbones with an image tower decode and preprocess through ``pipeline``
    (a :class:`scoring.pixels.ImagePipeline` shared by the Scorer's backbones)."""
    from scoring.backbones.clip import ClipBackbone
    from scoring.backbones.itm import ItmBackbone
    from scoring.backbones.st_text import MultilingualTextEncoder
    from scoring.metrics.caplens_r import CaplensRHead

    local = fetch(spec)
    loaders = {
        "clip": ClipBackbone.from_folder,
        "openai-clip": ClipBackbone.from_state_dict,
        "longclip": ClipBackbone.from_state_dict,
        "st-text": MultilingualTextEncoder.from_folder,
        "blip-itm": ItmBackbone.from_folder,
        "caplens-r": CaplensRHead.from_folder,
    }
    try:
        with quiet_progress_bars():  # no "Loading weights" bars in the CLI or logs
            backbone = loaders[spec.kind](spec, local, placement_for(spec, placement), resolve_reference)
    except BackboneUnavailable:
        raise
    except Exception as exc:  # corrupt weights, wrong layout, missing tokenizer files …
        detail = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise BackboneUnavailable(f"cannot load {spec.source} as {spec.kind}: {detail}") from exc
    if pipeline is not None and hasattr(backbone, "pipeline"):
        backbone.pipeline = pipeline
    return backbone
