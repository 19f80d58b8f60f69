"""Random order vs "disagreement first" on the world's simulated annotators (issue 16, "a queue
that learns").

The pool is the world's rated collection (`scoring.world.sets.rated_rows`: English short and
long candidates of training scenes with controlled errors; three simulated annotators rate each).
The queue serves least-rated items first, so the first 200 ratings are 200 distinct items with
one rating each; the order decides which 200:

* random: a seeded permutation of the pool;
* disagreement-first: `annotation.studies.queue_priority.disagreement_first` on the pool's scores by the
  world profile's metrics (ties broken by the same seeded permutation).

Each of the 200 ratings comes from one of the three simulated annotators (rotating). CapLens-R
(`caplens-r` recipe, the one trainer in `scoring.training`, frozen world-MCS text and world-CLIP
image features) is trained on those 200 ratings and evaluated by Kendall tau_c against the mean
rating of the three annotators on every English candidate of held-out scenes (seeds from
1,000,000, no image shared with the pool). Each seed draws its own pool (a seeded share of the
training scenes), permutation, annotator rotation and training seed.

    python benchmarks/bench_active_queue.py [--pool-scenes 300] [--heldout-scenes 100]
        [--ratings 200] [--seeds 5] [--out benchmarks/results/active_queue.md]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The world profile's metrics that score English captions without CapLens-R itself (whose
# shipped head was trained on simulated ratings of the same training scenes).
DISAGREEMENT_METRICS = ("CLIP-S", "RefCLIP-S", "PAC-S", "MCS", "UMIC-C", "BLEU-4", "ROUGE-L", "CIDEr")
TRAINING = dict(architecture={"hidden": 128}, optimizer={"name": "adamw", "lr": 1e-3, "weight_decay": 0.01},
                schedule={"name": "cosine", "warmup": 0.02}, batch_size=50, epochs=100)


def pool_items(scenes: int) -> list[dict]:
    """One entry per candidate of the pool: its rows (one per simulated annotator)."""
    from scoring.training.data import world_set

    rows, _, _ = world_set("ratings", {"scenes": scenes, "split": "train", "size": 128, "languages": ["en"]})
    items: dict[str, dict] = {}
    for row in rows:
        items.setdefault(row["caption_id"], {"caption_id": row["caption_id"], "image": row["image"],
                                             "image_id": row["image_id"], "text": row["text"],
                                             "references": row["references"], "style": row["style"],
                                             "oracle": row["oracle"], "rows": []})["rows"].append(row)
    return list(items.values())


def pool_scores(items: list[dict], device: str | None) -> dict[str, list[float | None]]:
    from scoring.api import Scorer, ScoreItem

    scorer = Scorer("world", device)
    batch = [ScoreItem(it["image"], it["text"], list(it["references"]), "en", it["image_id"]) for it in items]
    results = scorer.score(batch, list(DISAGREEMENT_METRICS))
    out = {}
    for name, result in results.items():
        if result.unavailable:
            print(f"{name}: unavailable: {result.unavailable}", file=sys.stderr)
            continue
        out[name] = list(result.values)
    return out


def first_ratings(items, scores, order: str, seed: int, ratings: int) -> list[dict]:
    """The first `ratings` ratings the queue serves in `order`: one row (one annotator) per item."""
    from annotation.studies.queue_priority import disagreement_first

    ids = list(range(len(items)))
    random.Random(f"order-{seed}").shuffle(ids)
    if order == "disagreement-first":
        ids = disagreement_first(ids, {m: [v[i] for i in ids] for m, v in scores.items()})
    picked = ids[:ratings]
    return [items[i]["rows"][(n + seed) % len(items[i]["rows"])] for n, i in enumerate(picked)]


def train_tau(rows: list[dict], heldout_scenes: int, seed: int, device: str) -> dict:
    from scoring.training.config import TrainConfig
    from scoring.training.trainer import train

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "ratings.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        config = TrainConfig(recipe="caplens-r", data=str(data), out=str(Path(tmp) / "run"),
                             heldout={"world": {"scenes": heldout_scenes, "split": "heldout", "size": 128,
                                                "languages": ["en"]}},
                             base="world:mclip-text", teacher="world:clip", seed=seed, device=device, threads=1,
                             max_heldout=1_000_000, checkpoint_every=100_000, **TRAINING)
        result = train(config)
    return {"tau_c": result.after["tau_c"], "tau_c_before": result.before["tau_c"], "wall_s": round(result.wall_s, 1)}


def describe(rows: list[dict], items_by_id: dict) -> dict:
    chosen = [items_by_id[r["caption_id"]] for r in rows]
    return {"long_share": float(np.mean([it["style"] == "long" for it in chosen])),
            "oracle_mean": float(np.mean([it["oracle"] for it in chosen])),
            "oracle_sd": float(np.std([it["oracle"] for it in chosen])),
            "images": len({it["image_id"] for it in chosen})}


def run(args) -> dict:
    started = time.time()
    items_all = pool_items(args.pool_scenes)
    scores_all = pool_scores(items_all, args.device)
    scene_ids = sorted({it["image_id"] for it in items_all})
    items_by_id = {it["caption_id"]: it for it in items_all}
    results = {"random": [], "disagreement-first": []}
    for seed in range(args.seeds):
        keep = set(random.Random(f"pool-{seed}").sample(scene_ids, round(args.pool_share * len(scene_ids))))
        index = [i for i, it in enumerate(items_all) if it["image_id"] in keep]
        items = [items_all[i] for i in index]
        scores = {m: [v[i] for i in index] for m, v in scores_all.items()}
        for order in results:
            rows = first_ratings(items, scores, order, seed, args.ratings)
            entry = {"seed": seed, "pool_items": len(items), **describe(rows, items_by_id),
                     **train_tau(rows, args.heldout_scenes, seed, args.device)}
            print(f"seed {seed} {order}: tau_c {entry['tau_c']:.3f} ({entry['wall_s']} s)", file=sys.stderr)
            results[order].append(entry)
    return {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}, "metrics": list(scores_all), "pool_items": len(items_all),
            "pool_scenes": len(scene_ids), "training": TRAINING, "results": results,
            "wall_s": round(time.time() - started, 1)}


def report(r: dict) -> str:
    a = r["args"]
    lines = [f"# Rating queue order: random vs disagreement-first ({a['ratings']} ratings, {a['seeds']} seeds)", "",
             f"Pool: {r['pool_items']} English candidates of {r['pool_scenes']} world training scenes; each seed "
             f"draws {a['pool_share']:.0%} of the scenes. Disagreement from: {', '.join(r['metrics'])}. "
             f"CapLens-R (`caplens-r` recipe, {r['training']['epochs']} epochs, batch {r['training']['batch_size']}) "
             f"trained on the first {a['ratings']} ratings (one simulated annotator each), tau_c against the mean of "
             f"three simulated annotators on every English candidate of {a['heldout_scenes']} held-out scenes.", "",
             "| order | tau_c mean ± sd | per seed | long captions | oracle mean ± sd of rated items | images |",
             "|---|---|---|---|---|---|"]
    for order, entries in r["results"].items():
        taus = np.array([e["tau_c"] for e in entries])
        lines.append(f"| {order} | {taus.mean():.3f} ± {taus.std(ddof=1):.3f} | "
                     + ", ".join(f"{t:.3f}" for t in taus)
                     + f" | {np.mean([e['long_share'] for e in entries]):.0%} | "
                     f"{np.mean([e['oracle_mean'] for e in entries]):.2f} ± "
                     f"{np.mean([e['oracle_sd'] for e in entries]):.2f} | "
                     f"{np.mean([e['images'] for e in entries]):.0f} |")
    diff = np.array([d["tau_c"] - rnd["tau_c"] for d, rnd in zip(r["results"]["disagreement-first"],
                                                                r["results"]["random"])])
    lines += ["", f"Paired difference (disagreement-first − random, same seed): {diff.mean():+.3f} ± "
              f"{diff.std(ddof=1):.3f}; better in {int((diff > 0).sum())} of {len(diff)} seeds.",
              f"Untrained head (before): {np.mean([e['tau_c_before'] for e in r['results']['random']]):.3f}. "
              f"Benchmark wall time {r['wall_s']} s."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="random vs disagreement-first rating order, CapLens-R tau_c")
    parser.add_argument("--pool-scenes", type=int, default=300)
    parser.add_argument("--pool-share", type=float, default=0.8)
    parser.add_argument("--heldout-scenes", type=int, default=100)
    parser.add_argument("--ratings", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, help="write the table (markdown) here")
    parser.add_argument("--json", type=Path, help="also write the full result here")
    args = parser.parse_args(argv)
    result = run(args)
    text = report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=float), encoding="utf-8")
    if args.out:
        command = "python benchmarks/bench_active_queue.py " + " ".join(argv if argv is not None else sys.argv[1:])
        args.out.write_text(f"<!-- {command.strip()} -->\n{text}", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
