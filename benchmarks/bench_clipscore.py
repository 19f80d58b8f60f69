"""CLIP-S throughput: CapLens vs torchmetrics' CLIPScore vs a plain per-batch loop.

All three run in the same process on the same randomly initialised ViT-B/32-sized CLIP
(transformers' default CLIPConfig: 12-layer 768-wide ViT-B/32 at 224 px, 12-layer 512-wide
text tower, 512-d projection) and the same 256 image-caption pairs over 64 images (four
captions per image), from PIL images in memory to per-pair scores.  Model loading is
excluded for all three (with one warm-up forward, since safetensors weights are read from
disk on first use); CapLens starts with empty embedding caches.

* caplens      — scoring.api.Scorer on a registry profile pointing at the saved folder:
                 content-hashed image cache (each of the 64 images encoded once), batched
                 text encoding, torch.inference_mode.
* torchmetrics — torchmetrics.multimodal.CLIPScore, updated batch by batch (64 pairs), with
                 a thin adapter for transformers 5's feature return types.
* plain loop   — the reference CLIPScore script's approach: encode every pair's image and
                 caption in batches of 64 under torch.no_grad, then w·max(cos, 0).

    python benchmarks/bench_clipscore.py [--pairs 256] [--images 64] [--repeats 1]

Prints pairs/s (wall clock) and pairs per CPU-second (process CPU time, steadier when other
jobs share the cores) for each, and CapLens' ratios; on CUDA also the GPU utilisation
sampled during each run (needs nvidia-smi).
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scoring.api import ScoreItem, Scorer  # noqa: E402
from scoring.tiny import WORDS, build_clip_tokenizer  # noqa: E402

PREFIX = "A photo depicts "
BATCH = 64


def build_model_folder(folder: Path) -> Path:
    """Random ViT-B/32-sized CLIPModel folder with a locally built tokenizer."""
    from transformers import CLIPConfig, CLIPModel
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    torch.manual_seed(0)
    tokenizer = build_clip_tokenizer()
    config = CLIPConfig(
        text_config=dict(eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id,
                         pad_token_id=tokenizer.eos_token_id),
    )  # defaults: ViT-B/32, vocab 49408 (the tiny tokenizer's ids are a subset)
    CLIPModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    CLIPImageProcessorPil(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224}).save_pretrained(folder)
    return folder


def make_pairs(n_pairs: int, n_images: int):
    from PIL import Image

    rng = np.random.RandomState(0)
    images = [Image.fromarray((rng.rand(256, 320, 3) * 255).astype("uint8")) for _ in range(n_images)]
    captions = [" ".join(rng.choice(WORDS, size=rng.randint(6, 16))) for _ in range(n_pairs)]
    return [images[i % n_images] for i in range(n_pairs)], captions


class GpuSampler:
    """Samples nvidia-smi GPU utilisation in the background (CUDA runs only)."""

    def __init__(self):
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=5).stdout
                self.samples.append(float(out.split()[0]))
            except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
                return
            self._stop.wait(0.1)

    def __enter__(self):
        if torch.cuda.is_available() and shutil.which("nvidia-smi"):
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()

    @property
    def mean(self) -> float | None:
        return statistics.mean(self.samples) if self.samples else None


def run_caplens(folder: Path, profile_dir: Path, images, captions, device: str):
    profile = profile_dir / "bench.toml"
    profile.write_text(
        f'[backbones.clip]\nkind = "clip"\nlabel = "random ViT-B/32"\npath = "{folder}"\n\n'
        f'[metrics."CLIP-S"]\nfamily = "clip-s"\nbackbone = "clip"\nw = 2.5\nprefix = "{PREFIX}"\n'
    )
    scorer = Scorer(profile, device=device)
    # Load outside the timed region, including one forward pass: safetensors weights are
    # memory-mapped and read from disk on first use.  The warm-up pair is not among the
    # benchmark pairs, so the embedding caches start empty for them.
    scorer.score([ScoreItem(_warmup_image(), "warm up")], ["CLIP-S"])
    items = [ScoreItem(im, c) for im, c in zip(images, captions)]
    clock = Clock()
    values = scorer.score(items, ["CLIP-S"])["CLIP-S"].values
    return clock.stop(), np.array(values)


def _warmup_image():
    from PIL import Image

    return Image.new("RGB", (224, 224), (127, 64, 32))


def warm_up_model(model, processor, device: str) -> None:
    """One forward of each tower, as run_caplens does for its own freshly loaded copy."""
    dtype = next(model.parameters()).dtype
    with torch.no_grad():
        pixels = processor(images=[_warmup_image()], return_tensors="pt")["pixel_values"].to(device, dtype)
        model.get_image_features(pixel_values=pixels)
        model.get_text_features(**processor.tokenizer(["warm up"], return_tensors="pt").to(device))


class TensorFeatures(torch.nn.Module):
    """transformers 5 CLIPModel returning tensors from get_*_features, as torchmetrics 1.9 expects."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config = model, model.config

    def get_image_features(self, pixel_values):
        return self.model.get_image_features(pixel_values=pixel_values).pooler_output

    def get_text_features(self, input_ids, attention_mask=None):
        return self.model.get_text_features(input_ids=input_ids, attention_mask=attention_mask).pooler_output


