"""CLIP-S throughput from JPEG files on disk: CapLens vs torchmetrics' CLIPScore vs a plain loop.

All three run in the same process on the same ViT-B/32-sized CLIP with random weights (the
`bench` profile's CLIP, built locally by scoring.bench: 12-layer 768-wide ViT-B/32 at
224 px, 12-layer 512-wide text tower, 512-d projection), in the precision CapLens picks for
it, over the same pairs: P captions over I distinct JPEG files (640x480, written once, read
from disk by every method). Model loading is excluded for all three (each has run one
warm-up forward). CapLens runs the workload once untimed, as a serving process has run
earlier requests, and captures the CUDA graphs of the shapes it met; every timed repeat then
starts with every cache emptied (embeddings, decoded images, token ids), so each image is read,
hashed, decoded and encoded and each caption tokenised and encoded again. The `fresh-scorer`
variant times a new Scorer instead. Every run's scores are checked against the plain loop's
(the `max |diff|` column): on the H100 a reused Scorer gave some pairs 0.04-0.11 off with
full-batch CUDA graphs, which only this check showed.

* caplens      - scoring.api.Scorer: files read and hashed once in threads, decoded once
                 (nvJPEG batches on CUDA, Pillow threads on CPU), preprocessed once (fast
                 mode on CUDA, reference on CPU), one image-tower pass, texts in large
                 batches, decoding of the next batch overlapping the current forward.
* torchmetrics - torchmetrics.multimodal.CLIPScore updated in batches of 64 pairs, each
                 image opened with Pillow and passed as a uint8 tensor, as its docs show.
* plain loop   - batches of 64 pairs: Pillow decode, the checkpoint's image processor,
                 image and text towers, w*max(cos, 0) (the reference CLIPScore script).

    python benchmarks/bench_clipscore.py --sizes 256:64,4096:1024 [--repeats 3]

Prints, per size: pairs/s and distinct images/s (wall clock, best of the repeats), GPU
utilisation sampled every 20 ms while each method runs (pynvml, else nvidia-smi), peak GPU
memory, CapLens' ratios to the other two, and CapLens' time per stage (read, decode,
preprocess, vision, text, similarity, the rest) from one extra run with a device sync at
every stage boundary (which serialises the pipeline, so it is slower than the timed runs).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scoring import pixels, stages  # noqa: E402
from scoring.api import ScoreItem, Scorer, freeze_long_lived_objects  # noqa: E402
from scoring.tiny import WORDS  # noqa: E402

PREFIX = "A photo depicts "
BATCH = 64
W = 2.5


def write_jpegs(folder: Path, count: int, size=(640, 480)) -> list[Path]:
    """Photo-like JPEGs (smooth gradients, soft shapes, a little noise), quality 90."""
    from PIL import Image, ImageDraw, ImageFilter

    folder.mkdir(parents=True, exist_ok=True)

    def one(index: int) -> Path:
        rng = np.random.RandomState(index)
        y, x = np.mgrid[0 : size[1], 0 : size[0]].astype(np.float32)
        base = np.stack([
            128 + 100 * np.sin(x / rng.uniform(40, 200) + rng.uniform(0, 6)) * np.cos(y / rng.uniform(40, 200)),
            128 + 100 * np.cos((x + y) / rng.uniform(60, 300)),
            128 + 100 * np.sin(y / rng.uniform(30, 150) + rng.uniform(0, 6)),
        ], axis=-1)
        base += rng.normal(0, 6, base.shape)
        image = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8))
        draw = ImageDraw.Draw(image)
        for _ in range(6):
            x0, y0 = rng.randint(0, size[0] - 60), rng.randint(0, size[1] - 60)
            colour = tuple(int(c) for c in rng.randint(0, 255, 3))
            draw.ellipse((x0, y0, x0 + rng.randint(30, 200), y0 + rng.randint(30, 200)), fill=colour)
        path = folder / f"image-{index:05d}.jpg"
        image.filter(ImageFilter.GaussianBlur(1)).save(path, "JPEG", quality=90)
        return path

    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        return list(pool.map(one, range(count)))


def make_pairs(paths: list[Path], n_pairs: int):
    rng = np.random.RandomState(0)
    captions = [" ".join(rng.choice(WORDS, size=rng.randint(6, 16))) for _ in range(n_pairs)]
    return [paths[i % len(paths)] for i in range(n_pairs)], captions


class GpuSampler:
    """GPU utilisation sampled in the background every 20 ms while a method runs."""

    def __init__(self, device_index: int = 0):
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(device_index,), daemon=True)

    def _run(self, device_index: int):
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
            read = lambda: float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)  # noqa: E731
        except Exception:  # no pynvml: nvidia-smi, slower to sample
            def read():
                out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=5).stdout
                return float(out.split()[0])
        while not self._stop.is_set():
            try:
                self.samples.append(read())
            except Exception:
                return
            self._stop.wait(0.02)

    def __enter__(self):
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    @property
    def mean(self) -> float | None:
        return statistics.mean(self.samples) if self.samples else None


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def profile_toml(folder: Path, workdir: Path) -> Path:
    profile = workdir / "bench-clip.toml"
    profile.write_text(
        f'[profile]\nname = "bench-clip"\n\n'
        f'[backbones.clip]\nkind = "clip"\nlabel = "random ViT-B/32"\npath = "{folder}"\n\n'
        f'[metrics."CLIP-S"]\nfamily = "clip-s"\nbackbone = "clip"\nw = {W}\nprefix = "{PREFIX}"\n'
    )
    return profile


def _warmup_image(workdir: Path) -> Path:
    from PIL import Image

    path = workdir / "warm-up.jpg"
    Image.new("RGB", (320, 240), (127, 64, 32)).save(path, "JPEG")
    return path


def fresh_scorer(profile: Path, device: str, warmup: Path) -> Scorer:
    """A Scorer with its model loaded and run once (on a pair outside the benchmark), and the
    CUDA graphs of that warm-up's small batches captured, which the next request would
    otherwise do first: a one-off per process, like loading, and not part of throughput."""
    from scoring.backbones.graphs import capture_pending

    scorer = Scorer(profile, device=device)
    scorer.score([ScoreItem(warmup, "warm up")], ["CLIP-S"])
    if torch.cuda.is_available():
        capture_pending()
    return scorer


def prepared_scorer(profile: Path, device: str, warmup: Path, paths, captions) -> Scorer:
    """A Scorer that has scored this workload once, untimed, and captured the graphs of its
    shapes between requests, as a serving process would have (``cold`` empties its caches)."""
    from scoring.backbones.graphs import capture_pending

    scorer = fresh_scorer(profile, device, warmup)
    run_caplens(scorer, paths, captions)
    if torch.cuda.is_available():
        capture_pending()
    freeze_long_lived_objects()  # as `caplens score` and the app do once their models are loaded
    return scorer


def cold(scorer: Scorer) -> Scorer:
    """``scorer`` with nothing cached: embeddings, decoded images and token ids."""
    from scoring.backbones.text import TOKEN_CACHE

    scorer.clear_caches()
    scorer.images.decoded.clear()
    TOKEN_CACHE.clear()
    return scorer


def run_caplens(scorer: Scorer, paths, captions):
    items = [ScoreItem(path, caption) for path, caption in zip(paths, captions)]
    _sync()
    start = time.perf_counter()
    values = scorer.score(items, ["CLIP-S"])["CLIP-S"].values
    _sync()
    return time.perf_counter() - start, np.array(values)


class TensorFeatures(torch.nn.Module):
    """transformers 5 CLIPModel returning tensors from get_*_features, as torchmetrics 1.9 expects."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config = model, model.config

    def get_image_features(self, pixel_values):
        return self.model.get_image_features(pixel_values=pixel_values.to(self.model.dtype)).pooler_output

    def get_text_features(self, input_ids, attention_mask=None):
        return self.model.get_text_features(input_ids=input_ids, attention_mask=attention_mask).pooler_output


