"""Measure a profile's models on held-out world scenes: the baseline fine-tuning has to beat.

- retrieval: text -> image Recall@1/5/10 (world-CLIP on English; MCS per language, COCO-SM
  style) with chance level k/N;
- correlation: Kendall tau_c of CLIP-S and MCS against the oracle score (and against the
  simulated annotators' mean rating), per language, over candidates with controlled errors;
- robustness: mean % change of MCS (and CLIP-S on English) under each PR-MCS perturbation
  (PR-MCS Table 7 layout: negative = the score dropped).

Everything goes through `scoring.api.Scorer`, i.e. the normal loading code of the profile.
"""
from __future__ import annotations

import random
from collections import defaultdict

import numpy as np

from scoring.analysis.correlation import cluster_bootstrap
from scoring.analysis.robustness import ORIGINAL, robustness_table
from scoring.analysis.tables import rating_mean

from .annotators import panel
from .captions import scene_captions
from .grammar import LANGUAGES
from .render import render_scene
from .sets import rating_candidates, split_scenes

MEASURE_FIRST = 0  # held-out scenes start at the split's first seed


def recall_at(similarity: np.ndarray, ks=(1, 5, 10)) -> dict[str, float]:
    """Text->image recall where query i's correct image is column i (`retrieval.recall_at_k`:
    ties count as a random order of the tied images)."""
    from scoring.analysis.retrieval import recall_at_k

    return recall_at_k(similarity, np.arange(similarity.shape[0]), ks)


def _retrieval(scorer, scenes, images, langs) -> dict:
    out = {"images": len(scenes), "chance": {f"R@{k}": min(1.0, k / len(scenes)) for k in (1, 5, 10)}}
    image_clip = scorer.image_embeddings(images, "clip")
    caps = [scene_captions(s, tuple(langs)) for s in scenes]
    long_idx = [i for i, c in enumerate(caps) if "long" in c]
    out["clip_en_short"] = recall_at(scorer.text_embeddings([c["short"]["en"].text for c in caps], "clip") @ image_clip.T)
    if long_idx:
        sub = image_clip[long_idx]
        texts = [caps[i]["long"]["en"].text for i in long_idx]
        out["clip_en_long"] = recall_at(scorer.text_embeddings(texts, "clip") @ sub.T)
        out["long_images"] = len(long_idx)
        out["long_chance"] = {f"R@{k}": min(1.0, k / len(long_idx)) for k in (1, 5, 10)}
    reason = scorer.unavailable_reason("MCS")
    if reason:
        out["mcs"] = f"unavailable: {reason}"
        return out
    text_backbone = scorer.registry.metrics["MCS"].backbone
    out["mcs_short"], out["mcs_long"] = {}, {}
    for lang in langs:
        short = scorer.text_embeddings([c["short"][lang].text for c in caps], text_backbone)
        out["mcs_short"][lang] = recall_at(short @ image_clip.T)
        if long_idx:
            long = scorer.text_embeddings([caps[i]["long"][lang].text for i in long_idx], text_backbone)
            out["mcs_long"][lang] = recall_at(long @ image_clip[long_idx].T)
    return out


def _kendall_c(x, y) -> float | None:
    from scipy.stats import kendalltau

    if len(set(x)) < 2 or len(set(y)) < 2:
        return None
    return float(kendalltau(x, y, variant="c").statistic)


def correlation(scorer, scenes, images, langs, metrics) -> dict:
    """Kendall tau_c of `metrics` against the oracle and the simulated humans, per language and
    style, over candidates with controlled errors (each with the scene's reference caption)."""
    from scoring.api import ScoreItem
    from .sets import scene_references

    raters = panel(3)
    index = {scene.scene_id: i for i, scene in enumerate(scenes)}
    rows = []  # (lang, style, candidate, oracle, human mean, image index, error kinds)
    for key, scene, style, cand, _refs in rating_candidates(list(scenes), tuple(langs)):
        human = rating_mean(np.mean([r.rate(cand, key)["overall"] for r in raters]))
        kind = "+".join(cand.errors + cand.damage) or "correct"
        rows.append((cand.caption.lang, style, cand.text, cand.oracle.score, human, index[scene.scene_id], kind))
    references = [scene_references(scene, langs) for scene in scenes]
    items = [ScoreItem(image=images[r[5]], candidate=r[2], references=references[r[5]][r[0]], lang=r[0]) for r in rows]
    results = scorer.score(items, metrics)
    out: dict = {"candidates": len(rows), "scenes": len(scenes)}
    for name, result in results.items():
        if result.unavailable:
            out[name] = f"unavailable: {result.unavailable}"
            continue
        per = {}
        for lang in langs:
            for style in ("all", "short", "long"):
                sel = [j for j, r in enumerate(rows) if r[0] == lang and (style == "all" or r[1] == style)]
                if not sel:
                    continue
                values = [result.values[j] for j in sel]
                per.setdefault(lang, {})[style] = {
                    "tau_c_oracle": _kendall_c(values, [rows[j][3] for j in sel]),
                    "tau_c_human": _kendall_c(values, [rows[j][4] for j in sel]),
                    "n": len(sel),
                }
        out[name] = per
        out.setdefault("pairwise", {})[name] = _pairwise(rows, result.values, langs)
    # Ceiling: how well the simulated annotators' mean agrees with the oracle they were drawn from.
    out["human_vs_oracle"] = {lang: _kendall_c([r[4] for r in rows if r[0] == lang], [r[3] for r in rows if r[0] == lang])
                              for lang in langs}
    return out


