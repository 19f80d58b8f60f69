"""Batch sizes that follow free device memory, and batches that halve on out-of-memory."""
from __future__ import annotations

from typing import Callable, Sequence

import torch

# Fraction of the free device memory one batch may plan to use; the rest is headroom for
# the allocator, other models and the next batch being prepared.
MEMORY_SHARE = 0.25


def memory_batch_size(device: torch.device, bytes_per_item: int, cap: int, floor: int = 1) -> int:
    """Largest batch whose estimated working set fits a share of the free memory (CUDA);
    ``cap`` elsewhere, where bigger batches buy little."""
    if device.type != "cuda":
        return cap
    free, _ = torch.cuda.mem_get_info(device)
    fits = int(free * MEMORY_SHARE) // max(bytes_per_item, 1)
    return max(floor, min(cap, fits))


def is_out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()
    )


def map_halving(fn: Callable[[Sequence], object], items: Sequence, batch_size: int) -> tuple[list, int]:
    """Apply ``fn`` to consecutive batches of ``items``; a batch that runs out of memory is
    retried at half the size (down to 1) and the rest continues at that size.

    Returns the outputs, one per batch actually run, and the batch size that worked.
    """
    outputs, start, size = [], 0, max(1, batch_size)
    while start < len(items):
        chunk = items[start : start + size]
        try:
            outputs.append(fn(chunk))
        except (torch.OutOfMemoryError, RuntimeError) as exc:
            if not is_out_of_memory(exc) or size == 1:
                raise
            size = max(1, len(chunk) // 2)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            continue
        start += len(chunk)
    return outputs, size
