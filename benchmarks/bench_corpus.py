"""Rows per second of `caplens score-corpus`: single process against Ray with 1 and 2 actors.

Writes a world corpus of --rows rows (one distinct rendered scene per row, with its caption
and references), then scores it, each time into a fresh output folder, with:
  scorer     - Scorer.score over the same batches in this process, no corpus machinery
               (the floor: what the scoring itself costs);
  local      - the single-process engine;
  ray x1     - the Ray engine with one actor;  ray x2 - with two actors (CPU runs only).
Each run is a fresh Python process, as `caplens score-corpus` is for a user: it imports,
plans, loads the models, scores and writes the output, and its wall time from process start
to exit is what is compared. One thread per worker (`Scorer(threads=1)`: every stage in turn), so one Ray actor and the single
process do the same work. The Ray runs join a local cluster started once beforehand with
`ray start --head` (as a user with a cluster does; its start-up is printed separately), so
neither engine's figure includes starting a cluster. Then prints the Ray overhead against the
single process (target: at most 15 %) and the speed-up of 2 actors over 1 (target: at least
1.6x on 2 cores).

Without Ray installed only the single-process figures are printed.

    python benchmarks/bench_corpus.py --rows 10000                 # CPU, world profile
    python benchmarks/bench_corpus.py --rows 2000 --metrics CLIP-S
    python benchmarks/bench_corpus.py --profile bench --device cuda   # GPU: one GPU actor
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def write_world_corpus(folder: Path, rows: int, image_size: int) -> Path:
    """`rows` held-out world scenes as a JSONL manifest (image, candidate, references)."""
    from scoring.world.sets import split_scenes, write_scoring_inputs

    write_scoring_inputs(folder, split_scenes("heldout", rows), langs=("en",), size=image_size)
    candidates = json.loads((folder / "candidates_en.json").read_text())
    references = json.loads((folder / "references_en.json").read_text())
    manifest = folder / "manifest.jsonl"
    with open(manifest, "w", encoding="utf-8") as handle:
        for image_id, caption in candidates.items():
            handle.write(json.dumps({"id": image_id, "model": "world", "image": f"images/{image_id}.png",
                                     "candidate": caption, "references": references[image_id]}) + "\n")
    return manifest


COLD_RUN = """
import json, sys
from pathlib import Path
from scoring.corpus import open_manifest, score_corpus
spec = json.loads(sys.argv[1])
if spec["engine"] == "scorer":
    from scoring.api import ScoreItem, Scorer
    from scoring.corpus import read_manifest
    scorer = Scorer(spec["profile"], spec["device"], threads=spec["threads"])
    rows = list(read_manifest(open_manifest(Path(spec["manifest"]))))
    for start in range(0, len(rows), spec["batch_rows"]):
        chunk = rows[start:start + spec["batch_rows"]]
        scorer.clear_caches()
        scorer.score([ScoreItem(Path(r.image).read_bytes(), r.candidate, r.references, r.lang) for r in chunk],
                     spec["metrics"])
else:
    report = score_corpus(open_manifest(Path(spec["manifest"])), Path(spec["out"]), engine=spec["engine"], n_boot=0,
                          profile=spec["profile"], metrics=spec["metrics"], device=spec["device"],
                          batch_rows=spec["batch_rows"], threads=spec["threads"], actors=spec["actors"],
                          ray_address=spec["ray_address"])
    if report.errors or report.unavailable:
        raise SystemExit(f"{spec['engine']}: {report.errors} errors, unavailable: {report.unavailable}")
