"""Where reading and decoding JPEGs spends its time, stage by stage, against the ways it could.

On N photo-like 640x480 JPEGs (the CLIP-S throughput benchmark's files):
  read       - ImagePipeline.identify: every file read and SHA-256 hashed (threads);
  header     - the marker scan that routes a file to nvJPEG, against Pillow's header parser;
  nvJPEG     - torchvision's batched GPU decode of the bytes, in batches of several sizes;
  Pillow     - the CPU decode path (the decoding policy, then a uint8 tensor) in threads;
  hybrid     - nvJPEG and Pillow threads decoding two shares of the files at the same time;
  pipeline   - ImagePipeline.decode as the Scorer calls it (fast mode), decoded cache empty.
Each row is the best of --repeats, in images/s. Without CUDA the GPU rows are skipped.

    python benchmarks/bench_decode.py --images 1024
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import threading
import warnings
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from bench_clipscore import write_jpegs  # noqa: E402


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def best_rate(label: str, count: int, run, repeats: int, rows: list) -> float:
    times = []
    for _ in range(repeats):
        _sync()
        start = time.perf_counter()
        run()
        _sync()
        times.append(time.perf_counter() - start)
    best = min(times)
    rows.append((label, count / best, best * 1000))
    return count / best


@contextlib.contextmanager
def busy_device(device: torch.device, pinned: bool):
    """A thread that keeps running matrix products and copying results to the host (pageable
    or pinned) until the block ends."""
    stop = threading.Event()

    def work():
        a = torch.randn(2048, 2048, device=device, dtype=torch.float16)
        staging = torch.empty(2048, 2048, dtype=torch.float16, pin_memory=True) if pinned else None
        stream = torch.cuda.Stream(device)
        with torch.cuda.stream(stream):
            while not stop.is_set():
                b = a @ a
                if staging is None:
                    b.cpu()
                else:
                    staging.copy_(b, non_blocking=True)
                    stream.synchronize()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from scoring.images import bytes_key, open_checked, scan_jpeg_header
    from scoring import pixels
    from scoring.pixels import DECODE_WORKERS, ImagePipeline, _pil_tensor
    from scoring.transfer import pinned_views

    folder = Path(tempfile.mkdtemp(prefix="bench-decode-"))
    paths = write_jpegs(folder, args.images)
    count = len(paths)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    pipeline = ImagePipeline(device, "fast")
    rows: list[tuple[str, float, float]] = []
    workers = ThreadPoolExecutor(DECODE_WORKERS)
    warnings.filterwarnings("ignore", "The given buffer is not writable")

    default_readers = pixels.READ_WORKERS
    for threads in (1, 2, 4, 8, 16):
        if threads <= (os.cpu_count() or 1):
            pixels.READ_WORKERS = threads  # what $CAPLENS_READ_THREADS sets
            reader = ImagePipeline(device, "fast")
            best_rate(f"read + SHA-256 ({threads} threads{', the default' if threads == default_readers else ''})",
                      count, lambda r=reader: r.identify(paths), args.repeats, rows)
    pixels.READ_WORKERS = default_readers
    best_rate(f"read only ({DECODE_WORKERS} threads)", count, lambda: list(workers.map(Path.read_bytes, paths)),
              args.repeats, rows)
    keys, sources = pipeline.identify(paths)
    data = [sources[key] for key in keys]
    best_rate(f"SHA-256 only ({DECODE_WORKERS} threads)", count, lambda: list(workers.map(bytes_key, data)),
              args.repeats, rows)
    print(f"{count} JPEGs, {sum(map(len, data)) / count / 1024:.1f} KB each on average; {os.cpu_count()} CPUs; "
          f"device {torch.cuda.get_device_name() if cuda else 'cpu'}")
    best_rate("header: marker scan", count, lambda: [scan_jpeg_header(d) for d in data], args.repeats, rows)
    best_rate("header: Pillow parser", count, lambda: [open_checked(d) for d in data], args.repeats, rows)
    best_rate(f"Pillow decode ({DECODE_WORKERS} threads)", count, lambda: list(workers.map(_pil_tensor, data)),
              args.repeats, rows)

    if cuda:
        from torchvision.io import ImageReadMode, decode_jpeg

        encoded = [torch.frombuffer(d, dtype=torch.uint8) for d in data]

        def nvjpeg(items, batch):
            out = []
            for start in range(0, len(items), batch):
                out.extend(decode_jpeg(items[start : start + batch], mode=ImageReadMode.RGB, device=device))
            return out

        best_rate("nvJPEG, bytes ready (one thread)", count, lambda: nvjpeg(encoded, count), args.repeats, rows)
        for batch in (32, 128, 256):
            best_rate(f"nvJPEG in batches of {batch}", count, lambda b=batch: nvjpeg(encoded, b), args.repeats, rows)
        pinned = pinned_views(data)
        best_rate("nvJPEG in batches of 256, bytes in pinned memory", count, lambda: nvjpeg(pinned, 256), args.repeats, rows)
        best_rate("bytes into one pinned buffer", count, lambda: pinned_views(data), args.repeats, rows)
        # Another thread busy with kernels and device-to-host copies, as the text towers are while
        # images decode: pageable copies hold other threads' CUDA calls, pinned ones should not.
        for label, source in (("pageable", encoded), ("pinned", pinned)):
            with busy_device(device, pinned=label == "pinned"):
                best_rate(f"nvJPEG batches of 256 ({label} bytes) beside a thread copying to the host", count,
                          lambda source=source: nvjpeg(source, 256), args.repeats, rows)
        best_rate("bytes to tensors (bytearray copies, as before)", count,
                  lambda: [torch.frombuffer(bytearray(d), dtype=torch.uint8) for d in data], args.repeats, rows)

        def two_threads_nvjpeg():
            half = count // 2
            with ThreadPoolExecutor(2) as pair:
                list(pair.map(lambda part: nvjpeg(part, 256), [encoded[:half], encoded[half:]]))

        best_rate("nvJPEG, two threads of batches of 256", count, two_threads_nvjpeg, args.repeats, rows)
        for share in (0.2,):
            cpu_part = int(count * share)

            def hybrid(cpu_part=cpu_part):
                done = []
                thread = threading.Thread(target=lambda: done.extend(
                    t.to(device, non_blocking=True) for t in workers.map(_pil_tensor, data[:cpu_part])))
                thread.start()
                nvjpeg(encoded[cpu_part:], 256)
                thread.join()

            best_rate(f"hybrid: {share:.0%} by Pillow threads, the rest nvJPEG", count, hybrid, args.repeats, rows)

    def pipeline_decode():
        pipeline.decoded.clear()
        pipeline.decode(keys, data)

    best_rate(f"ImagePipeline.decode (fast mode, {device.type})", count, pipeline_decode, args.repeats, rows)
    print(f"{'stage':55s} {'images/s':>10s} {'ms':>8s}")
    for label, rate, ms in rows:
        print(f"{label:55s} {rate:10.0f} {ms:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
