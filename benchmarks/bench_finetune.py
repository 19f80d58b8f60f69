"""Before/after table of the fine-tuned world metrics on held-out scenes (issue 12, "Proof on the
synthetic world").  Everything is scored through `scoring.api.Scorer` on the `world` profile,
i.e. the shipped checkpoints and the normal loading code, on a reported seed range: the test
range (from 1,000,000) or one outside all ranges (from 2,000,000); `scoring.world.splits`
refuses a range that overlaps train or validation.

    python benchmarks/bench_finetune.py --first-seed 1000000 --scenes 300 [--json out.json] [--device cpu]

Specificity is measured on the raw cosine of each metric's own embeddings (no clipping, no
scale, where ties would count as failures), SR_pos and SR_neg reported separately, each with a
95 % scene-bootstrap interval.

Rows (target from the issue in brackets):
- PR-MCS vs MCS: mean perturbation drop over the five operations per language [>= 50 %],
  per-operation drop without noop perturbations [>= 20 %], tau_c vs oracle on unperturbed
  candidates [falls by <= 0.02];
- SPECS vs CLIP-S on long captions, raw cosine: (SR_pos + SR_neg)/2 [+10 points, SR_neg +5];
- PAC-S vs CLIP-S: tau_c vs oracle, English [+0.02];
- UMIC vs UMIC-C: pairwise accuracy on held-out negatives [+10 points];
- CapLens-R: tau_c vs the simulated humans on held-out images [above every other metric].
Training wall times come from each checkpoint's training.json.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LANGS = ("en", "de", "fr", "es", "ja")
CHECKPOINTS = {"PR-MCS": "world-prmcs", "SPECS": "world-specs", "PAC-S": "world-pacs", "UMIC-C": "world-itm",
               "UMIC": "world-umic", "CapLens-R": "world-caplens-r"}
TABLE_METRICS = ["CLIP-S", "RefCLIP-S", "PAC-S", "RefPAC-S", "MCS", "PR-MCS", "SPECS", "UMIC-C", "UMIC", "CapLens-R"]


def _held_out_sets(scenes) -> dict[str, list[dict]]:
    """The world's UMIC groups and SPECS triplets for the held-out scenes (English)."""
    from scoring.world.sets import write_finetune_sets

    with tempfile.TemporaryDirectory() as tmp:
        write_finetune_sets(Path(tmp), scenes, ("en",), size=128)
        return {name: [json.loads(line) for line in (Path(tmp) / f"{name}.jsonl").open(encoding="utf-8")]
                for name in ("umic", "umic-errors", "specs")}


def _scores(scorer, metric, images, texts):
    from scoring.api import ScoreItem

    result = scorer.score([ScoreItem(im, t) for im, t in zip(images, texts)], [metric])[metric]
    if result.unavailable:
        raise RuntimeError(f"{metric} unavailable: {result.unavailable}")
    return np.array(result.values, dtype=float)


def pairwise_correct_table(scorer, metric, groups, image_of) -> np.ndarray:
    """(groups, negatives): 1 where the positive caption scores above that negative (ties 0.5)."""
    from scoring.analysis.pairwise import pairwise_correct

    images = [image_of[g["image"]] for g in groups for _ in range(1 + len(g["negatives"]))]
    texts = [t for g in groups for t in [g["positive"], *g["negatives"]]]
    values = _scores(scorer, metric, images, texts).reshape(len(groups), -1)
    return pairwise_correct(np.repeat(values[:, :1], values.shape[1] - 1, 1), values[:, 1:]).astype(float)


def pairwise_accuracy(scorer, metric, groups, image_of) -> float:
    return float(pairwise_correct_table(scorer, metric, groups, image_of).mean())


def raw_cosine(scorer, metric, images, texts) -> np.ndarray:
    """cos(image, prefix + text) in the metric's own embedding space, before clipping and scaling."""
    spec = scorer.registry.metrics[scorer.canonical_name(metric)]
    image = scorer.image_embeddings(images, spec.backbone)
    text = scorer.text_embeddings(texts, spec.backbone, prefix=spec.prefix or "")
    return np.sum(np.asarray(image, np.float64) * np.asarray(text, np.float64), axis=1)


