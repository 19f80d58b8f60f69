"""The paper recipes' world metrics against their bases on a reported seed range (issue 30):
every row is a paired difference with a 95 % scene-bootstrap interval, and a target is met only
when the interval's lower bound clears it. Everything is scored through `scoring.api.Scorer` on
the `world` profile (the shipped checkpoints, the normal loading code), English, on the test
range (from 1,000,000) or outside all ranges (from 2,000,000); `scoring.world.splits` refuses a
range that overlaps train or validation, and `--choose` runs on validation instead, to choose.

    python benchmarks/bench_finetune.py --first-seed 1000000 --scenes 300 [--profile world] [--json out.json] [--md out.md]

Rows (target in brackets):
- SPECS vs CLIP-S on long captions, raw cosine of each metric's own embeddings (no clipping, no
  scale, where ties would count as failures): (SR_pos + SR_neg)/2 [+10 points], SR_neg [+5],
  SR_pos (reported); within-scene pairwise accuracy on long captions with content errors
  [+10 points]; short-caption tau_c against the annotators [not lower by more than 0.02];
- PAC-S vs CLIP-S: short-caption tau_c [+0.02], tau_c over all captions [not lower by more than 0.01];
- UMIC vs UMIC-C: pairwise accuracy on UMIC's four negative kinds [+5 points], on the world's
  content errors (never trained on; reported); UMIC vs CLIP-S: tau_c over all captions [>= 0].
PR-MCS is measured by `bench_prmcs.py`, CapLens-R by `bench_ratings.py`. The tau_c table beside
the rows gives the oracle's ceiling and the annotators' agreement with each other. Training wall
times come from each checkpoint's training.json.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from world_protocol import protocol_parser, run_and_write  # noqa: E402  (beside this script)

LANG = "en"  # the paper metrics' world checkpoints are English models
FINE_TUNED = ("PR-MCS", "SPECS", "PAC-S", "UMIC-C", "UMIC", "CapLens-R")  # metrics with a training.json
METRICS = ["CLIP-S", "PAC-S", "SPECS", "UMIC-C", "UMIC"]
# row -> (metric, its base, caption style, target: the difference's lower bound must reach it)
TAU_ROWS = {"SPECS tau_c, short captions": ("SPECS", "CLIP-S", "short", -0.02),
            "PAC-S tau_c, short captions": ("PAC-S", "CLIP-S", "short", 0.02),
            "PAC-S tau_c, all captions": ("PAC-S", "CLIP-S", "all", -0.01),
            "UMIC tau_c, all captions": ("UMIC", "CLIP-S", "all", 0.0)}
SPECIFICITY_TARGETS = {"mean": 10.0, "SR_neg": 5.0, "SR_pos": None}
CONTENT_TARGET = 10.0  # SPECS over CLIP-S, pairwise accuracy on long captions with content errors
UMIC_TARGET = 5.0  # UMIC over UMIC-C, pairwise accuracy on UMIC's four negative kinds


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


def group_scenes(groups: list[dict]) -> np.ndarray:
    """The scene of each UMIC group, the bootstrap's cluster: a scene has a group for its short
    caption and, with three objects or more, one for its long caption."""
    return np.array([g["image"] for g in groups])


def pairwise_correct_table(scorer, metric, groups, image_of) -> np.ndarray:
    """(groups, negatives): 1 where the positive caption scores above that negative (ties 0.5)."""
    from scoring.analysis.pairwise import pairwise_correct

    images = [image_of[g["image"]] for g in groups for _ in range(1 + len(g["negatives"]))]
    texts = [t for g in groups for t in [g["positive"], *g["negatives"]]]
    values = _scores(scorer, metric, images, texts).reshape(len(groups), -1)
    return pairwise_correct(np.repeat(values[:, :1], values.shape[1] - 1, 1), values[:, 1:]).astype(float)


def raw_cosines(scorer, metric, images, texts: dict[str, list[str]]) -> dict[str, np.ndarray]:
    """cos(image, prefix + text) in the metric's own embedding space, before clipping and
    scaling, for each list of `texts` against the same `images` (encoded once)."""
    spec = scorer.registry.metrics[scorer.canonical_name(metric)]
    image = np.asarray(scorer.image_embeddings(images, spec.backbone), np.float64)
    return {key: np.sum(image * np.asarray(scorer.text_embeddings(column, spec.backbone, prefix=spec.prefix or ""),
                                           np.float64), axis=1)
            for key, column in texts.items()}


def _triple(est) -> list[float]:
    return [est.value, est.low, est.high]


def _difference(after: np.ndarray, before: np.ndarray, clusters, n_boot: int) -> dict:
    from scoring.world.agreement import rate_difference

    est = rate_difference(after, before, clusters, n_boot=n_boot)
    return {"after": _triple(est["a"]), "before": _triple(est["b"]), "difference": _triple(est["difference"])}


def specificity(scorer, metric, base, triplets, image_of, n_boot: int = 1000) -> dict:
    """SR_pos, SR_neg and their mean for `metric` and `base` on raw cosine, and the differences,
    with scene-bootstrap intervals (the triplets of one image are not independent)."""
    images = [image_of[t["image"]] for t in triplets]
    scenes = np.array([t["image"] for t in triplets])
    ok = {}
    for m in (metric, base):
        cos = raw_cosines(scorer, m, images, {k: [t[k] for t in triplets] for k in ("base", "positive", "negative")})
        pos_ok, neg_ok = (cos["positive"] > cos["base"]).astype(float), (cos["negative"] < cos["base"]).astype(float)
        ok[m] = {"SR_pos": pos_ok, "SR_neg": neg_ok, "mean": (pos_ok + neg_ok) / 2}
    return {part: _difference(ok[metric][part], ok[base][part], scenes, n_boot) for part in SPECIFICITY_TARGETS} | {
        "triplets": len(triplets)}


def training_times(registry) -> dict[str, dict]:
    """Each fine-tuned metric's training, from the training.json of the checkpoint the scored
    profile loads (a `--profile` that swaps one in reports that one, not the shipped one)."""
    from scoring.training.trainer import steps_taken

    out = {}
    for metric in FINE_TUNED:
        folder = registry.backbones[registry.metrics[metric].backbone].path if metric in registry.metrics else ""
        path = Path(folder) / "training.json" if folder else None
        if path is not None and path.is_file():
            record = json.loads(path.read_text(encoding="utf-8"))
            runs = record.get("lineage", []) + [{"wall_s": record.get("wall_s"), "device": record.get("device"),
                                                 "steps": steps_taken(record)}]
            out[metric] = {"wall_s": round(sum(r["wall_s"] or 0 for r in runs), 1),
                           "device": ", ".join(dict.fromkeys(r["device"] for r in runs)),
                           "steps": sum(r["steps"] for r in runs), "runs": len(runs)}
    return out


def run(first_seed: int, scenes: int, device: str | None, n_boot: int = 1000, choose: bool = False,
        profile: str = "world") -> dict:
    from bench_ratings import score_columns

    from scoring.api import Scorer
    from scoring.world.agreement import agreement, content_error_pairs, pair_accuracy_difference, paired_difference, rating_table
    from scoring.world.render import render_scene
    from scoring.world.scene import generate_scenes
    from scoring.world.sets import scene_references
    from scoring.world.splits import check_range

    kind = check_range(first_seed, scenes, choose)
    started = time.time()
    world = generate_scenes(first_seed, scenes)
    images = {s.scene_id: render_scene(s) for s in world}
    table = rating_table(world, (LANG,))
    references = {(s.scene_id, LANG): scene_references(s, (LANG,))[LANG] for s in world}
    scorer = Scorer(profile, device)
    unavailable = score_columns(scorer, table, images, references, METRICS)
    if unavailable:
        raise RuntimeError("; ".join(f"{m} unavailable: {why}" for m, why in unavailable.items()))
    agree = agreement(table, METRICS, n_boot=n_boot)[LANG]
    tau = {row: _triple(paired_difference(table, a, b, LANG, style, n_boot=n_boot))
           for row, (a, b, style, _target) in TAU_ROWS.items()}
    pairs = content_error_pairs(table, LANG, "long")
    content = {k: _triple(v) for k, v in pair_accuracy_difference(table, pairs, "SPECS", "CLIP-S", n_boot=n_boot).items()}
    kinds = table.loc[pairs["wrong"], "errors"].to_numpy()
    by_kind = {}
    for error in sorted(set(kinds)):
        one = pairs[kinds == error]
        by_kind[error] = {"pairs": len(one)} | {
            m: v.value for m, v in pair_accuracy_difference(table, one, "SPECS", "CLIP-S", n_boot=0).items()}
    sets = _held_out_sets(world)
    image_of = {f"images/{s.scene_id}.png": images[s.scene_id] for s in world}
    umic = {}
    for name in ("umic", "umic-errors"):
        correct = {m: pairwise_correct_table(scorer, m, sets[name], image_of) for m in ("UMIC", "UMIC-C")}
        umic[name] = _difference(correct["UMIC"].mean(axis=1), correct["UMIC-C"].mean(axis=1),
                                 group_scenes(sets[name]), n_boot) | {"groups": len(sets[name])}
    return {
        "first_seed": first_seed, "scenes": scenes, "range": kind, "profile": profile, "captions": len(table),
        "agreement": {style: {k: v if isinstance(v, int) else
                              ({r: _triple(e) for r, e in v.items()} if k == "annotators" else _triple(v))
                              for k, v in entry.items()} for style, entry in agree.items()},
        "tau_differences": tau, "content_errors_long": content | {"pairs": len(pairs), "by_kind": by_kind},
        "specificity": specificity(scorer, "SPECS", "CLIP-S", sets["specs"], image_of, n_boot), "umic": umic,
        "training": training_times(scorer.registry), "wall_s": round(time.time() - started, 1),
    }


def _fmt(triple, digits: int = 3, sign: bool = True) -> str:
    value, low, high = triple
    f = f"{{:{'+' if sign else ''}.{digits}f}}"
    return f"{f.format(value)} [{f.format(low)}, {f.format(high)}]"


def _verdict(difference, target) -> str:
    if target is None:
        return "(reported)"
    return "met" if difference[1] >= target else "NOT met"


def report(r: dict) -> str:
    choose = "--choose " if r["range"].startswith("validation") else ""
    profile = r.get("profile", "world")
    option = "" if profile == "world" else f" --profile {profile}"
    last = r["first_seed"] + r["scenes"] - 1
    lines = [f"# The paper recipes' world metrics against their bases ({LANG}, 95 % scene-bootstrap intervals)", "",
             f"Profile `{profile}`, seeds {r['first_seed']}..{last} ({r['range']} range, {r['scenes']} scenes, "
             f"{r['captions']} rated candidates), `python benchmarks/bench_finetune.py {choose}--first-seed "
             f"{r['first_seed']} --scenes {r['scenes']}{option}` ({r['wall_s']:.0f} s). A target is met only when the "
             "difference's lower bound clears it.", "",
             "| claim | before | after | difference | target | verdict |", "|---|---|---|---|---|---|"]
    spec = r["specificity"]
    for part, target in SPECIFICITY_TARGETS.items():
        label = "(SR_pos+SR_neg)/2" if part == "mean" else part
        row = spec[part]
        lines.append(f"| SPECS {label}, raw cosine, long captions ({spec['triplets']} triplets) | CLIP-S "
                     f"{_fmt(row['before'], 1, False)} | {_fmt(row['after'], 1, False)} | {_fmt(row['difference'], 1)} | "
                     f"{'(reported)' if target is None else f'>= +{target:g}'} | {_verdict(row['difference'], target)} |")
    c = r["content_errors_long"]
    lines.append(f"| SPECS pairwise accuracy, long captions with content errors ({c['pairs']} pairs) | CLIP-S "
                 f"{_fmt(c['CLIP-S'], 1, False)} | {_fmt(c['SPECS'], 1, False)} | {_fmt(c['difference'], 1)} | "
                 f">= +{CONTENT_TARGET:g} | {_verdict(c['difference'], CONTENT_TARGET)} |")
    for row, (metric, base, style, target) in TAU_ROWS.items():
        d = r["tau_differences"][row]
        lines.append(f"| {row} vs the annotators | {base} {_fmt(r['agreement'][style][base])} | "
                     f"{_fmt(r['agreement'][style][metric])} | {_fmt(d)} | >= {target:+.2f} | {_verdict(d, target)} |")
    for name, label, target in (("umic", "UMIC's four negative kinds", UMIC_TARGET),
                                ("umic-errors", "the world's content errors (not trained on)", None)):
        u = r["umic"][name]
        lines.append(f"| UMIC pairwise accuracy, {label} ({u['groups']} groups) | UMIC-C {_fmt(u['before'], 1, False)} | "
                     f"{_fmt(u['after'], 1, False)} | {_fmt(u['difference'], 1)} | "
                     f"{'(reported)' if target is None else f'>= +{target:g}'} | {_verdict(u['difference'], target)} |")
    lines += ["", "SPECS and CLIP-S pairwise accuracy on long captions, by content error (%):", "",
              "| error | pairs | CLIP-S | SPECS |", "|---|---|---|---|"]
    for error, k in c["by_kind"].items():
        lines.append(f"| {error} | {k['pairs']} | {k['CLIP-S']:.1f} | {k['SPECS']:.1f} |")
    styles = list(r["agreement"])
    lines += ["", "tau_c against the annotators' mean, with the oracle's ceiling and the annotators' agreement:", "",
              "| | " + " | ".join(styles) + " |", "|---|" + "---|" * len(styles)]
    for metric in ["oracle", *METRICS]:
        label = "oracle (ceiling)" if metric == "oracle" else metric
        lines.append(f"| {label} | " + " | ".join(_fmt(r["agreement"][s][metric]) for s in styles) + " |")
    for rater in r["agreement"][styles[0]]["annotators"]:
        lines.append(f"| {rater} vs the others | " + " | ".join(_fmt(r["agreement"][s]["annotators"][rater]) for s in styles) + " |")
    lines += ["", "Training wall time (from each checkpoint's training.json):", ""]
    for metric, t in r["training"].items():
        chained = f", {t['runs']} runs each continuing the last" if t.get("runs", 1) > 1 else ""
        lines.append(f"- {metric}: {t['wall_s']} s on {t['device']} ({t['steps']} steps{chained})")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = protocol_parser(__doc__.split("\n\n")[0], langs=False)
    parser.add_argument("--from-json", type=Path, help="print the report of an earlier --json result")
    args = parser.parse_args(argv)
    if args.from_json:
        print(report(json.loads(args.from_json.read_text(encoding="utf-8"))))
        return 0
    return run_and_write("bench_finetune", args, lambda: run(
        args.first_seed, args.scenes, args.device, args.n_boot, args.choose, args.profile), report)


if __name__ == "__main__":
    sys.exit(main())
