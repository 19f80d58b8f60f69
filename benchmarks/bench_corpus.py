"""Rows per second of `caplens score-corpus`: single process against Ray with 1 and 2 actors.

Writes a world corpus of --rows rows (one distinct rendered scene per row, with its caption
and references), then scores it, each time into a fresh output folder, with:
  scorer     - Scorer.score over the same batches in this process, no corpus machinery
               (the floor: what the scoring itself costs);
  local      - the single-process engine;
  ray x1     - the Ray engine with one actor;  ray x2 - with two actors (CPU runs only).
Every run includes planning, loading the models and writing the output (modules and files
are warmed once, untimed, before the first run). One scorer thread
per worker, so one Ray actor and the single process do the same work. A local Ray is started
once before the Ray runs and its start-up is printed separately. Then prints the Ray
overhead against the single process (target: at most 15 %) and the speed-up of 2 actors
over 1 (target: at least 1.6x on 2 cores).

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


def time_scorer_only(manifest_path: Path, profile: str, metrics: list[str], device: str | None, batch: int,
                     threads: int | None) -> float:
    """Seconds for Scorer.score over the manifest in batches (models loaded inside the timing)."""
    import torch

    from scoring.api import ScoreItem, Scorer
    from scoring.corpus import open_manifest, read_manifest

    if threads:
        torch.set_num_threads(threads)
    started = time.perf_counter()
    scorer = Scorer(profile, device)
    rows = list(read_manifest(open_manifest(manifest_path)))
    for start in range(0, len(rows), batch):
        chunk = rows[start:start + batch]
        scorer.clear_caches()
        scorer.score([ScoreItem(Path(r.image).read_bytes(), r.candidate, r.references, r.lang) for r in chunk], metrics)
    return time.perf_counter() - started


def time_corpus(manifest_path: Path, out: Path, engine: str, **options) -> float:
    from scoring.corpus import open_manifest, score_corpus

    shutil.rmtree(out, ignore_errors=True)
    report = score_corpus(open_manifest(manifest_path), out, engine=engine, n_boot=0, **options)
    if report.errors or report.unavailable:
        raise SystemExit(f"{engine}: {report.errors} errors, unavailable: {report.unavailable}")
    return report.seconds


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

    Scorer(args.profile, args.device).warm_up(metrics)  # imports and checkpoint files warm, untimed
    options = dict(profile=args.profile, metrics=metrics, device=args.device, batch_rows=args.batch_size)
    seconds = {"scorer": time_scorer_only(manifest, args.profile, metrics, args.device, args.batch_size, threads)}
    show("scorer", args.rows, seconds["scorer"])
    seconds["local"] = time_corpus(manifest, work / "out-local", "local", threads=threads, **options)
    show("local", args.rows, seconds["local"])
    if ray_available():
        import ray

        begun = time.perf_counter()
        ray.init(include_dashboard=False, logging_level="WARNING", log_to_driver=False)
        print(f"local Ray started in {time.perf_counter() - begun:.1f} s (not counted below)")
        try:
            for actors in (1,) if gpu else (1, 2):
                seconds[f"ray x{actors}"] = time_corpus(manifest, work / f"out-ray{actors}", "ray", actors=actors,
                                                        **options)
                show(f"ray x{actors}", args.rows, seconds[f"ray x{actors}"])
        finally:
            ray.shutdown()
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
