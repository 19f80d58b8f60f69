"""PR-MCS against MCS on world scenes (issue 30's PR-MCS rows), every figure with a 95 %
scene-bootstrap interval; a target is met only when the interval's bound clears it.

    python benchmarks/bench_prmcs.py --first-seed 1000000 --scenes 300 [--langs en,de,fr,es,ja]
        [--profile world | my-world.toml] [--json out.json] [--md out.md]
    python benchmarks/bench_prmcs.py --choose --first-seed 500100 --scenes 60 --profile candidate.toml

Rows, per language:
- mean perturbation drop over the five PR-MCS operations, no-op perturbations kept as PR-MCS
  Table 7 does [>= 50 %: lower bound];
- the weakest operation's drop over the captions it changed [>= 20 %: lower bound];
- tau_c against the simulated annotators' mean rating over all captions, PR-MCS minus MCS,
  paired on the same resamples [fall <= 0.02: lower bound >= -0.02].

The range must lie outside train and validation (`scoring.world.splits`); `--choose` runs on
validation instead, to choose a checkpoint or setting, and says so.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from world_protocol import command_line, protocol_parser, run_and_write  # noqa: E402  (beside this script)

TARGET_DROP, TARGET_WEAKEST, TARGET_FALL = 50.0, 20.0, 0.02


def run(first_seed: int, scenes: int, langs, profile: str, n_boot: int, device: str | None,
        choose: bool = False) -> dict:
    from scoring.api import ScoreItem, Scorer
    from scoring.perturb.ops import PRMCS_OPS
    from scoring.world.agreement import agreement, margin_over_best, rating_table
    from scoring.world.measure import drop_estimates, perturbation_rows
    from scoring.world.render import render_scene
    from scoring.world.scene import generate_scenes
    from scoring.world.splits import check_range

    kind = check_range(first_seed, scenes, choose)
    started = time.time()
    world = generate_scenes(first_seed, scenes)
    images = [render_scene(s) for s in world]
    scorer = Scorer(profile, device)
    metrics = ("MCS", "PR-MCS")
    frame, unavailable = perturbation_rows(scorer, world, images, langs, 0, metrics)
    if unavailable:
        raise RuntimeError("; ".join(f"{m} unavailable: {why}" for m, why in unavailable.items()))
    table = rating_table(world, langs)
    by_scene = {s.scene_id: image for s, image in zip(world, images)}
    results = scorer.score([ScoreItem(by_scene[s], t, lang=lang)
                            for s, t, lang in zip(table["scene"], table["text"], table["lang"])], list(metrics))
    for metric in metrics:
        table[metric] = np.asarray(results[metric].values, dtype=float)
    tau = agreement(table, list(metrics), n_boot=n_boot)
    out = {"first_seed": first_seed, "scenes": scenes, "range": kind, "profile": profile, "langs": list(langs),
           "captions": int((frame["op"] == "original").sum()), "rated_captions": len(table), "per_lang": {}}
    for lang in langs:
        out["per_lang"][lang] = {
            "drop": {m: drop_estimates(frame, m, lang, list(PRMCS_OPS), n_boot=n_boot) for m in metrics},
            "tau_c": {m: tau[lang]["all"][m] for m in metrics},
            "tau_c_change": margin_over_best(table, "PR-MCS", ["MCS"], lang, "all", n_boot=n_boot)[1]}
    out["wall_s"] = round(time.time() - started, 1)
    return out


def _fmt(est, digits: int = 1, sign: str = "") -> str:
    return f"{est.value:{sign}.{digits}f} [{est.low:{sign}.{digits}f}, {est.high:{sign}.{digits}f}]"


def report(r: dict) -> str:
    lines = ["# PR-MCS against MCS (95 % scene-bootstrap intervals)", "",
             f"Profile `{r['profile']}`, seeds {r['first_seed']}..{r['first_seed'] + r['scenes'] - 1} ({r['range']} range, "
             f"{r['scenes']} scenes; {r['captions']} captions each perturbed five ways; {r['rated_captions']} rated "
             f"candidates), `{command_line('bench_prmcs.py', r)}` ({r['wall_s']:.0f} s).", "",
             "| language | MCS mean drop % | PR-MCS mean drop % (>= 50) | PR-MCS weakest op, changed captions (>= 20) "
             "| tau_c MCS | tau_c PR-MCS | PR-MCS minus MCS (>= -0.02) |", "|---|---|---|---|---|---|---|"]
    for lang, v in r["per_lang"].items():
        d, t = v["drop"], v["tau_c"]
        ok_drop, ok_weak = d["PR-MCS"]["mean"].low >= TARGET_DROP, d["PR-MCS"]["weakest"].low >= TARGET_WEAKEST
        ok_fall = v["tau_c_change"].low >= -TARGET_FALL
        lines.append(f"| {lang} | {_fmt(d['MCS']['mean'])} | {_fmt(d['PR-MCS']['mean'])} {'met' if ok_drop else 'not met'} "
                     f"| {d['PR-MCS']['weakest_op']} {_fmt(d['PR-MCS']['weakest'])} {'met' if ok_weak else 'not met'} "
                     f"| {_fmt(t['MCS'], 3, '+')} | {_fmt(t['PR-MCS'], 3, '+')} "
                     f"| {_fmt(v['tau_c_change'], 3, '+')} {'met' if ok_fall else 'not met'} |")
    ops = list(next(iter(r["per_lang"].values()))["drop"]["PR-MCS"]["ops"])
    lines += ["", "Drop (%) per operation over the captions it changed, MCS → PR-MCS:", "",
              "| language | " + " | ".join(ops) + " |", "|---|" + "---|" * len(ops)]
    for lang, v in r["per_lang"].items():
        cells = [f"{v['drop']['MCS']['ops'][op]['changed'].value:.1f} → {_fmt(v['drop']['PR-MCS']['ops'][op]['changed'])}"
                 for op in ops]
        lines.append(f"| {lang} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args = protocol_parser("PR-MCS against MCS on world scenes, with scene-bootstrap intervals").parse_args(argv)
    return run_and_write("bench_prmcs", args, lambda: run(
        args.first_seed, args.scenes, args.langs.split(","), args.profile, args.n_boot, args.device, args.choose), report)


if __name__ == "__main__":
    sys.exit(main())
