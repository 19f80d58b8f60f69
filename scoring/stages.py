"""Where scoring time goes: per-stage wall time, recorded only while a benchmark asks for it.

    with stages.recording(sync=True) as times:
        scorer.score(items)
    times  # {"read": s, "decode": s, "preprocess": s, "vision": s, "text": s, "similarity": s}

With ``sync`` each stage waits for the GPU before its clock stops, so device work is charged
to the stage that queued it (this serialises the pipeline: time throughput separately). With
``annotate`` each stage is also a ``torch.profiler`` range named ``stage:<name>``, so a
profiler trace of an unsynced run says which stage launched each GPU kernel.
Outside ``recording`` a stage costs one global lookup.
"""
from __future__ import annotations

import contextlib
import threading
import time

import torch

STAGES = ("read", "decode", "preprocess", "vision", "text", "similarity")

_state = threading.local()
_active: dict | None = None
_sync = False
_annotate = False
_lock = threading.Lock()


@contextlib.contextmanager
def recording(sync: bool = False, annotate: bool = False):
    """Collect stage times for the block; yields the dict that fills in."""
    global _active, _sync, _annotate
    times: dict[str, float] = {name: 0.0 for name in STAGES}
    _active, _sync, _annotate = times, sync, annotate
    try:
        yield times
    finally:
        _active, _sync, _annotate = None, False, False


def _synchronize() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


@contextlib.contextmanager
def stage(name: str):
    """Charge the block's wall time to ``name``; an inner stage pauses the outer one, so
    time is charged to the innermost stage running (per thread)."""
    times = _active
    if times is None:
        yield
        return
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    if _sync:
        _synchronize()
    now = time.perf_counter()
    if stack:
        outer, since = stack[-1]
        _charge(times, outer, now - since)
    stack.append((name, now))
    label = torch.profiler.record_function(f"stage:{name}") if _annotate else contextlib.nullcontext()
    try:
        with label:
            yield
    finally:
        if _sync:
            _synchronize()
        now = time.perf_counter()
        _, since = stack.pop()
        _charge(times, name, now - since)
        if stack:
            stack[-1] = (stack[-1][0], now)


def _charge(times: dict, name: str, seconds: float) -> None:
    with _lock:
        times[name] = times.get(name, 0.0) + seconds

def is_serial() -> bool:
    """True while recording with sync: pipelines then run one stage at a time, so the stage
    times add up to the wall time."""
    return _active is not None and _sync
