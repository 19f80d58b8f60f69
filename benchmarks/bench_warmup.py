"""The first Analyze of the demo collection: cold, and after the server's background warm-up.

Each measurement runs in a fresh Python process over its own copy of one seeded data
directory (the `world-demo` collection, as `caplens serve` fills it on a first run):
  cold  - the first Analyze right after start: backbones load and every caption is scored;
  warm  - `annotation.warmup.warm_up` first (what `caplens serve` does in the background:
          load the profile's models, analyze the demo collection once), then the first
          Analyze a person clicks.
"Analyze" is the Analyze tab's library call, `annotation.scores.collection_analysis.analyse_collection`
with every metric of the profile, as a researcher. Issue 25's target: the first Analyze after
warm-up at most 10 s on 2 cores.

    python benchmarks/bench_warmup.py                  # the world profile (what an offline start serves)
    python benchmarks/bench_warmup.py --profile tiny   # seconds, for a check of the script
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TARGET_S = 10.0


def seed(data: Path, scenes: int) -> None:
    os.environ["CAPLENS_DATA_DIR"] = str(data)
    from annotation.app_start import prepare_database
    from annotation.demo_seed import seed_demo

    prepare_database(False, "demo")
    seed_demo(scenes)


def measure(mode: str, profile: str) -> dict:
    """In this process (a fresh one, CAPLENS_DATA_DIR set): the first Analyze, after the
    warm-up when `mode` is "warm"."""
    from sqlalchemy import select

    from annotation.scores.collection_analysis import analyse_collection
    from annotation.database import database_session
    from annotation.warmup import warm_up
    from app import engine
    from db.models import Collection
    from scoring.world.demo import DEMO_COLLECTION

    started = time.perf_counter()
    names = engine.metric_names(profile)
    scorer = engine.AppScorer(profile)
    with database_session(read_only=True) as session:
        owner = session.scalar(select(Collection.created_by_id).where(Collection.name == DEMO_COLLECTION))
    warm_s = None
    if mode == "warm":
        state = warm_up(scorer, names, DEMO_COLLECTION)
        assert state.stage == "ready", state
        warm_s = time.perf_counter() - started
    clicked = time.perf_counter()
    report = analyse_collection(owner, DEMO_COLLECTION, engine.AppScorer(profile), names)
    return {"mode": mode, "profile": profile, "metrics": len(names), "warm_up_s": warm_s,
            "first_analyze_s": time.perf_counter() - clicked, "summary": report.summary}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="world")
    parser.add_argument("--scenes", type=int, default=12, help="demo scenes (caplens serve seeds 12)")
    parser.add_argument("--one", choices=("cold", "warm"), help=argparse.SUPPRESS)  # a child process's part
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.profile)))
        return 0
    with tempfile.TemporaryDirectory(prefix="caplens-bench-warmup-") as tmp:
        seeded = Path(tmp) / "seeded"
        child = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
                                f"from benchmarks.bench_warmup import seed; seed(__import__('pathlib').Path("
                                f"{str(seeded)!r}), {args.scenes})"], cwd=ROOT, capture_output=True, text=True)
        if child.returncode:
            print(child.stderr, file=sys.stderr)
            return 1
        results = {}
        for mode in ("cold", "warm"):
            data = Path(tmp) / mode
            shutil.copytree(seeded, data)
            env = dict(os.environ, CAPLENS_DATA_DIR=str(data))
            run = subprocess.run([sys.executable, __file__, "--one", mode, "--profile", args.profile], cwd=ROOT,
                                 env=env, capture_output=True, text=True)
            if run.returncode:
                print(run.stderr, file=sys.stderr)
                return 1
            results[mode] = json.loads(run.stdout.strip().splitlines()[-1])
    cold, warm = results["cold"], results["warm"]
    print(f"profile {args.profile}, {cold['metrics']} metrics, demo collection of {args.scenes} scenes "
          f"({cold['summary'].split(';')[0]}); {os.cpu_count()} CPU cores")
    print("| first Analyze of the demo collection | seconds |")
    print("|---|---|")
    print(f"| cold (right after start) | {cold['first_analyze_s']:.1f} |")
    print(f"| background warm-up (models + one analysis) | {warm['warm_up_s']:.1f} |")
    print(f"| after the warm-up | {warm['first_analyze_s']:.1f} |")
    met = warm["first_analyze_s"] <= TARGET_S
    print(f"target: at most {TARGET_S:.0f} s after the warm-up: {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