def _pairwise(rows, values, langs) -> dict:
    """Per language and error kind: share of (correct, erroneous) caption pairs of the same
    scene and style where the metric scores the correct one higher (ties count half)."""
    correct = {(r[0], r[5], r[1]): values[j] for j, r in enumerate(rows) if r[6] == "correct"}
    tallies: dict = defaultdict(list)
    for j, r in enumerate(rows):
        truth = correct.get((r[0], r[5], r[1]))
        if r[6] == "correct" or truth is None or values[j] is None:
            continue
        tallies[(r[0], r[6])].append(1.0 if truth > values[j] else 0.5 if truth == values[j] else 0.0)
    return {lang: {kind: round(float(np.mean(v)), 3) for (l, kind), v in sorted(tallies.items()) if l == lang}
            for lang in langs}


def perturbation_rows(scorer, scenes, images, langs, seed, metrics=("MCS", "CLIP-S")):
    """Every caption of every scene and its five PR-MCS perturbations, scored: a long frame
    (scene, item_id, lang, op, noop, then one score column per metric) and the metrics that
    could not run, with their reason. `perturbation` summarises it; `bench_prmcs` resamples
    its scenes."""
    import pandas as pd

    from scoring.api import ScoreItem
    from scoring.perturb.ops import PRMCS_OPS, perturb

    items, meta = [], []  # meta: (scene, item_id, lang, op, noop) per scored text
    for i, scene in enumerate(scenes):
        for style, per_lang in scene_captions(scene, tuple(langs)).items():
            for lang, cap in per_lang.items():
                item_id = len(items)
                items.append(ScoreItem(images[i], cap.text, lang=lang))
                meta.append((scene.scene_id, item_id, lang, ORIGINAL, False))
                for op in PRMCS_OPS:
                    p = perturb(cap.text, op, seed=seed + i, lang=lang, critical=list(cap.critical_objects))
                    items.append(ScoreItem(images[i], p.text, lang=lang))
                    meta.append((scene.scene_id, item_id, lang, op, p.noop))
    results = scorer.score(items, list(metrics))
    frame = pd.DataFrame(meta, columns=["scene", "item_id", "lang", "op", "noop"])
    unavailable = {}
    for name in metrics:
        if results[name].unavailable:
            unavailable[name] = results[name].unavailable
        else:
            frame[name] = np.asarray(results[name].values, dtype=float)
    return frame, unavailable


def perturbation(scorer, scenes, images, langs, seed, metrics=("MCS", "CLIP-S")) -> dict:
    """Mean % change of each metric under each PR-MCS operation, per language; `change_pct`
    over all captions (as PR-MCS Table 7), `effective_change_pct` without the noop ones, both
    from `scoring.analysis.robustness.robustness_table` (see `perturbation_summary`)."""
    from scoring.perturb.ops import PRMCS_OPS

    frame, unavailable = perturbation_rows(scorer, scenes, images, langs, seed, metrics)
    out: dict = {"captions": int((frame["op"] == ORIGINAL).sum())}
    for name in metrics:
        if name in unavailable:
            out[name] = f"unavailable: {unavailable[name]}"
            continue
        metric_langs = ("en",) if name in ("CLIP-S", "PAC-S") else tuple(langs)
        long = frame[["item_id", "lang", "op", "noop"]].assign(metric=name, score=frame[name])
        out[name] = perturbation_summary(long[long["lang"].isin(metric_langs)], PRMCS_OPS)
    return out