def _open(path) -> "Image.Image":
    from PIL import Image

    with Image.open(path) as image:
        return image.convert("RGB")


def run_torchmetrics(metric, paths, captions, device: str):
    metric.reset()
    _sync()
    start = time.perf_counter()
    with torch.no_grad():
        for i in range(0, len(captions), BATCH):
            batch = [torch.from_numpy(np.array(_open(p))).permute(2, 0, 1).to(device) for p in paths[i : i + BATCH]]
            metric.update(batch, [PREFIX + c for c in captions[i : i + BATCH]])
        metric.compute()
    _sync()
    return time.perf_counter() - start, float(metric.score / metric.n_samples)  # mean 100*cos before its final clip


def run_plain_loop(model, processor, paths, captions, device: str):
    dtype = next(model.parameters()).dtype
    _sync()
    start = time.perf_counter()
    image_rows, text_rows = [], []
    with torch.no_grad():
        for i in range(0, len(captions), BATCH):
            images = [_open(p) for p in paths[i : i + BATCH]]
            pixels = processor.image_processor(images=images, return_tensors="pt")["pixel_values"].to(device, dtype)
            image_rows.append(model.get_image_features(pixel_values=pixels).pooler_output.float())
            tokens = processor.tokenizer([PREFIX + c for c in captions[i : i + BATCH]], padding=True, truncation=True,
                                         max_length=77, return_tensors="pt").to(device)
            text_rows.append(model.get_text_features(**tokens).pooler_output.float())
    v = torch.nn.functional.normalize(torch.cat(image_rows), dim=-1)
    t = torch.nn.functional.normalize(torch.cat(text_rows), dim=-1)
    cosines = (v * t).sum(-1)
    values = (W * torch.clamp(cosines, min=0)).cpu().numpy()
    _sync()
    return time.perf_counter() - start, (values, cosines.cpu().numpy())


