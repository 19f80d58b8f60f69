"""World data sets written in the formats the rest of CapLens reads.

Splits use disjoint seed ranges: training scenes never appear in held-out sets.

- scoring inputs: the CLIPScore command-line JSON (`{"image_id": "candidate"}`,
  `{"image_id": ["ref", ...]}`) plus `images/<image_id>.png`;
- human-rated collection: `ratings.csv` / `ratings.jsonl`, one row per (candidate, annotator);
- fine-tuning sets (JSONL, the row fields of `annotation.transfer.finetune_sets`): MCS teacher pairs,
  PR-MCS perturbation triplets, SPECS detail-unit triplets, UMIC positive + four
  controlled-error negatives, PAC-S pairs with generated caption and re-rendered image;
- retrieval split in the COCO-SM spirit: `meta/world.json` with one caption per language per image.
"""
from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from scoring.csv_safe import write_csv

from .annotators import panel
from .captions import describe_short, realise, scene_captions
from .errors import Candidate, candidates_for
from .grammar import LANGUAGES
from .render import render_scene
from .scene import Scene, generate_scenes
from .splits import split_range

def split_scenes(split: str, count: int, skip: int = 0) -> list[Scene]:
    """`count` scenes of a seed range (`scoring.world.splits`), after its first `skip`: two
    models trained on one range, one reading the other's outputs, can then see disjoint scenes."""
    seeds = split_range(split)
    if count < 1:
        raise ValueError("a split needs at least one scene")
    if skip < 0:
        raise ValueError("skip counts scenes and cannot be negative")
    if skip + count > seeds.stop - seeds.first:
        raise ValueError(f"the {seeds.name} range holds {seeds.stop - seeds.first} scenes, not {skip} + {count}")
    return generate_scenes(seeds.first + skip, count)


def _write_images(out: Path, scenes: list[Scene], size: int) -> dict[str, str]:
    images = out / "images"
    images.mkdir(parents=True, exist_ok=True)
    paths = {}
    for scene in scenes:
        path = images / f"{scene.scene_id}.png"
        render_scene(scene, size).save(path)
        paths[scene.scene_id] = f"images/{path.name}"
    return paths


def _dump_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")


def _dump_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_scoring_inputs(out: Path, scenes: list[Scene], langs=LANGUAGES, size: int = 128) -> None:
    """Per language: candidates_<lang>.json (short caption) and references_<lang>.json (the long one and another short one)."""
    _write_images(out, scenes, size)
    for lang in langs:
        candidates, references = {}, {}
        for scene in scenes:
            caps = scene_captions(scene, (lang,))
            candidates[scene.scene_id] = caps["short"][lang].text
            other = realise(describe_short(scene, random.Random(scene.seed + 1)), lang).text
            references[scene.scene_id] = [other] + ([caps["long"][lang].text] if "long" in caps else [])
        _dump_json(out / f"candidates_{lang}.json", candidates)
        _dump_json(out / f"references_{lang}.json", references)


def scene_references(scene: Scene, langs=LANGUAGES) -> dict[str, list[str]]:
    """Per language, a reference caption: another short description of the scene (the one the
    scoring inputs use), so reference-based metrics see a human-like reference, not the candidate."""
    other = describe_short(scene, random.Random(scene.seed + 1))
    return {lang: [realise(other, lang).text] for lang in langs}


def rating_candidates(scenes: list[Scene], langs=LANGUAGES, styles=("short", "long")) -> list[tuple[str, Scene, str, Candidate, list[str]]]:
    """What a rating study shows: (caption key, scene, style, candidate, references) for every
    candidate caption of every scene in every language, in a fixed order. The key (which seeds
    the simulated ratings) numbers a caption among those of its own language, so its ratings do
    not depend on which other languages were asked for."""
    out = []
    for scene in scenes:
        caps = scene_captions(scene, ("en",))
        references = scene_references(scene, langs)
        for style in styles:
            if style not in caps:
                continue
            numbered: dict[str, int] = defaultdict(int)
            for cand in candidates_for(scene, caps[style]["en"].description, tuple(langs)):
                lang = cand.caption.lang
                key = f"{scene.scene_id}-{style}-{lang}-{numbered[lang]}"
                numbered[lang] += 1
                out.append((key, scene, style, cand, references[lang]))
    return out


