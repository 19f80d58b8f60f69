"""Small batches through captured CUDA graphs: a live edit's few captions at launch-free speed.

A 1 x 5 request runs each tower on a handful of inputs, where the GPU finishes every kernel
long before Python launches the next: on an H100 the nine metrics' towers spent tens of
milliseconds launching a few hundred small kernels each (docs/scoring.md). A captured graph
replays a whole forward with one launch. Graphs need fixed shapes, so small batches are
padded to a bucket (1, 2, 4, 8 or 16 rows; texts to a multiple of 8 tokens) with rows and
tokens that cannot change the real rows' outputs (each tower says how), and one graph is
captured per bucket the first time it is met. Larger batches run eagerly: their kernels are
big enough that launching is not the cost.

A forward that cannot be captured (an operation that waits for the GPU, say) runs eagerly
from then on, and the reason is logged once. ``CAPLENS_CUDA_GRAPHS=0`` turns graphs off.
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Callable

import torch

LOG = logging.getLogger(__name__)
BATCH_BUCKETS = (1, 2, 4, 8, 16)
LENGTH_STEP = 8
# Tests set this to pad small batches on the CPU exactly as on CUDA, where padding is checked
# against the unpadded outputs (tests/scoring/test_graphs.py).
PAD_ON_CPU = False
_CAPTURING = threading.Lock()  # one capture at a time in the process; eager work may run beside it


def graphs_wanted(device: torch.device) -> bool:
    return device.type == "cuda" and os.environ.get("CAPLENS_CUDA_GRAPHS", "1") != "0"


def pads(device: torch.device) -> bool:
    """Whether small batches are padded to bucket shapes on this device."""
    return graphs_wanted(device) or PAD_ON_CPU


def batch_bucket(rows: int) -> int | None:
    """The padded row count of a small batch; None for a batch too large to graph."""
    return next((bucket for bucket in BATCH_BUCKETS if rows <= bucket), None)


def length_bucket(length: int, limit: int) -> int:
    """Tokens a text batch is padded to: the next multiple of LENGTH_STEP, at most ``limit``."""
    return min(-(-length // LENGTH_STEP) * LENGTH_STEP, limit)


def pad_rows(tensor: torch.Tensor, rows: int, value: float = 0) -> torch.Tensor:
    """``tensor`` with rows of ``value`` appended up to ``rows``."""
    missing = rows - tensor.shape[0]
    if missing <= 0:
        return tensor
    filler = torch.full((missing, *tensor.shape[1:]), value, dtype=tensor.dtype, device=tensor.device)
    return torch.cat([tensor, filler])


def pad_columns(tensor: torch.Tensor, columns: int, value: float = 0) -> torch.Tensor:
    """A (rows, length) tensor padded on the right with ``value`` up to ``columns``."""
    missing = columns - tensor.shape[1]
    if missing <= 0:
        return tensor
    return torch.nn.functional.pad(tensor, (0, missing), value=value)


class GraphedForward:
    """``forward(*tensors) -> tensor`` on CUDA through one captured graph per input shape.

    The caller pads inputs to bucket shapes; every shape seen is captured once (two eager
    warm-up runs on a side stream, then the capture), and later calls copy their inputs
    into the graph's buffers and replay it. Each instance keeps its own memory pool, so two
    towers replaying on two threads never share buffers; a lock keeps one instance's buffers
    to one call at a time. The output is cloned out of the graph's buffer.
    """

    def __init__(self, forward: Callable[..., torch.Tensor], device: torch.device, name: str):
        self.forward = forward
        self.device = torch.device(device)
        self.name = name
        self.enabled = graphs_wanted(self.device)
        self.failure: str | None = None
        self._graphs: dict[tuple, tuple] = {}
        self._pool = None
        self._lock = threading.Lock()

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        if not self.enabled or self.failure is not None or batch_bucket(inputs[0].shape[0]) != inputs[0].shape[0]:
            return self.forward(*inputs)
        key = tuple((tuple(t.shape), t.dtype) for t in inputs)
        with self._lock:
            entry = self._graphs.get(key) or self._capture(key, inputs)
            if entry is None:
                return self.forward(*inputs)
            graph, static_inputs, static_output = entry
            for static, tensor in zip(static_inputs, inputs):
                static.copy_(tensor)
            graph.replay()
            return static_output.clone()

    @property
    def captured(self) -> int:
        return len(self._graphs)

    def _capture(self, key: tuple, inputs: tuple[torch.Tensor, ...]):
        try:
            static_inputs = [t.to(self.device).clone() for t in inputs]
            current = torch.cuda.current_stream(self.device)
            warm = torch.cuda.Stream(self.device)
            warm.wait_stream(current)
            with torch.cuda.stream(warm):
                for _ in range(2):
                    self.forward(*static_inputs)
            current.wait_stream(warm)
            if self._pool is None:
                self._pool = torch.cuda.graph_pool_handle()
            graph = torch.cuda.CUDAGraph()
            with _CAPTURING, torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
                static_output = self.forward(*static_inputs)
        except Exception as exc:  # anything capture refuses: run eagerly, as before graphs
            self.failure = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            LOG.warning("%s: CUDA graph capture failed, running eagerly: %s", self.name, self.failure)
            return None
        self._graphs[key] = (graph, static_inputs, static_output)
        return self._graphs[key]