def run_torchmetrics(model, processor, images, captions, device: str):
    from torchmetrics.multimodal.clip_score import CLIPScore

    metric = CLIPScore(model_name_or_path=lambda: (TensorFeatures(model), processor)).to(device)
    clock = Clock()
    with torch.no_grad():
        for i in range(0, len(captions), BATCH):
            batch = [torch.from_numpy(np.array(im)).permute(2, 0, 1).to(device) for im in images[i : i + BATCH]]
            metric.update(batch, [PREFIX + c for c in captions[i : i + BATCH]])
        metric.compute()
    return clock.stop(), float(metric.score / metric.n_samples)  # mean 100·cos before its final clip


def run_plain_loop(model, processor, tokenizer, images, captions, device: str):
    dtype = next(model.parameters()).dtype
    clock = Clock()
    image_rows, text_rows = [], []
    with torch.no_grad():
        for i in range(0, len(captions), BATCH):
            pixels = processor(images=images[i : i + BATCH], return_tensors="pt")["pixel_values"].to(device, dtype)
            image_rows.append(model.get_image_features(pixel_values=pixels).pooler_output.float())
            tokens = tokenizer([PREFIX + c for c in captions[i : i + BATCH]], padding=True, truncation=True,
                               max_length=77, return_tensors="pt").to(device)
            text_rows.append(model.get_text_features(**tokens).pooler_output.float())
    v = torch.nn.functional.normalize(torch.cat(image_rows), dim=-1)
    t = torch.nn.functional.normalize(torch.cat(text_rows), dim=-1)
    cosines = (v * t).sum(-1)
    values = (2.5 * torch.clamp(cosines, min=0)).cpu().numpy()
    return clock.stop(), (values, cosines.cpu().numpy())


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


class Clock:
    """Wall-clock and process CPU time of the timed region (model loading excluded)."""

    def __init__(self):
        _sync()
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self) -> tuple[float, float]:
        _sync()
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=256)
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--device", default=None, help="default: cuda, then mps, then cpu")
    args = parser.parse_args()

    from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel, CLIPProcessor

    from scoring.backbones import select_placement

    placement = select_placement(args.device)
    device = str(placement.device)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    workdir = Path(tempfile.mkdtemp(prefix="bench-clipscore-"))
    try:
        folder = build_model_folder(workdir / "clip-b32")
        images, captions = make_pairs(args.pairs, args.images)
        model = CLIPModel.from_pretrained(folder).to(device=device, dtype=placement.dtype).eval()
        processor = CLIPProcessor(image_processor=AutoImageProcessor.from_pretrained(folder),
                                  tokenizer=AutoTokenizer.from_pretrained(folder))
        tokenizer = processor.tokenizer
        warm_up_model(model, processor, device)
        print(f"device {placement.label}, torch threads {torch.get_num_threads()}, "
              f"{args.pairs} pairs over {args.images} images, ViT-B/32-sized random CLIP")

        runners = {
            "caplens": lambda: run_caplens(folder, workdir, images, captions, device),
            "torchmetrics": lambda: run_torchmetrics(model, processor, images, captions, device),
            "plain loop": lambda: run_plain_loop(model, processor, tokenizer, images, captions, device),
        }
        times = {k: [] for k in runners}
        cpu = {k: [] for k in runners}
        gpu = {k: [] for k in runners}
        outputs = {}
        order = list(runners)
        for round_ in range(args.repeats):
            # Rotate the order so a busy spell on a shared machine does not always hit one method.
            for name in order[round_ % 3:] + order[: round_ % 3]:
                with GpuSampler() as sampler:
                    (elapsed, cpu_seconds), outputs[name] = runners[name]()
                cpu[name].append(cpu_seconds)
                times[name].append(elapsed)
                gpu[name].append(sampler.mean)
        check = {"ours": outputs["caplens"], "plain": outputs["plain loop"], "tm": outputs["torchmetrics"]}

        # Same computation: per-pair agreement with the plain loop; torchmetrics keeps only
        # the mean of 100·cos, compared with the plain loop's.
        plain_values, plain_cos = check["plain"]
        print(f"check: max |caplens - plain loop| per pair {np.max(np.abs(check['ours'] - plain_values)):.1e}; "
              f"mean 100·cos torchmetrics {check['tm']:.5f} vs plain loop {100 * np.mean(plain_cos):.5f}")
        rates, cpu_rates = {}, {}
        for name, runs in times.items():
            best = min(runs)
            rates[name] = args.pairs / best
            cpu_rates[name] = args.pairs / min(cpu[name])
            util = [g for g in gpu[name] if g is not None]
            extra = f", GPU util {statistics.mean(util):.0f}%" if util else ""
            print(f"{name:13s} {rates[name]:8.1f} pairs/s wall  {cpu_rates[name]:8.2f} pairs per CPU-second  "
                  f"(best of {len(runs)}: {best:.2f} s wall, {min(cpu[name]):.1f} s CPU{extra})")
        for other in ("torchmetrics", "plain loop"):
            print(f"caplens / {other + ':':13s} {rates['caplens'] / rates[other]:.2f}x wall, "
                  f"{cpu_rates['caplens'] / cpu_rates[other]:.2f}x CPU time")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
