"""Where each scoring thread's time goes, from a py-spy recording (benchmarks/gpu_suite.sh, step
`threads`: `py-spy record --idle --threads --native --format raw`).

Keeps the samples taken while CapLens was scoring (a frame of scoring/ on the stack; on the
main thread inside Scorer.score, model loading and graph capture left out) and sorts each by
what its innermost recognisable frame was doing: waiting for the GIL, in a CUDA copy or
synchronisation, launching CUDA work, in nvJPEG, in the tokenizer, reading or hashing files,
waiting for another thread, or running Python and other CPU work. Prints, per thread, the
samples and the share of each.

    python benchmarks/threads_profile.py gpu-suite-out/threads.txt [--rate 200]
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict

# (category, pattern), tried in order from the innermost frame outwards.
CATEGORIES = [
    # CPython waits for the GIL on a condition variable (take_gil is static, so often unnamed);
    # its own locks and queues wait on semaphores (PyThread_acquire_lock_timed).
    ("GIL wait", re.compile(r"take_gil|PyEval_RestoreThread|PyEval_AcquireThread|PyGILState_Ensure|gil_scoped_acquire"
                            r"|pthread_cond_timedwait")),
    ("CUDA copy or sync", re.compile(r"(cu|cuda)(Memcpy|StreamSynchronize|EventSynchronize|DeviceSynchronize|MemcpyAsync|CtxSynchronize)")),
    ("nvJPEG", re.compile(r"nvjpeg|decode_jpegs_cuda", re.I)),
    ("CUDA launch or driver", re.compile(r"libcuda|cudaLaunch|cuLaunch|libcudart|cudaMalloc|cudaFree|cudaEvent|cudaStream")),
    ("tokenizer", re.compile(r"tokenizers|Tokenizer\.|_batch_encode|token_ids")),
    ("reading or hashing files", re.compile(r"read_bytes|read_image_bytes|_hashlib|sha256|bytes_key")),
    ("waiting for another thread", re.compile(r"PyThread_acquire_lock_timed|Future\.result|Condition\.wait|Event\.wait"
                                              r"|_queue_SimpleQueue_get|sem_clockwait|sem_timedwait")),
]
IGNORED = re.compile(r"load_backbone|capture_pending|fresh_scorer|from_pretrained")


def category(frames: list[str]) -> str:
    for frame in reversed(frames):
        for name, pattern in CATEGORIES:
            if pattern.search(frame):
                return name
    return "Python and other CPU"


def summarise(lines, rate: float) -> str:
    by_thread: dict[str, Counter] = defaultdict(Counter)
    leaves: dict[str, Counter] = defaultdict(Counter)
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not count.isdigit():
            continue
        frames = stack.split(";")
        thread = frames[0].split(":", 1)[-1].strip()
        if not any("(scoring/" in f for f in frames) or any(IGNORED.search(f) for f in frames):
            continue
        if not thread.startswith("caplens-") and not any(f.startswith("Scorer.score (") for f in frames):
            continue  # the caller's thread: only while it scores
        by_thread[thread][category(frames)] += int(count)
        leaves[thread][" < ".join(f.split(" (")[0] for f in frames[-3:][::-1])] += int(count)
    lines_out = []
    for thread, counts in sorted(by_thread.items(), key=lambda kv: -sum(kv[1].values())):
        total = sum(counts.values())
        lines_out.append(f"{thread}: {total} samples ({1000 * total / rate:.0f} ms at {rate:g} Hz)")
        lines_out.append("    " + ", ".join(f"{name} {100 * n / total:.0f}%" for name, n in counts.most_common()))
        for leaf, n in leaves[thread].most_common(5):
            lines_out.append(f"      {100 * n / total:4.0f}%  {leaf[:150]}")
    return "\n".join(lines_out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path")
    parser.add_argument("--rate", type=float, default=200, help="py-spy's sampling rate (--rate)")
    args = parser.parse_args()
    with open(args.path) as lines:
        print(summarise(lines, args.rate))
    return 0


if __name__ == "__main__":
    sys.exit(main())