def specificity(scorer, metric, triplets, image_of) -> dict:
    """SR_pos and SR_neg on raw cosine, each with a scene-bootstrap interval (triplets of one
    image are not independent), and their mean."""
    from scoring.analysis.correlation import cluster_bootstrap

    images = [image_of[t["image"]] for t in triplets]
    base, ext = (raw_cosine(scorer, metric, images, [t[k] for t in triplets]) for k in ("base", "positive"))
    neg = raw_cosine(scorer, metric, images, [t["negative"] for t in triplets])
    scenes = np.array([t["image"] for t in triplets])
    pos_ok, neg_ok = (ext > base).astype(float), (neg < base).astype(float)
    est = {"SR_pos": cluster_bootstrap(lambda i: 100 * pos_ok[i].mean(), scenes),
           "SR_neg": cluster_bootstrap(lambda i: 100 * neg_ok[i].mean(), scenes),
           "mean": cluster_bootstrap(lambda i: 50 * (pos_ok[i].mean() + neg_ok[i].mean()), scenes)}
    return {k: [v.value, v.low, v.high] for k, v in est.items()} | {"triplets": len(triplets)}


def training_times() -> dict[str, dict]:
    folder = ROOT / "scoring" / "world" / "checkpoints"
    out = {}
    for metric, name in CHECKPOINTS.items():
        path = folder / name / "training.json"
        if path.is_file():
            record = json.loads(path.read_text(encoding="utf-8"))
            runs = record.get("lineage", []) + [{"wall_s": record.get("wall_s"), "device": record.get("device"),
                                                 "steps": len(record.get("losses", []))}]
            out[metric] = {"wall_s": round(sum(r["wall_s"] or 0 for r in runs), 1),
                           "device": ", ".join(dict.fromkeys(r["device"] for r in runs)),
                           "steps": sum(r["steps"] for r in runs), "runs": len(runs)}
    return out


def run(first_seed: int, scenes: int, device: str | None) -> dict:
    from scoring.api import Scorer
    from scoring.world.measure import correlation, perturbation
    from scoring.world.render import render_scene
    from scoring.world.scene import generate_scenes
    from scoring.world.splits import check_report_range

    kind = check_report_range(first_seed, scenes)
    started = time.time()
    scorer = Scorer("world", device)
    held = generate_scenes(first_seed, scenes)
    images = [render_scene(s) for s in held]
    corr = correlation(scorer, held, images, LANGS, TABLE_METRICS)
    pert = perturbation(scorer, held, images, LANGS, 0, metrics=("MCS", "PR-MCS"))
    sets = _held_out_sets(held)
    image_of = {f"images/{s.scene_id}.png": im for s, im in zip(held, images)}
    long_triplets = sets["specs"]  # the world writes SPECS triplets of long captions only
    return {
        "scenes": scenes, "heldout_first_seed": first_seed, "range": kind, "correlation": corr, "perturbation": pert,
        "umic_pairwise": {m: pairwise_accuracy(scorer, m, sets["umic"], image_of) for m in ("UMIC-C", "UMIC")},
        "umic_pairwise_errors": {m: pairwise_accuracy(scorer, m, sets["umic-errors"], image_of) for m in ("UMIC-C", "UMIC")},
        "specificity": {m: specificity(scorer, m, long_triplets, image_of) for m in ("CLIP-S", "SPECS")},
        "umic_groups": len(sets["umic"]), "specs_triplets": len(long_triplets),
        "training": training_times(), "bench_wall_s": round(time.time() - started, 1),
    }


