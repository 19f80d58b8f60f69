"""UMIC against UMIC-C on a reported seed range: pairwise accuracy (the positive caption above
each of its four negatives) on UMIC's own four negative kinds and on the world's content errors
(a kind the recipe never trains on), per kind, with 95 % scene-bootstrap intervals (issue 30).

    python benchmarks/bench_umic.py --first-seed 1000000 --scenes 300 [--profile world] [--metrics UMIC-C,UMIC]
        [--n-boot 1000] [--device cuda] [--json F] [--md F]

`--choose` runs on the validation range instead, to choose between checkpoints or settings.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from world_protocol import protocol_parser, run_and_write  # noqa: E402  (beside this script)


def run(first_seed: int, scenes: int, profile: str, metrics: list[str], n_boot: int = 1000,
        device: str | None = None, choose: bool = False) -> dict:
    from bench_finetune import _held_out_sets, group_scenes, pairwise_correct_table

    from scoring.analysis.correlation import cluster_bootstrap
    from scoring.api import Scorer
    from scoring.world.render import render_scene
    from scoring.world.scene import generate_scenes
    from scoring.world.splits import check_range

    kind = check_range(first_seed, scenes, choose)
    started = time.time()
    world = generate_scenes(first_seed, scenes)
    sets = _held_out_sets(world)
    image_of = {f"images/{s.scene_id}.png": render_scene(s) for s in world}
    scorer = Scorer(profile, device)
    out = {"first_seed": first_seed, "scenes": scenes, "range": kind, "profile": profile, "sets": {}}
    for name in ("umic", "umic-errors"):
        groups = sets[name]
        kinds = np.array([g["negative_kinds"] for g in groups])
        entry = {"groups": len(groups)}
        for metric in metrics:
            correct = pairwise_correct_table(scorer, metric, groups, image_of)
            est = cluster_bootstrap(lambda i: 100 * correct[i].mean(), group_scenes(groups), n_boot=n_boot)
            entry.setdefault("scenes", est.n)  # what the interval resamples
            entry[metric] = {"accuracy": [est.value, est.low, est.high],
                             "by_kind": {str(x): 100 * float(correct[kinds == x].mean()) for x in sorted(set(kinds.ravel()))}}
        out["sets"][name] = entry
    out["wall_s"] = round(time.time() - started, 1)
    return out


def report(r: dict) -> str:
    lines = [f"# UMIC pairwise accuracy, seeds {r['first_seed']}.. ({r['scenes']} scenes, {r['range']} range, "
             f"profile {r['profile']}, {r['wall_s']:.0f} s)", ""]
    for name, entry in r["sets"].items():
        metrics = [m for m in entry if m not in ("groups", "scenes")]
        kinds = list(entry[metrics[0]]["by_kind"])
        scenes = f", {entry['scenes']} scenes, resampled whole" if "scenes" in entry else ""
        lines += [f"## {name} ({entry['groups']} groups{scenes})", "", "| metric | accuracy % [95 %] | " + " | ".join(kinds) + " |",
                  "|---|---|" + "---|" * len(kinds)]
        for m in metrics:
            v, lo, hi = entry[m]["accuracy"]
            lines.append(f"| {m} | {v:.1f} [{lo:.1f}, {hi:.1f}] | " + " | ".join(f"{entry[m]['by_kind'][x]:.1f}" for x in kinds) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = protocol_parser(__doc__.split("\n\n")[0], langs=False, metrics="UMIC-C,UMIC").parse_args(argv)
    return run_and_write("bench_umic", args, lambda: run(
        args.first_seed, args.scenes, args.profile, args.metrics.split(","), args.n_boot, args.device, args.choose),
        report)


if __name__ == "__main__":
    raise SystemExit(main())