def perturbation_summary(long, ops) -> dict:
    """{lang: {op: before, after, change_pct, effective_change_pct, noop, n}} of a long score
    table (item_id, lang, metric, op, noop, score) through `robustness_table`: `change_pct`
    keeps the no-op perturbations (the caption unchanged) as PR-MCS Table 7 does;
    `effective_change_pct` drops them from both sides, comparing the changed captions with
    their own originals (as the app's and `caplens analyze robustness`'s tables do)."""
    def rounded(value, digits):
        return None if value is None or not np.isfinite(value) else round(float(value), digits)

    every = robustness_table(long.drop(columns=["noop"]), ops).set_index("lang")
    changed = long[~long["noop"].astype(bool) | (long["op"] == ORIGINAL)]
    effective = robustness_table(long, ops).set_index("lang") if (changed["op"] != ORIGINAL).any() else None
    out: dict = {}
    for lang, row in every.iterrows():
        for op in ops:
            part = long[(long["lang"] == lang) & (long["op"] == op)]
            out.setdefault(lang, {})[op] = {
                "before": rounded(row[f"{op}_original"], 4), "after": rounded(row[op], 4),
                "change_pct": rounded(row[f"{op}_change"], 2),
                "effective_change_pct": None if effective is None or lang not in effective.index
                else rounded(effective.loc[lang, f"{op}_change"], 2),
                "noop": int(part["noop"].astype(bool).sum()), "n": int(len(part))}
    return out


def drop_estimates(frame, metric: str, lang: str, ops, *, n_boot: int = 1000, seed: int = 0) -> dict:
    """Scene-bootstrap estimates of `metric`'s drop (%) in `lang`: per operation over every
    caption (`all`, no-ops kept) and over the captions it changed (`changed`), their mean over
    operations (`mean`), and the weakest operation's changed-caption drop (`weakest`, the
    operation chosen on the full range). Every resample sums whole scenes."""
    part = frame[frame["lang"] == lang]
    scenes = sorted(part["scene"].unique())
    index = {s: k for k, s in enumerate(scenes)}
    original = part[part["op"] == ORIGINAL].set_index("item_id")[metric]
    perturbed = part[part["op"] != ORIGINAL]
    # per scene and op: sums of originals and perturbed scores, over all captions and over changed ones
    sums = np.zeros((len(scenes), len(ops), 2, 3))  # [scene, op, all|changed, orig|pert|count]
    scene_of = perturbed["scene"].map(index).to_numpy()
    op_of = perturbed["op"].map(ops.index).to_numpy()
    values = np.stack([original.loc[perturbed["item_id"]].to_numpy(float), perturbed[metric].to_numpy(float),
                       np.ones(len(perturbed))], axis=1)
    changed = ~perturbed["noop"].to_numpy(bool)
    np.add.at(sums, (scene_of, op_of, 0), values)
    np.add.at(sums, (scene_of[changed], op_of[changed], 1), values[changed])

    def drops(rows: np.ndarray) -> np.ndarray:  # (ops, 2): -100 (mean pert - mean orig) / mean orig
        total = sums[rows].sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return -100.0 * (total[..., 1] - total[..., 0]) / total[..., 0]

    full = drops(np.arange(len(scenes)))
    weakest = int(np.nanargmin(full[:, 1]))
    clusters = np.arange(len(scenes))
    out = {"ops": {op: {"all": cluster_bootstrap(lambda r, o=o: drops(r)[o, 0], clusters, n_boot=n_boot, seed=seed),
                        "changed": cluster_bootstrap(lambda r, o=o: drops(r)[o, 1], clusters, n_boot=n_boot, seed=seed),
                        "changed_captions": int(sums[:, o, 1, 2].sum())}
                   for o, op in enumerate(ops)},
           "mean": cluster_bootstrap(lambda r: float(np.mean(drops(r)[:, 0])), clusters, n_boot=n_boot, seed=seed),
           "weakest_op": ops[weakest],
           "weakest": cluster_bootstrap(lambda r: drops(r)[weakest, 1], clusters, n_boot=n_boot, seed=seed)}
    return out


