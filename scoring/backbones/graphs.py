"""Small batches through captured CUDA graphs: a live edit's few captions at launch-free speed.

A 1 x 5 request runs each tower on a handful of inputs, where the GPU finishes every kernel
long before Python launches the next: on an H100 the nine metrics' towers spent tens of
milliseconds launching a few hundred small kernels each (docs/scoring.md). A captured graph
replays a whole forward with one launch. Graphs need fixed shapes, so small batches are
padded to a bucket (1, 2, 4, 8 or 16 rows; texts to a multiple of 8 tokens) with rows and
tokens that cannot change the real rows' outputs (each tower says how). A bucket met for the
first time runs eagerly; before the next request one graph per new bucket is captured, with
the device to itself (:class:`SharedExclusive`). Larger batches run eagerly: their kernels are
big enough that launching is not the cost.

A forward that cannot be captured (an operation that waits for the GPU, say) runs eagerly
from then on, and the reason is logged once. ``CAPLENS_CUDA_GRAPHS=0`` turns graphs off.
"""
from __future__ import annotations

import logging
import os
import threading
from contextlib import contextmanager, nullcontext
from typing import Callable

import torch

LOG = logging.getLogger(__name__)
BATCH_BUCKETS = (1, 2, 4, 8, 16)
LENGTH_STEP = 8
# Tests set this to pad small batches on the CPU exactly as on CUDA, where padding is checked
# against the unpadded outputs (tests/scoring/test_graphs.py).
PAD_ON_CPU = False


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


def padded_batch(device: torch.device, tensor: torch.Tensor, value: float = 0) -> torch.Tensor:
    """A small batch padded with rows of ``value`` to its bucket where small batches are
    padded (:func:`pads`); any other batch as it is."""
    bucket = batch_bucket(tensor.shape[0])
    return pad_rows(tensor, bucket, value) if bucket is not None and pads(device) else tensor


def pad_columns(tensor: torch.Tensor, columns: int, value: float = 0) -> torch.Tensor:
    """A (rows, length) tensor padded on the right with ``value`` up to ``columns``."""
    missing = columns - tensor.shape[1]
    if missing <= 0:
        return tensor
    return torch.nn.functional.pad(tensor, (0, missing), value=value)


class SharedExclusive:
    """A lock held shared by any number of threads doing device work, or exclusively by one
    capturing graphs. A capture must see no other work on the device: on an H100 a capture
    beside another thread's kernels failed ("operation would make the legacy stream depend on a
    capturing blocking stream") and broke that thread's next matrix product. A thread may nest
    its shared holds; a waiting capture holds new shared ones back, for at most its timeout."""

    def __init__(self):
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0
        self._held = threading.local()

    @contextmanager
    def shared(self):
        depth = getattr(self._held, "depth", 0)
        if not depth:
            with self._cond:
                while self._writer or self._writers_waiting:
                    self._cond.wait()
                self._readers += 1
        self._held.depth = depth + 1
        try:
            yield
        finally:
            self._held.depth = depth
            if not depth:
                with self._cond:
                    self._readers -= 1
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self, timeout: float):
        """Held alone, or not at all once ``timeout`` seconds pass (yields whether it is held)."""
        if getattr(self._held, "depth", 0):  # a shared holder cannot wait for itself
            yield False
            return
        with self._cond:
            self._writers_waiting += 1
            held = self._cond.wait_for(lambda: not (self._writer or self._readers), timeout)
            self._writers_waiting -= 1
            if held:
                self._writer = True
            self._cond.notify_all()
        try:
            yield held
        finally:
            if held:
                with self._cond:
                    self._writer = False
                    self._cond.notify_all()


# Every use of the towers on CUDA (scoring, training steps) holds this shared; graphs are
# captured while it is held exclusively, between requests (capture_pending).
DEVICE_WORK = SharedExclusive()
CAPTURE_WAIT_S = 0.0  # captures never hold a request back: with work in flight they wait for a quiet moment
_pending: set["GraphedForward"] = set()
_pending_lock = threading.Lock()


def device_work(device: torch.device):
    """DEVICE_WORK held shared on CUDA; nothing elsewhere."""
    return DEVICE_WORK.shared() if torch.device(device).type == "cuda" else nullcontext()


def capture_pending() -> int:
    """Capture every graph shape met since the last call, alone on the device: when no work is
    in flight (else at a later call). Returns how many were captured."""
    with _pending_lock:
        if not _pending:
            return 0
    with DEVICE_WORK.exclusive(CAPTURE_WAIT_S) as held:
        if not held:
            return 0
        with _pending_lock:
            waiting = list(_pending)
            _pending.clear()
        return sum(forward.capture_wanted() for forward in waiting)


class GraphedForward:
    """``forward(*tensors) -> tensor`` on CUDA through one captured graph per input shape.

    The caller pads inputs to bucket shapes. A shape met for the first time runs eagerly and
    is remembered; :func:`capture_pending`, called before the next request starts, captures it
    (two eager warm-up runs on a side stream, then the capture) while nothing else uses the
    device. Later calls copy their inputs into the graph's buffers and replay it; the output is
    cloned out of the graph's buffer. Each instance keeps its own memory pool, so two towers
    replaying on two threads never share buffers; a lock keeps one instance's buffers to one
    call at a time.
    """

    MAX_GRAPHS = 64

    def __init__(self, forward: Callable[..., torch.Tensor], device: torch.device, name: str):
        self.forward = forward
        self.device = torch.device(device)
        self.name = name
        self.enabled = graphs_wanted(self.device)
        self.failure: str | None = None
        self._graphs: dict[tuple, tuple] = {}
        self._wanted: dict[tuple, list[torch.Tensor]] = {}
        self._pool = None
        self._lock = threading.Lock()

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        if not self.enabled or self.failure is not None or batch_bucket(inputs[0].shape[0]) != inputs[0].shape[0]:
            return self.forward(*inputs)
        key = tuple((tuple(t.shape), t.dtype) for t in inputs)
        with self._lock:
            entry = self._graphs.get(key)
            if entry is None:
                if len(self._graphs) + len(self._wanted) < self.MAX_GRAPHS:
                    self._wanted.setdefault(key, [t.detach().clone() for t in inputs])
                    with _pending_lock:
                        _pending.add(self)
                return self.forward(*inputs)
            graph, static_inputs, static_output = entry
            for static, tensor in zip(static_inputs, inputs):
                static.copy_(tensor)
            graph.replay()
            return static_output.clone()

    @property
    def captured(self) -> int:
        return len(self._graphs)

    def capture_wanted(self) -> int:
        """Capture the shapes met so far (the caller holds DEVICE_WORK exclusively)."""
        with self._lock:
            wanted, self._wanted = self._wanted, {}
            for key, inputs in wanted.items():
                if self.failure is not None:
                    break
                entry = self._capture(inputs)
                if entry is not None:
                    self._graphs[key] = entry
            return len(wanted) if self.failure is None else 0

    def _capture(self, inputs: list[torch.Tensor]):
        try:
            from scoring.backbones import inference

            with inference():
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
                with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
                    static_output = self.forward(*static_inputs)
        except Exception as exc:  # anything capture refuses: run eagerly, as before graphs
            self.failure = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            LOG.warning("%s: CUDA graph capture failed, running eagerly: %s", self.name, self.failure)
            return None
        return graph, static_inputs, static_output