def rated_rows(scenes: list[Scene], langs=LANGUAGES, annotators: int = 3, styles=("short", "long")) -> list[dict]:
    """One row per candidate and annotator: caption, its errors, oracle and the simulated rating."""
    raters = panel(annotators)
    rows = []
    for key, scene, _style, cand, references in rating_candidates(scenes, langs, styles):
        base = {"caption_id": key, "image_id": scene.scene_id, **cand.to_dict(), "references": references}
        for rater in raters:
            rows.append({**base, **rater.rate(cand, key)})
    return rows


def _rated_part(out: Path, scenes: list[Scene], langs, annotators: int, size: int) -> list[dict]:
    paths = _write_images(out, scenes, size)
    rows = rated_rows(scenes, langs, annotators)
    for row in rows:
        row["image"] = paths[row["image_id"]]
    return rows


RATED_PART = 250  # scenes per worker task when a rated collection is written in parallel


def write_rated_collection(out: Path, scenes: list[Scene], langs=LANGUAGES, annotators: int = 3,
                           size: int = 128, workers: int = 1) -> int:
    """`ratings.jsonl`/`ratings.csv` and the images of `scenes`. With `workers` > 1 the scenes
    are rendered and rated in that many processes; every scene and rating is seeded by itself,
    so the files are the same (a 3,000-scene set takes about 90 s in one process)."""
    parts = [scenes[i:i + RATED_PART] for i in range(0, len(scenes), RATED_PART)]
    if workers > 1 and len(parts) > 1:
        from concurrent.futures import ProcessPoolExecutor
        from functools import partial

        with ProcessPoolExecutor(min(workers, len(parts))) as pool:
            done = pool.map(partial(_rated_part, out, langs=langs, annotators=annotators, size=size), parts)
            rows = [row for part in done for row in part]
    else:
        rows = _rated_part(out, scenes, langs, annotators, size)
    _dump_jsonl(out / "ratings.jsonl", rows)
    write_csv(out / "ratings.csv", list(rows[0]), rows)
    return len(rows)


SPECS_SHUFFLE = 0.9  # SPECS: negative detail units are token-shuffled with this probability
UMIC_NEGATIVES = 4


class _Without(Sequence):
    """`items` without the positions in `excluded` (sorted), indexed like the filtered list
    but without building it: what `random.choice` needs (len and indexing)."""

    def __init__(self, items: list[str], excluded: list[int]):
        self.items, self.excluded = items, excluded

    def __len__(self) -> int:
        return len(self.items) - len(self.excluded)

    def __getitem__(self, k: int) -> str:
        if not 0 <= k < len(self):
            raise IndexError(k)
        for position in self.excluded:  # each excluded position at or before k shifts it one on
            if position > k:
                break
            k += 1
        return self.items[k]


class UnitPool:
    """The detail units of every scene's captions in one language, where SPECS negatives come
    from. `foreign` leaves out the scene's own units and any unit equal to one of the caption's
    (true there): in time proportional to what it leaves out, so that writing the sets stays
    linear in the number of scenes instead of rescanning the whole pool for every caption."""

    def __init__(self, entries: list[tuple[str, str]]):
        self.units = [unit for _, unit in entries]
        self._by_scene: dict[str, list[int]] = defaultdict(list)
        self._by_unit: dict[str, list[int]] = defaultdict(list)
        for position, (scene_id, unit) in enumerate(entries):
            self._by_scene[scene_id].append(position)
            self._by_unit[unit].append(position)

    def foreign(self, scene_id: str, units: Sequence[str]) -> Sequence[str]:
        excluded = set(self._by_scene.get(scene_id, ()))
        for unit in set(units):
            excluded.update(self._by_unit.get(unit, ()))
        return _Without(self.units, sorted(excluded))


def _shuffled_unit(unit: str, lang: str, rng: random.Random, shuffle: float = SPECS_SHUFFLE) -> tuple[str, bool]:
    """A detail unit from another caption, token-shuffled with probability `shuffle` (SPECS §3: 0.9)."""
    from scoring.perturb.tokenize import detokenize, tokenize

    lead = unit[: len(unit) - len(unit.lstrip())]
    tokens = tokenize(unit.strip(), lang)
    if len(tokens) < 2 or rng.random() >= shuffle:
        return unit, False
    rng.shuffle(tokens)
    return lead + detokenize(tokens, lang), True


