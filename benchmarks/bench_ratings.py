"""Agreement of every world metric with the simulated annotators, within each caption style and
language, on a reported seed range, with the oracle's ceiling and the annotators' agreement
with each other beside it (issue 30).  Every figure carries a 95 % scene-bootstrap interval; a
target is met only when the interval's lower bound clears it.

    python benchmarks/bench_ratings.py --first-seed 1000000 --scenes 300 [--langs en,de,fr,es,ja]
        [--profile world | my-world.toml] [--metrics CLIP-S,MCS,...] [--json out.json] [--md out.md]

The range must not overlap the train or validation ranges (`scoring.world.splits`); seeds from
2,000,000 are outside all three and re-check a claim. `--choose` runs on the validation range
instead, to choose between checkpoints or settings; its output says so and is not a result.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from world_protocol import command_line, protocol_parser, run_and_write  # noqa: E402  (beside this script)

METRICS = ["CLIP-S", "RefCLIP-S", "PAC-S", "RefPAC-S", "MCS", "PR-MCS", "SPECS", "UMIC-C", "UMIC", "CapLens-R"]
TARGETS = {"short": 0.65, "long": 0.40, "all": 0.70}  # CapLens-R tau_c, issue 30
MARGIN = 0.15  # CapLens-R over the best other metric within each style


def score_columns(scorer, table, images: dict, references: dict, metrics) -> dict[str, str]:
    """Adds one column per metric; returns the metrics that could not run, with the reason."""
    from scoring.api import ScoreItem

    items = [ScoreItem(images[s], t, references[(s, lang)], lang)
             for s, t, lang in zip(table["scene"], table["text"], table["lang"])]
    unavailable = {}
    results = scorer.score(items, list(metrics))
    for metric in metrics:
        result = results[metric]
        if result.unavailable:
            unavailable[metric] = result.unavailable
        else:
            table[metric] = np.asarray(result.values, dtype=float)
    return unavailable


def run(first_seed: int, scenes: int, langs, profile: str, metrics, n_boot: int, device: str | None,
        choose: bool = False) -> dict:
    from scoring.api import Scorer
    from scoring.world.agreement import agreement, margin_over_best, rating_table
    from scoring.world.render import render_scene
    from scoring.world.scene import generate_scenes
    from scoring.world.sets import scene_references
    from scoring.world.splits import check_range

    kind = check_range(first_seed, scenes, choose)
    started = time.time()
    world = generate_scenes(first_seed, scenes)
    table = rating_table(world, langs)
    images = {s.scene_id: render_scene(s) for s in world}
    references = {(s.scene_id, lang): refs for s in world for lang, refs in scene_references(s, langs).items()}
    scorer = Scorer(profile, device)
    unavailable = score_columns(scorer, table, images, references, metrics)
    scored = [m for m in metrics if m in table]
    result = agreement(table, scored, n_boot=n_boot)
    margins = {}
    if "CapLens-R" in scored and len(scored) > 1:
        others = [m for m in scored if m != "CapLens-R"]
        for lang in result:
            for style in result[lang]:
                best, est = margin_over_best(table, "CapLens-R", others, lang, style, n_boot=n_boot)
                margins.setdefault(lang, {})[style] = {"best_other": best, "margin": est}
    return {"first_seed": first_seed, "scenes": scenes, "range": kind, "profile": profile, "langs": list(langs),
            "captions": len(table), "unavailable": unavailable, "agreement": result, "margins": margins,
            "wall_s": round(time.time() - started, 1)}


def _fmt(est) -> str:
    return f"{est.value:+.3f} [{est.low:+.3f}, {est.high:+.3f}]"


def report(r: dict) -> str:
    lines = ["# Agreement with the simulated annotators (tau_c, 95 % scene-bootstrap intervals)", "",
             f"Profile `{r['profile']}`, seeds {r['first_seed']}..{r['first_seed'] + r['scenes'] - 1} "
             f"({r['range']} range, {r['scenes']} scenes, {r['captions']} candidates), "
             f"`{command_line('bench_ratings.py', r)}` ({r['wall_s']:.0f} s).", ""]
    for metric, reason in r["unavailable"].items():
        lines.append(f"- {metric}: unavailable: {reason}")
    for lang, styles in r["agreement"].items():
        metrics = [k for k in next(iter(styles.values())) if k not in ("captions", "scenes", "annotators")]
        lines += ["", f"## {lang}", "", "| | " + " | ".join(styles) + " |", "|---|" + "---|" * len(styles)]
        for metric in metrics:
            label = "oracle (ceiling)" if metric == "oracle" else metric
            lines.append(f"| {label} | " + " | ".join(_fmt(styles[s][metric]) for s in styles) + " |")
        for rater in next(iter(styles.values()))["annotators"]:
            lines.append(f"| {rater} vs the others | " + " | ".join(_fmt(styles[s]['annotators'][rater]) for s in styles) + " |")
        if lang in r["margins"]:
            lines.append("| CapLens-R minus the best other | " + " | ".join(
                f"{_fmt(r['margins'][lang][s]['margin'])} ({r['margins'][lang][s]['best_other']})" for s in styles) + " |")
        if "CapLens-R" in metrics:
            verdicts = []
            for s in styles:
                est = styles[s]["CapLens-R"]
                verdicts.append(f"{s} >= {TARGETS[s]}: {'met' if est.low >= TARGETS[s] else 'not met'}")
                if lang in r["margins"]:
                    m = r["margins"][lang][s]["margin"]
                    verdicts.append(f"{s} margin >= +{MARGIN}: {'met' if m.low >= MARGIN else 'not met'}")
            lines += ["", "CapLens-R targets (lower bound must clear): " + "; ".join(verdicts) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = protocol_parser(__doc__.split("\n\n")[0], metrics=",".join(METRICS))
    args = parser.parse_args(argv)
    return run_and_write("bench_ratings", args, lambda: run(
        args.first_seed, args.scenes, tuple(args.langs.split(",")), args.profile, args.metrics.split(","),
        args.n_boot, args.device, args.choose), report)


if __name__ == "__main__":
    raise SystemExit(main())