@contextlib.contextmanager
def _environment(name: str, value: str):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name) if old is None else os.environ.__setitem__(name, old)


@contextlib.contextmanager
def _switch_interval(seconds: float):
    """The GIL's switch interval (Python's default 5 ms): how long a thread running Python keeps
    the GIL from one that waits, such as a thread between two kernel launches."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


@contextlib.contextmanager
def _patched(owner, name: str, replacement):
    old = getattr(owner, name)
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        setattr(owner, name, old)


def _read_first():
    """Every file read and hashed before the first is decoded (the pipeline before streaming)."""
    from scoring.pixels import ImagePipeline

    identify = ImagePipeline.identify

    def read_all_then_consume(self, images, consume=None):
        keys, sources = identify(self, images)
        if consume is not None:
            consume(list(sources.items()))
        return keys, sources

    return _patched(ImagePipeline, "identify", read_all_then_consume)


def _text_on_default_stream():
    """The text towers queue on the default stream, behind the image towers' work."""
    return _patched(Scorer, "_text_stream", lambda self: torch.cuda.default_stream(self.placement.device))


@contextlib.contextmanager
def full_collections():
    """The oldest generation's garbage collections during the block: [count, seconds]."""
    import gc

    seen, started = [0, 0.0], []

    def note(phase, info):
        if info.get("generation") == 2:
            if phase == "start":
                started.append(time.perf_counter())
            elif started:
                seen[0] += 1
                seen[1] += time.perf_counter() - started.pop()

    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)


@contextlib.contextmanager
def _gc_unfrozen():
    """What the loaded models left alive is walked by every full collection again."""
    import gc

    gc.unfreeze()
    try:
        yield
    finally:
        gc.freeze()


# Ways to change CapLens for one measurement each, to see what each part of the pipeline buys.
VARIANTS = {
    "batch-128": lambda: _environment("CAPLENS_IMAGE_BATCH", "128"),
    "batch-512": lambda: _environment("CAPLENS_IMAGE_BATCH", "512"),
    "switch-0.5ms": lambda: _switch_interval(0.0005),
    "read-first": _read_first,
    "text-on-default-stream": _text_on_default_stream,
    "fresh-scorer": contextlib.nullcontext,
    "read-threads-4": lambda: _patched(pixels, "READ_WORKERS", 4),
    "gc-unfrozen": _gc_unfrozen,
}


