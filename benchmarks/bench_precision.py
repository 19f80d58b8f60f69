"""How far bf16 and fp16 move each embedding metric from fp32, on CUDA: the measurement
behind the per-kind precision defaults (scoring.backbones.CUDA_PRECISION, docs/scoring.md).

For each profile, every backbone is set to one precision through a registry config file
(the documented override), the same pairs are scored in fp32, bf16 and fp16 (fast
preprocessing in all three, so only the precision differs), and the largest and mean
absolute differences against fp32 are printed per metric, with how many fp32 values are
above zero (clipped-to-zero values cannot move).

* ``world``: the shipped world-CLIP and world-MCS, trained weights, world scenes.
* ``bench``: hub-sized random weights (sizes right, activations not those of trained
  models), 640x480 JPEGs and random captions.

    python benchmarks/bench_precision.py --profiles world,bench [--pairs 256]
"""
from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

PRECISIONS = ("fp32", "bf16", "fp16")
EMBEDDING_FAMILIES = ("clip-s", "refclip-s", "mcs", "specs", "itm")


def world_items(count: int):
    from scoring.api import ScoreItem
    from scoring.world.captions import scene_captions
    from scoring.world.render import render_scene
    from scoring.world.scene import generate_scenes

    items = []
    for scene in generate_scenes(500, count):
        captions = scene_captions(scene, langs=("en", "de"), seed=1)["short"]
        buffer = io.BytesIO()
        render_scene(scene, size=256).save(buffer, "JPEG", quality=90)
        for lang in ("en", "de"):
            items.append(ScoreItem(buffer.getvalue(), captions[lang].text, [captions["en"].text], lang))
    return items


def bench_items(count: int, folder: Path):
    from bench_clipscore import make_pairs, write_jpegs

    from scoring.api import ScoreItem

    paths, captions = make_pairs(write_jpegs(folder, count // 2), count)
    return [ScoreItem(p, c, [captions[(i + 1) % len(captions)]]) for i, (p, c) in enumerate(zip(paths, captions))]


def score_in(profile: str, precision: str, items, metrics, folder: Path) -> dict[str, np.ndarray]:
    from scoring.api import Scorer
    from scoring.registry import load_registry

    config = folder / f"{profile}-{precision}.toml"
    config.write_text("".join(
        f'[profiles.{profile}.backbones."{name}"]\nprecision = "{precision}"\n\n'
        for name in load_registry(profile).backbones
    ))
    os.environ["CAPLENS_REGISTRY_CONFIG"] = str(config)
    try:
        scorer = Scorer(profile, preprocess="fast")
        results = scorer.score(items, metrics)
    finally:
        del os.environ["CAPLENS_REGISTRY_CONFIG"]
    return {name: np.array([np.nan if v is None else v for v in r.values], dtype=float)
            for name, r in results.items() if r.available}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", default="world,bench")
    parser.add_argument("--pairs", type=int, default=256)
    args = parser.parse_args()

    import torch

    from scoring.registry import load_registry

    if not torch.cuda.is_available():
        print("bench_precision: needs CUDA (CPUs always run fp32)")
        return 0
    folder = Path(tempfile.mkdtemp(prefix="caplens-precision-"))
    print(f"GPU {torch.cuda.get_device_name()}; |metric(precision) - metric(fp32)| over the same pairs")
    for profile in args.profiles.split(","):
        registry = load_registry(profile)
        metrics = [n for n, s in registry.metrics.items() if s.family in EMBEDDING_FAMILIES]
        items = world_items(args.pairs // 2) if profile == "world" else bench_items(args.pairs, folder / profile)
        values = {p: score_in(profile, p, items, metrics, folder) for p in PRECISIONS}
        print(f"\nprofile {profile}: {len(items)} pairs")
        print(f"{'metric':10s} {'>0 (fp32)':>10s} " + " ".join(f"{p + ' max':>11s} {p + ' mean':>11s}" for p in PRECISIONS[1:]))
        for name, reference in values["fp32"].items():
            row = f"{name:10s} {int(np.sum(reference > 0)):>5d}/{len(reference):<4d} "
            for precision in PRECISIONS[1:]:
                delta = np.abs(values[precision][name] - reference)
                row += f"{np.nanmax(delta):11.5f} {np.nanmean(delta):11.5f} "
            print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
