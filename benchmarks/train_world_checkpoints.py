"""Train the fine-tuned world checkpoints (PAC-S, SPECS, ITM, UMIC, PR-MCS, CapLens-R) on world sets.

    python benchmarks/train_world_checkpoints.py SETS OUT [--parallel] [--minutes M]

SETS holds the world's fine-tuning sets (`caplens world sets` / `scoring.world.sets`:
prmcs.jsonl, specs.jsonl, umic.jsonl, pacs.jsonl, ratings.jsonl and their images); every job
is the recipe's preset with the data, output folder and a time limit overridden, run by the
one trainer.  With --parallel the independent jobs share the device (ITM then UMIC in one
chain).  OUT/<name>/training.json records each run; OUT/summary.json all of them.

The shipped checkpoints: world-prmcs from the pr-mcs preset (`caplens finetune pr-mcs`, 500
steps on the CPU; its settings were chosen on validation, docs/training.md); world-pacs from three
presets in a row on the CPU (`caplens finetune world-clip --config world-clip-swap`, the same with
`world-clip-swap-2`, then `caplens finetune pac-s --config pac-s-swap`); world-caplens-r from the
caplens-r-hybrid preset (`caplens finetune caplens-r --config caplens-r-hybrid`, 3,000 scenes of ratings, 886 s on the CPU) reading world-caplens-r-cross, which is the
caplens-r-cross-gpu preset's run on an H100 (`benchmarks/gpu_train.sh`, 2,374 steps); world-umic from the umic preset (`caplens finetune umic`: 3,000
train-range scenes, English, short and long positives, step 300 of 400 kept on validation;
docs/training.md).  world-itm is its job below (the same preset and overrides, by the same
trainer, without the time limit) on the CPU with 2 threads (951 s), over a 6,000-scene English set, `write_finetune_sets(SETS, split_scenes("train",
6000), ("en",))`: on the 700-scene set the ITM base reached 64.5 % held-out pairwise
accuracy on UMIC's negatives, on 6,000 scenes 79.2 %.  world-specs is a chain of four runs
of the specs preset on the CPU (2,945 steps, 4,862 s; each run's base is the one before):
its job on the same 6,000-scene set (50,280 triplets) stopped by an 18-minute limit at step
1,059; then 586 steps at 5e-5 and 600 at 3e-5 on that set; then 700 at 3e-5 (1 thread) on
12,000 further scenes (`generate_scenes(6000, 6000)` and `generate_scenes(12000, 6000)`, 99,287
triplets).  Each folder's training.json holds its last run's exact config.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

# name: (preset, set file, overrides); UMIC starts from the ITM base trained just before it.
JOBS = {
    "world-itm": ("itm", "umic.jsonl", {"max_steps": 3000, "batch_size": 64}),
    "world-umic": ("umic", "umic.jsonl", {"max_steps": 1500, "base": "@world-itm"}),
    # 700 pairs only: the first GPU run (1500 steps at 1e-4) overfitted them (held-out tau_c 0.50 -> 0.18).
    "world-pacs": ("pac-s", "pacs.jsonl", {"max_steps": 120, "batch_size": 32, "lr": 1e-5}),
    "world-specs": ("specs", "specs.parquet", {"max_steps": 1500}),
    "world-specs-lr1e-5": ("specs", "specs.parquet", {"max_steps": 1500, "lr": 1e-5}),
    "world-prmcs": ("pr-mcs", "prmcs.parquet", {}),
    "world-caplens-r": ("caplens-r", "ratings.parquet", {}),
}
CHAINS = [["world-itm", "world-umic"], ["world-pacs"], ["world-specs"], ["world-specs-lr1e-5"], ["world-prmcs"],
          ["world-caplens-r"]]


def run_job(name: str, sets: Path, out: Path, seconds: float) -> dict:
    from dataclasses import replace

    from scoring.training import load_config, train

    preset, data, overrides = JOBS[name]
    overrides = dict(overrides)
    lr = overrides.pop("lr", None)
    if str(overrides.get("base", "")).startswith("@"):
        overrides["base"] = str(out / overrides["base"][1:])
    config = load_config(preset, data=str(sets / data), out=str(out / name), **overrides)
    config = replace(config, time_limit_s=seconds, checkpoint_every=10**9,
                     optimizer=config.optimizer | ({"lr": lr} if lr else {}))
    result = train(config, log=lambda message: print(f"[{name}] {message}", flush=True))
    return {"name": name, "recipe": result.recipe, "before": result.before, "after": result.after,
            "wall_s": round(result.wall_s, 1), "device": result.device, "steps": len(result.losses)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sets", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", nargs="*", choices=list(JOBS), help="run these jobs (default: all)")
    parser.add_argument("--minutes", type=float, default=4.0, help="time limit per chain, training time only")
    parser.add_argument("--parallel", action="store_true", help="run the chains as parallel processes")
    parser.add_argument("--job", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.job:
        summary = run_job(args.job, args.sets, args.out, args.minutes * 60)
        (args.out / f"{args.job}.summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
        return 0
    wanted = set(args.only or JOBS)
    chains = [[j for j in chain if j in wanted] for chain in CHAINS]
    chains = [c for c in chains if c]
    started = time.time()
    if args.parallel:
        shell = [" && ".join(f"{sys.executable} {__file__} {args.sets} {args.out} --job {job} "
                             f"--minutes {args.minutes / len(chain)}" for job in chain) for chain in chains]
        processes = [subprocess.Popen(command, shell=True) for command in shell]
        codes = [p.wait() for p in processes]
    else:
        codes = [subprocess.call([sys.executable, __file__, str(args.sets), str(args.out), "--job", job,
                                  "--minutes", str(args.minutes / len(chain))]) for chain in chains for job in chain]
    summaries = [json.loads(p.read_text()) for p in sorted(args.out.glob("*.summary.json"))]
    (args.out / "summary.json").write_text(json.dumps({"wall_s": round(time.time() - started, 1), "runs": summaries},
                                                      indent=1), encoding="utf-8")
    print(json.dumps({"wall_s": round(time.time() - started, 1), "exit_codes": codes}))
    return 0 if not any(codes) else 1


if __name__ == "__main__":
    sys.exit(main())