def trace_run(run, path: Path) -> str:
    """One unsynced CapLens run under torch.profiler, stages annotated: how busy the GPU was
    and which stage launched its work, in 10 ms slices. The trace is kept (gzip) at ``path``."""
    import gzip

    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    config = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)  # the text thread too
    with profile(activities=activities, experimental_config=config) as prof, stages.recording(annotate=True):
        with record_function("caplens-run"):
            seconds, _ = run()
    raw = Path(tempfile.mkdtemp()) / "trace.json"
    prof.export_chrome_trace(str(raw))
    trace = json.loads(raw.read_text())
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as out:
        json.dump(trace, out)
    return summarise_trace(trace["traceEvents"], seconds) + f"\ntrace: {path}"


def summarise_trace(events: list[dict], seconds: float) -> str:
    """GPU busy share of the run, GPU time per launching stage and per stream, the kernels
    that took longest, and a 10 ms timeline of GPU busy share and the stages on each thread."""
    from collections import defaultdict

    run = next(e for e in events if e.get("name") == "caplens-run" and "dur" in e)
    start, end = run["ts"], run["ts"] + run["dur"]
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e
              and start <= e["ts"] <= end]
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    ranges: dict[object, list] = defaultdict(list)
    for e in events:
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("stage:") and "dur" in e:
            ranges[e["tid"]].append((e["ts"], e["ts"] + e["dur"], e["name"][6:]))

    def stage_at(tid, ts) -> str:
        inside = [r for r in ranges.get(tid, ()) if r[0] <= ts <= r[1]]
        return max(inside)[2] if inside else "other"

    per_stage, per_stream, per_kernel = defaultdict(float), defaultdict(float), defaultdict(lambda: [0.0, 0])
    intervals = []
    for e in device:
        launch = launches.get(e.get("args", {}).get("correlation"))
        name = stage_at(launch["tid"], launch["ts"]) if launch else "other"
        per_stage[name] += e["dur"]
        per_stream[e.get("args", {}).get("stream", "?")] += e["dur"]
        kernel = per_kernel[str(e["name"])[:70]]
        kernel[0] += e["dur"]
        kernel[1] += 1
        intervals.append((e["ts"], e["ts"] + e["dur"]))
    busy, merged = 0.0, []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    busy = sum(b - a for a, b in merged)
    span = end - start
    lines = [f"traced run: {seconds * 1000:.1f} ms wall ({span / 1000:.1f} ms traced); GPU busy {busy / 1000:.1f} ms "
             f"({100 * busy / span:.0f}%), device work {sum(per_stage.values()) / 1000:.1f} ms in {len(device)} ops",
             "GPU time by launching stage: " + ", ".join(f"{k} {v / 1000:.1f} ms" for k, v in
                                                      sorted(per_stage.items(), key=lambda kv: -kv[1])),
             "GPU time by stream: " + ", ".join(f"{k}: {v / 1000:.1f} ms" for k, v in per_stream.items()),
             "longest kernels (total ms, count):"]
    for name, (total, count) in sorted(per_kernel.items(), key=lambda kv: -kv[1][0])[:12]:
        lines.append(f"  {total / 1000:7.2f} {count:5d}  {name}")
    lines.append("timeline, 10 ms slices: GPU busy %, then the stages running on each thread")
    slice_us = 10_000
    for lo in range(int(start), int(end), slice_us):
        hi = lo + slice_us
        share = sum(max(0, min(b, hi) - max(a, lo)) for a, b in merged) / slice_us
        running = []
        for tid, spans in ranges.items():
            names = sorted({n for a, b, n in spans if a < hi and b > lo})
            if names:
                running.append(f"{tid}:{'+'.join(names)}")
        lines.append(f"  {(lo - start) / 1000:6.0f} ms {100 * share:4.0f}%  {'  '.join(running)}")
    return "\n".join(lines)


def measure(name, runner, repeats: int) -> dict:
    runs, outputs = [], []
    for _ in range(repeats):
        with GpuSampler() as sampler, full_collections() as collections:
            seconds, output = runner()
        outputs.append(output)
        peak = torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None
        runs.append({"seconds": seconds, "util": sampler.mean, "peak_mib": peak, "samples": len(sampler.samples),
                     "full_gc": collections[0], "full_gc_s": collections[1]})
    best = min(runs, key=lambda r: r["seconds"])
    return {"name": name, **best, "all_seconds": [r["seconds"] for r in runs], "output": output, "outputs": outputs}