def write_finetune_sets(out: Path, scenes: list[Scene], langs=LANGUAGES, size: int = 128, seed: int = 0,
                        specs_shuffle: float = SPECS_SHUFFLE,
                        embed_images: Callable[[list[Path]], np.ndarray] | None = None) -> dict[str, int]:
    """Fine-tuning sets with the row fields of `annotation.transfer.finetune_sets`, plus the world's ground truth.

    teacher: MCS teacher learning pairs (caption in a language, its English source);
    prmcs: PR-MCS triplets (original, perturbed, operation) from scoring.perturb.ops, each with a
    caption of the original's style with one content error (`with_error`, "" where none applies:
    what PR-MCS's `options.anchor_on` can hold besides the original);
    specs: SPECS triplets (base c_j, c_j + d+, c_j + d-) on the world's exact detail units (d- a
    unit of another scene, token-shuffled with probability `specs_shuffle`, the paper's 0.9), with
    the full caption they come from (`caption`), the scene's short caption (`short_caption`) and
    one of its short captions with a content error (`short_with_error`, "" where none applies);
    umic: one positive (each of the scene's captions, short and long) and UMIC's four negatives (§3.2: keyword substitution,
    another image's caption, repetition & removal, word-order permutation), as UMIC trains; with
    `embed_images` (the written image files -> one embedding row each), the other image is half of
    the time one of the three most similar by those embeddings, the paper's hard negatives, and
    otherwise a random one (always random without it);
    umic-errors: the same positive with four controlled content errors (another scene's caption
    where fewer apply), negatives of another kind than training's; pacs: caption, another description of the scene as generated
    text and a re-rendered image as generated image, and the scene's long caption ("" without one:
    what PAC-S's `loss.anchor` holds).
    """
    from scoring.perturb.ops import PRMCS_OPS, perturb

    rng = random.Random(seed)
    paths = _write_images(out, scenes, size)
    variants = out / "images_generated"
    variants.mkdir(parents=True, exist_ok=True)
    teacher, prmcs, specs, umic_errors, pacs = [], [], [], [], []
    all_caps = {scene.scene_id: scene_captions(scene, tuple(langs)) for scene in scenes}
    ids = list(all_caps)
    unit_pool = {lang: UnitPool([(sid, u) for sid, caps in all_caps.items() for st in caps.values()
                                 for u in st[lang].units[1:]]) for lang in langs}
    for k, scene in enumerate(scenes):
        image, caps = paths[scene.scene_id], all_caps[scene.scene_id]
        # The scene's short caption with one content error, per language (the same errors in each).
        short_erred = {lang: candidates_for(scene, cap.description, (lang,), seed=seed, damaged=False)[1:]
                       for lang, cap in caps["short"].items()}
        other_caps = all_caps[ids[(k + 1) % len(ids)]] if len(ids) > 1 else None
        variant = variants / f"{scene.scene_id}-v1.png"
        render_scene(scene, size, variant=1).save(variant)
        for style, per_lang in caps.items():
            english = per_lang["en"].text if "en" in per_lang else None
            for lang, cap in per_lang.items():
                erred = short_erred[lang] if style == "short" else candidates_for(
                    scene, cap.description, (lang,), seed=seed, damaged=False)[1:]
                teacher.append({"image": image, "language": lang, "caption": cap.text, "english": english,
                                "style": style})
                for n, op in enumerate(PRMCS_OPS):
                    p = perturb(cap.text, op, seed=seed + scene.seed + n, lang=lang, critical=list(cap.critical_objects))
                    if not p.noop:
                        prmcs.append({"image": image, "original": cap.text, "perturbed": p.text, "language": lang,
                                      "operation": op, "p": p.p, "seed": p.seed,
                                      "critical_objects": list(cap.critical_objects),
                                      "with_error": random.Random(f"{scene.seed}-{lang}-{style}-{n}").choice(
                                          erred).text if erred else ""})
                # A unit that also occurs in this caption may be true here: not a negative.
                foreign = unit_pool[lang].foreign(scene.scene_id, cap.units) if style == "long" else ()
                if foreign:
                    for j in range(1, len(cap.units)):
                        base = "".join(cap.units[:j])
                        negative, shuffled = _shuffled_unit(rng.choice(foreign), lang, rng, specs_shuffle)
                        specs.append({"image": image, "base": base, "positive": base + cap.units[j],
                                      "negative": base + negative, "language": lang, "j": j,
                                      "negative_shuffled": shuffled, "caption": cap.text,
                                      "short_caption": caps["short"][lang].text,
                                      "short_with_error": random.Random(f"{scene.seed}-{lang}-{j}").choice(
                                          short_erred[lang]).text if short_erred[lang] else ""})
        short = caps["short"]
        for lang, cap in short.items():
            negatives = [(c.text, c.errors[0]) for c in short_erred[lang]][:UMIC_NEGATIVES]
            while len(negatives) < UMIC_NEGATIVES and other_caps is not None:
                negatives.append((other_caps["short"][lang].text if len(negatives) % 2 else
                                  other_caps.get("long", other_caps["short"])[lang].text, "random"))
            umic_errors.append({"image": image, "positive": cap.text, "negatives": [n[0] for n in negatives],
                                "negative_kinds": [n[1] for n in negatives], "language": lang})
            alternative = realise(describe_short(scene, random.Random(scene.seed + 1)), lang).text
            pacs.append({"image": image, "caption": cap.text, "language": lang, "generated_caption": alternative,
                         "generated_by": "world grammar (another description of the scene)",
                         "generated_image": f"images_generated/{variant.name}",
                         "long_caption": caps["long"][lang].text if "long" in caps else ""})
    embeddings = embed_images([out / paths[s.scene_id] for s in scenes]) if embed_images is not None else None
    umic = _umic_paper_groups(scenes, all_caps, paths, langs, seed, embeddings)
    sets = {"teacher": teacher, "prmcs": prmcs, "specs": specs, "umic": umic, "umic-errors": umic_errors, "pacs": pacs}
    for name, rows in sets.items():
        _dump_jsonl(out / f"{name}.jsonl", rows)
    return {name: len(rows) for name, rows in sets.items()}