"""


def time_cold(engine: str, manifest: Path, out: Path, **spec) -> float:
    """Wall seconds of one fresh process scoring the corpus with `engine` (`scorer`: Scorer.score
    over the same batches, no corpus machinery: the floor of what scoring itself costs)."""
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", COLD_RUN, json.dumps({**spec, "engine": engine, "manifest": str(manifest),
                                                                 "out": str(out)})],
                   check=True, cwd=Path(__file__).resolve().parents[1])
    return time.perf_counter() - started


SETTLE = """
import sys, ray
from scoring.corpus.ray_engine import _send_local_token
_send_local_token(sys.argv[1])
ray.init(address=sys.argv[1], log_to_driver=False, logging_level="ERROR")
ray.get([ray.remote(lambda: None).remote() for _ in range(4)])
"""


def start_ray_head(cpus: int) -> str:
    """A local Ray cluster for the runs to join (`ray start --head`), settled: it has booted
    its idle workers and run a task, as a running cluster a user joins has. Without this the
    first timed run shared the cores with the workers still starting (1 actor measured 65 s,
    then 73 s right after a fresh start). Returns its address."""
    port = 6390
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    subprocess.run(["ray", "start", "--head", f"--port={port}", f"--num-cpus={cpus}", "--include-dashboard=false",
                    "--disable-usage-stats"], check=True, capture_output=True, env=env)
    address = f"127.0.0.1:{port}"
    subprocess.run([sys.executable, "-c", SETTLE, address], check=True, capture_output=True, env=env,
                   cwd=Path(__file__).resolve().parents[1])
    time.sleep(5)
    return address


def stop_ray_head() -> None:
    subprocess.run(["ray", "stop", "--force"], capture_output=True,
                   env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"})


def show(name: str, rows: int, seconds: float) -> None:
    print(f"{name:>9}: {rows / seconds:8.1f} rows/s  ({seconds:.1f} s)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--profile", default="world")
    parser.add_argument("--metrics", default="CLIP-S,RefCLIP-S,MCS", help="comma list (default: the learned metrics)")
    parser.add_argument("--device", default=None, help="torch device (default: cuda, then mps, then cpu)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--work", type=Path, help="folder for the corpus and outputs (default: a temporary one)")
    args = parser.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("CAPLENS_DATA_DIR", tempfile.mkdtemp(prefix="caplens-bench-"))
    from scoring.corpus.run import ray_available

    work = args.work or Path(tempfile.mkdtemp(prefix="caplens-bench-corpus-"))
    metrics = [m for m in args.metrics.split(",") if m]
    gpu = (args.device or "").startswith("cuda")
    started = time.perf_counter()
    manifest = write_world_corpus(work / "corpus", args.rows, args.image_size)
    print(f"{args.rows} rows written in {time.perf_counter() - started:.1f} s; profile {args.profile}, "
          f"metrics {','.join(metrics)}, batch {args.batch_size}, device {args.device or 'auto'}, "
          f"{os.cpu_count()} CPUs")
    threads = None if gpu else 1
    from scoring.api import Scorer

    Scorer(args.profile, args.device).warm_up(metrics)  # checkpoint files in the page cache, untimed
    spec = dict(profile=args.profile, metrics=metrics, device=args.device, batch_rows=args.batch_size,
                threads=threads, actors=None, ray_address=None)
    seconds = {}
    for engine in ("scorer", "local"):
        seconds[engine] = time_cold(engine, manifest, work / f"out-{engine}", **spec)
        show(engine, args.rows, seconds[engine])
    if ray_available():
        begun = time.perf_counter()
        address = start_ray_head(os.cpu_count() or 1)
        print(f"local Ray cluster started in {time.perf_counter() - begun:.1f} s (not counted below)")
        try:
            for actors in (1,) if gpu else (1, 2):
                seconds[f"ray x{actors}"] = time_cold("ray", manifest, work / f"out-ray{actors}",
                                                      **{**spec, "actors": actors, "ray_address": address})
                show(f"ray x{actors}", args.rows, seconds[f"ray x{actors}"])
        finally:
            stop_ray_head()
    else:
        print("Ray is not installed: single-process figures only (pip install 'caplens[ray]')")
    print(f"corpus engine overhead over the scorer alone: {100 * (seconds['local'] / seconds['scorer'] - 1):+.1f} %")
    if "ray x1" in seconds:
        print(f"Ray overhead, 1 actor against the single process: {100 * (seconds['ray x1'] / seconds['local'] - 1):+.1f} %"
              " (target <= 15 %)")
    if "ray x2" in seconds:
        print(f"speed-up, 2 actors over 1: {seconds['ray x1'] / seconds['ray x2']:.2f}x (target >= 1.6x)")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