def bench_size(args, folder, profile, workdir, model, processor, metric, device, n_pairs, n_images) -> dict:
    paths = write_jpegs(workdir / f"jpegs-{n_images}", n_images)
    paths, captions = make_pairs(paths, n_pairs)
    warmup = _warmup_image(workdir)
    # One untimed run of the whole workload first: the process's first batches of these shapes
    # pay one-off costs (cuBLAS heuristics, allocator and pinned-memory pools) that a serving
    # process pays once; without it the first method timed carries them.
    scorer = prepared_scorer(profile, device, warmup, paths, captions)
    baseline_repeats = args.repeats if args.baseline_repeats is None else args.baseline_repeats
    results = {"caplens": measure("caplens", lambda: run_caplens(cold(scorer), paths, captions), args.repeats)}
    if baseline_repeats:
        results["torchmetrics"] = measure("torchmetrics", lambda: run_torchmetrics(metric, paths, captions, device),
                                          baseline_repeats)
        results["plain loop"] = measure("plain loop", lambda: run_plain_loop(model, processor, paths, captions, device),
                                        baseline_repeats)
    for variant in args.variants:
        with VARIANTS[variant]():
            if variant == "fresh-scorer":
                scorers = iter([fresh_scorer(profile, device, warmup) for _ in range(args.repeats)])
                runner = lambda: run_caplens(cold(next(scorers)), paths, captions)  # noqa: E731
            else:
                changed = prepared_scorer(profile, device, warmup, paths, captions)
                runner = lambda: run_caplens(cold(changed), paths, captions)  # noqa: E731
            results[variant] = measure(variant, runner, args.repeats)
            scorers = changed = None
    with stages.recording(sync=True) as times:
        seconds, _ = run_caplens(cold(scorer), paths, captions)
    times = dict(times)
    times["rest"] = max(0.0, seconds - sum(times.values()))
    print(f"\n== {n_pairs} pairs over {n_images} JPEG images (640x480), best of {args.repeats} "
          f"(baselines: {baseline_repeats}) ==")
    agreement = None
    if baseline_repeats:
        results["plain loop"]["output"], results["plain loop"]["cosines"] = results["plain loop"]["output"]
        plain = results["plain loop"]["output"]
        for result in results.values():  # every CapLens run, variants too, against the plain loop
            if result["name"] not in ("torchmetrics", "plain loop"):
                result["max_abs_diff"] = max(float(np.max(np.abs(run - plain))) for run in result["outputs"])
        agreement = results["caplens"]["max_abs_diff"]
        mean_plain, mean_tm = float(np.mean(results["plain loop"]["cosines"])) * 100, results["torchmetrics"]["output"]
        print(f"check: max |caplens - plain loop| per pair over every run {agreement:.4f} (preprocessing mode "
              f"{scorer.images.mode}); mean 100*cos: plain loop {mean_plain:.3f}, torchmetrics {mean_tm:.3f}")
    header = (f"{'method':24s} {'pairs/s':>9s} {'images/s':>9s} {'seconds':>8s} {'GPU util':>9s} {'peak MiB':>9s} "
              f"{'full GCs':>12s} {'max |diff|':>10s}")
    print(header)
    for result in results.values():
        util = "-" if result["util"] is None else f"{result['util']:.0f}% ({result['samples']})"
        peak = "-" if result["peak_mib"] is None else f"{result['peak_mib']:.0f}"
        collections = f"{result['full_gc']} ({1000 * result['full_gc_s']:.0f} ms)"
        result["pairs_per_s"] = n_pairs / result["seconds"]
        result["images_per_s"] = n_images / result["seconds"]
        diff = f"{result['max_abs_diff']:.4f}" if "max_abs_diff" in result else "-"
        print(f"{result['name']:24s} {result['pairs_per_s']:9.1f} {result['images_per_s']:9.1f} "
              f"{result['seconds']:8.3f} {util:>9s} {peak:>9s} {collections:>12s} {diff:>10s}")
    for other in ("torchmetrics", "plain loop") if baseline_repeats else ():
        print(f"caplens / {other}: {results['caplens']['pairs_per_s'] / results[other]['pairs_per_s']:.2f}x")
    total = sum(times.values())
    print(f"caplens stages (synced run, {seconds:.3f} s): " + ", ".join(
        f"{k} {1000 * v:.1f} ms ({100 * v / total:.0f}%)" for k, v in times.items()))
    if args.cprofile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(run_caplens, cold(scorer), paths, captions)
        print("caplens under cProfile (main thread; unsynced), by own time:")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.cprofile)
    if args.trace:
        cold(scorer)
        trace_path = Path(args.trace).with_suffix(f".{n_pairs}-{n_images}.json.gz")
        print(trace_run(lambda: run_caplens(scorer, paths, captions), trace_path))
    return {
        "pairs": n_pairs, "images": n_images, "stages_s": times, "agreement": agreement,
        **{k: {f: v for f, v in r.items() if f not in ("output", "outputs", "cosines")} for k, r in results.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="256:64", help="comma list of PAIRS:IMAGES (e.g. 256:64,4096:1024)")
    parser.add_argument("--repeats", type=int, default=3, help="CapLens runs per size (each with its caches emptied)")
    parser.add_argument("--device", default=None, help="default: cuda, then mps, then cpu")
    parser.add_argument("--json", default=None, help="also write the numbers to this file")
    parser.add_argument("--cprofile", type=int, default=0, help="print this many top functions of one profiled CapLens run")
    parser.add_argument("--baseline-repeats", type=int, default=None,
                        help="torchmetrics and plain-loop runs (default: --repeats; 0 leaves them out)")
    parser.add_argument("--variants", type=lambda v: [x for x in v.split(",") if x], default=[],
                        help=f"also time CapLens changed in one way each (comma list of: {', '.join(VARIANTS)})")
    parser.add_argument("--trace", default=None, help="also profile one CapLens run per size with torch.profiler: "
                        "print its GPU timeline and keep the trace at PATH.<pairs>-<images>.json.gz")
    args = parser.parse_args()

    from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel, CLIPProcessor
    from transformers.utils import logging as hf_logging
    from torchmetrics.multimodal.clip_score import CLIPScore

    from scoring.backbones import placement_for, select_placement
    from scoring.bench import clip_config
    from scoring.registry import load_registry
    from scoring.tiny import build_clip_folder

    hf_logging.disable_progress_bar()
    workdir = Path(tempfile.mkdtemp(prefix="bench-clipscore-"))
    try:
        folder = build_clip_folder(workdir / "clip-b32", 0, clip_config(), dtype=torch.float16)
        profile = profile_toml(folder, workdir)
        placement = placement_for(load_registry(profile).backbones["clip"], select_placement(args.device))
        device = str(placement.device)
        model = CLIPModel.from_pretrained(folder).to(device=device, dtype=placement.dtype).eval()
        processor = CLIPProcessor(image_processor=AutoImageProcessor.from_pretrained(folder),
                                  tokenizer=AutoTokenizer.from_pretrained(folder))
        metric = CLIPScore(model_name_or_path=lambda: (TensorFeatures(model), processor)).to(device)
        warm = _warmup_image(workdir)
        run_torchmetrics(metric, [warm], ["warm up"], device)
        run_plain_loop(model, processor, [warm], ["warm up"], device)
        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
        print(f"device {placement.label} ({gpu}), torch {torch.__version__}, CPU threads {torch.get_num_threads()}, "
              f"baselines' image processor: {type(processor.image_processor).__name__}")
        report = []
        for size in args.sizes.split(","):
            n_pairs, n_images = (int(v) for v in size.split(":"))
            report.append(bench_size(args, folder, profile, workdir, model, processor, metric, device, n_pairs, n_images))
        if args.json:
            Path(args.json).write_text(json.dumps({"device": placement.label, "gpu": gpu, "sizes": report}, indent=2))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
