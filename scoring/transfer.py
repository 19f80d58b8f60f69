"""Copies between the host and a CUDA device through pinned (page-locked) host memory.

A copy between the device and ordinary (pageable) host memory is synchronous, and while it
runs other threads' CUDA calls wait: on the H100 a 15 ms copy of text embeddings back to the
host held the image thread's next kernel launch for the same 15 ms (a torch.profiler trace of
`benchmarks/bench_clipscore.py --trace`). Through pinned memory a copy is queued on the
current stream like a kernel, and only the thread that needs its result waits, for that
stream alone. Elsewhere (CPU, MPS) these are plain copies.

Work that runs beside the default stream (text towers, image preparation) goes on a named
stream per device, shared by every Scorer in the process: a stream's first use costs a cuBLAS
workspace and allocator pools of its own, which a new Scorer would otherwise pay again.
"""
from __future__ import annotations

import functools

import numpy as np
import torch


@functools.lru_cache(maxsize=None)
def named_stream(device: torch.device, purpose: str) -> "torch.cuda.Stream":
    """The process's CUDA stream for ``purpose`` ("text", "prepare") on ``device``."""
    return torch.cuda.Stream(device)


def to_device(tensor: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """``tensor`` on ``device``; from the host to CUDA through a pinned staging copy."""
    device = torch.device(device)
    if device.type != "cuda" or tensor.is_cuda:
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


def to_host(tensor: torch.Tensor) -> np.ndarray:
    """A host numpy copy of ``tensor``; from CUDA, waiting for the current stream only."""
    tensor = tensor.detach()
    if not tensor.is_cuda:
        return tensor.cpu().numpy()
    staging = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    staging.copy_(tensor, non_blocking=True)
    torch.cuda.current_stream(tensor.device).synchronize()
    return staging.numpy().copy()  # the pinned block goes back to its cache, not into ours


def pinned_views(chunks: list) -> list[torch.Tensor]:
    """Byte strings as 1-D uint8 views of one pinned host buffer (one copy of the bytes), so
    a library that copies each to the device (nvJPEG) does it asynchronously."""
    sizes = [len(chunk) for chunk in chunks]
    staging = torch.empty(sum(sizes), dtype=torch.uint8, pin_memory=True)
    np.concatenate([np.frombuffer(chunk, dtype=np.uint8) for chunk in chunks], out=staging.numpy())
    ends = np.cumsum(sizes).tolist()
    return [staging[end - size : end] for size, end in zip(sizes, ends)]