def measure(profile: str = "world", retrieval_scenes: int = 1000, rated_scenes: int = 60,
            perturb_scenes: int = 60, langs=LANGUAGES, seed: int = 0, device: str | None = None) -> dict:
    """All three measurements on held-out scenes (disjoint from training seeds)."""
    from scoring.api import Scorer

    if min(retrieval_scenes, rated_scenes, perturb_scenes) < 10:
        raise ValueError("measure needs at least 10 scenes per part")
    scorer = Scorer(profile, device)
    scenes = split_scenes("heldout", max(retrieval_scenes, rated_scenes, perturb_scenes))
    images = [render_scene(s) for s in scenes]
    rng = random.Random(seed)
    rated = sorted(rng.sample(range(len(scenes)), rated_scenes))
    perturbed = sorted(rng.sample(range(len(scenes)), perturb_scenes))
    return {
        "profile": profile,
        "heldout_first_seed": scenes[0].seed,
        "retrieval": _retrieval(scorer, scenes[:retrieval_scenes], images[:retrieval_scenes], langs),
        "correlation": correlation(scorer, [scenes[i] for i in rated], [images[i] for i in rated], langs,
                                    ["CLIP-S", "MCS"]),
        "perturbation": perturbation(scorer, [scenes[i] for i in perturbed], [images[i] for i in perturbed],
                                      langs, seed),
    }


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def report(result: dict) -> str:
    """Markdown tables of a `measure` result."""
    lines = [f"# World measurement (profile {result['profile']}, held-out seeds from {result['heldout_first_seed']})", ""]
    r = result["retrieval"]
    lines += ["## Text -> image retrieval", "", "| model | queries | images | R@1 | R@5 | R@10 |", "|---|---|---|---|---|---|"]
    lines.append(f"| chance | - | {r['images']} | " + " | ".join(_fmt(r["chance"][k]) for k in ("R@1", "R@5", "R@10")) + " |")
    lines.append(f"| world-CLIP | en short | {r['images']} | " + " | ".join(_fmt(r["clip_en_short"][k]) for k in ("R@1", "R@5", "R@10")) + " |")
    if "clip_en_long" in r:
        lines.append(f"| chance | - | {r['long_images']} | " + " | ".join(_fmt(r["long_chance"][k]) for k in ("R@1", "R@5", "R@10")) + " |")
        lines.append(f"| world-CLIP | en long | {r['long_images']} | " + " | ".join(_fmt(r["clip_en_long"][k]) for k in ("R@1", "R@5", "R@10")) + " |")
    if isinstance(r.get("mcs_short"), dict):
        for style in ("short", "long"):
            for lang, rec in r[f"mcs_{style}"].items():
                n = r["images"] if style == "short" else r["long_images"]
                lines.append(f"| MCS | {lang} {style} | {n} | " + " | ".join(_fmt(rec[k]) for k in ("R@1", "R@5", "R@10")) + " |")
    c = result["correlation"]
    lines += ["", f"## Kendall tau_c against the oracle ({c['candidates']} candidates, {c['scenes']} scenes)", "",
              "| metric | lang | all | short | long | all vs simulated humans |", "|---|---|---|---|---|---|"]
    for name in ("CLIP-S", "MCS"):
        if isinstance(c.get(name), str):
            lines.append(f"| {name} | - | {c[name]} | | | |")
            continue
        for lang, per in c[name].items():
            lines.append(f"| {name} | {lang} | " + " | ".join(_fmt(per.get(s, {}).get("tau_c_oracle")) for s in ("all", "short", "long"))
                         + f" | {_fmt(per['all']['tau_c_human'])} |")
    lines.append("| simulated humans | " + ", ".join(f"{k} {_fmt(v)}" for k, v in c["human_vs_oracle"].items()) + " | | | | |")
    pairwise = c.get("pairwise", {})
    kinds = sorted({k for per in pairwise.values() for lang in per.values() for k in lang})
    if kinds:
        lines += ["", "## Pairwise accuracy: correct caption scored above its erroneous version", "",
                  "| metric | lang | " + " | ".join(kinds) + " |", "|---|---|" + "---|" * len(kinds)]
        for name, per in pairwise.items():
            for lang, accs in per.items():
                lines.append(f"| {name} | {lang} | " + " | ".join(_fmt(accs.get(k)) for k in kinds) + " |")
    p = result["perturbation"]
    lines += ["", f"## Score change under PR-MCS perturbations, % ({p['captions']} captions)", ""]
    from scoring.perturb.ops import PRMCS_OPS

    lines += ["| metric | lang | " + " | ".join(PRMCS_OPS) + " |", "|---|---|" + "---|" * len(PRMCS_OPS)]
    for name in ("MCS", "CLIP-S"):
        if isinstance(p.get(name), str):
            lines.append(f"| {name} | - | {p[name]} |")
            continue
        for lang, per in p.get(name, {}).items():
            lines.append(f"| {name} | {lang} | " + " | ".join(
                "n/a" if per[op]["change_pct"] is None else f"{per[op]['change_pct']:+.2f}" for op in PRMCS_OPS) + " |")
    return "\n".join(lines) + "\n"