def _tau(corr, metric, lang, style="all", against="tau_c_oracle"):
    entry = corr.get(metric)
    value = entry[lang][style][against] if isinstance(entry, dict) else None
    return float("nan") if value is None else value


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def report(r: dict) -> str:
    from scoring.perturb.ops import PRMCS_OPS

    corr, pert = r["correlation"], r["perturbation"]
    lines = [f"# Fine-tuned world metrics, seeds {r['heldout_first_seed']}.. ({r['scenes']} scenes, {r.get('range', 'test')} range)", "",
             "| claim | before | after | target | verdict |", "|---|---|---|---|---|"]

    def drop(metric, lang, key="change_pct"):
        return [-pert[metric][lang][op][key] for op in PRMCS_OPS if pert[metric][lang][op][key] is not None]

    for lang in LANGS:
        before, after = np.mean(drop("MCS", lang)), np.mean(drop("PR-MCS", lang))
        lines.append(f"| PR-MCS mean perturbation drop, {lang} | MCS {before:.1f} % | {after:.1f} % | >= 50 % | {_verdict(after >= 50)} |")
    for lang in LANGS:
        per_op = dict(zip(PRMCS_OPS, drop("PR-MCS", lang, "effective_change_pct")))
        worst = min(per_op, key=per_op.get)
        lines.append(f"| PR-MCS weakest op without noops, {lang} | MCS {min(drop('MCS', lang, 'effective_change_pct')):.1f} % | "
                     f"{worst} {per_op[worst]:.1f} % | >= 20 % | {_verdict(per_op[worst] >= 20)} |")
    for lang in LANGS:
        before, after = _tau(corr, "MCS", lang), _tau(corr, "PR-MCS", lang)
        lines.append(f"| PR-MCS tau_c vs oracle (unperturbed), {lang} | MCS {before:.3f} | {after:.3f} | fall <= 0.02 | {_verdict(after >= before - 0.02)} |")
    spec = r["specificity"]
    for part in ("mean", "SR_pos", "SR_neg"):
        (b, bl, bh), (a, al, ah) = spec["CLIP-S"][part], spec["SPECS"][part]
        target = {"mean": "+10 points", "SR_neg": "+5 points", "SR_pos": "(reported)"}[part]
        ok = {"mean": a - b >= 10, "SR_neg": a - b >= 5, "SR_pos": True}[part]
        lines.append(f"| SPECS {part}, raw cosine, long, en | CLIP-S {b:.1f} [{bl:.1f}, {bh:.1f}] | "
                     f"{a:.1f} [{al:.1f}, {ah:.1f}] | {target} | {_verdict(ok) if part != 'SR_pos' else '-'} |")
    b, a = _tau(corr, "CLIP-S", "en"), _tau(corr, "PAC-S", "en")
    lines.append(f"| PAC-S tau_c vs oracle, en | CLIP-S {b:.3f} | {a:.3f} | +0.02 | {_verdict(a - b >= 0.02)} |")
    b, a = 100 * r["umic_pairwise"]["UMIC-C"], 100 * r["umic_pairwise"]["UMIC"]
    lines.append(f"| UMIC pairwise accuracy, UMIC's four negative kinds, en | UMIC-C {b:.1f} | {a:.1f} | +5 points | {_verdict(a - b >= 5)} |")
    if "umic_pairwise_errors" in r:
        b, a = 100 * r["umic_pairwise_errors"]["UMIC-C"], 100 * r["umic_pairwise_errors"]["UMIC"]
        lines.append(f"| UMIC pairwise accuracy, world content errors (not trained on), en | UMIC-C {b:.1f} | {a:.1f} | (reported) | - |")
    human = {m: _tau(corr, m, "en", against="tau_c_human") for m in TABLE_METRICS}
    best_other = max((m for m in TABLE_METRICS if m != "CapLens-R" and np.isfinite(human[m])), key=human.get)
    lines.append(f"| CapLens-R tau_c vs humans, en | best other {best_other} {human[best_other]:.3f} | {human['CapLens-R']:.3f} | "
                 f"above all | {_verdict(human['CapLens-R'] > human[best_other])} |")
    lines += ["", "tau_c vs simulated humans (all styles) per language:", "",
              "| metric | " + " | ".join(LANGS) + " |", "|---|" + "---|" * len(LANGS)]
    for m in TABLE_METRICS:
        lines.append(f"| {m} | " + " | ".join(f"{_tau(corr, m, lang, against='tau_c_human'):.3f}" for lang in LANGS) + " |")
    lines += ["", "Training wall time (from each checkpoint's training.json):", ""]
    for metric, t in r["training"].items():
        chained = f", {t['runs']} runs each continuing the last" if t.get("runs", 1) > 1 else ""
        lines.append(f"- {metric}: {t['wall_s']} s on {t['device']} ({t['steps']} steps{chained})")
    lines.append(f"\nThis benchmark: {r['bench_wall_s']} s ({r['umic_groups']} UMIC groups, {r['specs_triplets']} SPECS triplets).")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="before/after table of the fine-tuned world metrics")
    parser.add_argument("--first-seed", type=int, default=1_000_000, help="first scene seed (test range or outside)")
    parser.add_argument("--scenes", type=int, default=300)
    parser.add_argument("--device")
    parser.add_argument("--json", type=Path, help="also write the full result here")
    parser.add_argument("--from-json", type=Path, help="print the table of an earlier --json result")
    args = parser.parse_args(argv)
    if args.from_json:
        print(report(json.loads(args.from_json.read_text(encoding="utf-8"))))
        return 0
    try:
        result = run(args.first_seed, args.scenes, args.device)
    except ValueError as exc:
        print(f"bench_finetune: {exc}", file=sys.stderr)
        return 2
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False, default=float), encoding="utf-8")
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
