"""GPU work on Hugging Face ZeroGPU Spaces.

On ZeroGPU a GPU is attached only while a function decorated with `spaces.GPU` runs. The
`spaces` package exists only there, so elsewhere the decorator is the identity and the
scorer picks CUDA, MPS or CPU by itself.
"""
from __future__ import annotations

from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)


def gpu(fn: F, duration: int = 60) -> F:
    """Run `fn` under `spaces.GPU` when the `spaces` package is importable, else unchanged."""
    try:
        import spaces  # type: ignore[import-not-found]
    except ImportError:
        return fn
    return spaces.GPU(duration=duration)(fn)