def _umic_paper_groups(scenes, all_caps, paths, langs, seed: int, embeddings: np.ndarray | None = None) -> list[dict]:
    """UMIC groups with the paper's four negative kinds (`scoring.perturb.negatives`); a
    positive whose perturbation cannot change it (a no-op) is left out. `embeddings` (one row
    per scene, in order) mine the hard negatives."""
    from scoring.perturb.negatives import umic_negatives
    from scoring.perturb.ops import PosVocabulary

    groups = []
    for lang in langs:
        # Every reference caption of a scene is a positive, as UMIC takes every COCO reference:
        # here the short one and, for scenes of three or more objects, the long one.
        positives = [(s.scene_id, style, caption[lang].text) for s in scenes
                     for style, caption in all_caps[s.scene_id].items()]
        by_image: dict[str, list[str]] = {}
        for sid, _, text in positives:
            by_image.setdefault(sid, []).append(text)
        vocabulary = PosVocabulary([text for _, _, text in positives], lang)
        for k, (sid, style, text) in enumerate(positives):
            negatives = umic_negatives(sid, text, by_image, lang=lang, seed=seed + k, corpus=vocabulary,
                                       **({} if embeddings is None else
                                          {"image_ids": [s.scene_id for s in scenes], "embeddings": embeddings}))
            if len(by_image) < 2 or any(n.noop or n.text == text for n in negatives):
                continue
            groups.append({"image": paths[sid], "positive": text, "negatives": [n.text for n in negatives],
                           "negative_kinds": [n.kind for n in negatives], "language": lang, "style": style,
                           "short_caption": all_caps[sid]["short"][lang].text})
    return groups


def write_retrieval_split(out: Path, scenes: list[Scene], langs=LANGUAGES, size: int = 128) -> int:
    """COCO-SM-style: one image per scene, its caption (same content) in every language."""
    paths = _write_images(out, scenes, size)
    entries = []
    for scene in scenes:
        caps = scene_captions(scene, tuple(langs))
        entries.append({"image_id": scene.scene_id, "filename": paths[scene.scene_id],
                        "captions": {lang: [caps["short"][lang].text] + ([caps["long"][lang].text] if "long" in caps else [])
                                     for lang in langs}})
    _dump_json(out / "meta" / "world.json", {"languages": list(langs), "images": entries})
    return len(entries)


def write_all(out: Path, split: str = "heldout", count: int = 200, langs=LANGUAGES, size: int = 128) -> dict:
    """Every set for `count` scenes of `split` under `out`."""
    out = Path(out)
    scenes = split_scenes(split, count)
    _dump_jsonl(out / "scenes.jsonl", [s.to_dict() for s in scenes])
    write_scoring_inputs(out / "scoring", scenes, langs, size)
    summary = {"scenes": len(scenes), "rated_rows": write_rated_collection(out / "rated", scenes, langs, size=size)}
    summary.update(write_finetune_sets(out / "finetune", scenes, langs, size))
    summary["retrieval_images"] = write_retrieval_split(out / "retrieval", scenes, langs, size)
    return summary
