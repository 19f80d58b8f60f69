"""The world as three benchmarks in the published file formats, so that `caplens analyze
reproduce world` runs the same loaders, scoring and protocols as the real sets, offline.

- `ratings/world_test.csv` + `ratings/images/`: the Polaris / Nebula CSV layout (mt, refs,
  score, imgid). Each English candidate of a scene (the correct short and long captions,
  their content errors and grammatical damage) with the mean overall rating of a panel of
  simulated annotators (`annotators.panel`), as Polaris and Nebula publish one aggregated
  score per caption.
- `pascal/pair_pascal.mat` + `consensus_pascal.mat` + `pascal/images/`: Pascal-50S-style pairs,
  four per scene: HC two correct captions, HI the correct caption against another scene's
  correct caption, HM the correct caption against one with a content error, MM two captions
  with different content errors. Every annotator of the panel judges each pair once (the
  caption it rates higher; a tie by a seeded coin), as in consensus_pascal.mat.
- `foil/foilv1.0_test_2017.json` + `foil/images/`: FOIL-style pairs, the correct short caption
  against the same caption with one object's shape noun replaced (the world's `shape` error,
  FOIL's noun swap), with another short description of the scene as the image's other correct caption (its
  reference).
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from scoring.csv_safe import write_csv

from .annotators import panel
from .captions import describe_short, realise, scene_captions
from .errors import Candidate, Oracle, candidates_for, oracle_score
from .render import render_scene
from .scene import Scene
from .sets import scene_references, split_scenes

BENCHMARK_FOLDERS = {"world-ratings": "ratings", "world-pascal": "pascal", "world-foil": "foil"}


def _images(folder: Path, scenes: list[Scene], size: int) -> dict[str, str]:
    (folder / "images").mkdir(parents=True, exist_ok=True)
    names = {}
    for scene in scenes:
        name = f"{scene.scene_id}.png"
        render_scene(scene, size).save(folder / "images" / name)
        names[scene.scene_id] = name
    return names


def _english_candidates(scene: Scene) -> list[Candidate]:
    caps = scene_captions(scene, ("en",))
    out = []
    for style in ("short", "long"):
        if style in caps:
            out += candidates_for(scene, caps[style]["en"].description, ("en",))
    return out


def _mean_rating(candidate: Candidate, key: str, raters) -> float:
    return round(float(np.mean([rater.rate(candidate, key)["overall"] for rater in raters])), 4)


def write_ratings(folder: Path, scenes: list[Scene], annotators: int, size: int) -> int:
    names = _images(folder, scenes, size)
    raters = panel(annotators)
    rows = []
    for scene in scenes:
        references = scene_references(scene, ("en",))["en"]
        for k, candidate in enumerate(_english_candidates(scene)):
            key = f"{scene.scene_id}-en-{k}"
            rows.append({"mt": candidate.text, "refs": repr(references), "score": _mean_rating(candidate, key, raters),
                         "imgid": names[scene.scene_id]})
    write_csv(folder / "world_test.csv", ["mt", "refs", "score", "imgid"], rows)
    return len(rows)


def _other_scene_caption(scene: Scene, other: Scene) -> Candidate:
    """Another scene's correct short caption, judged for `scene`: it describes none of its
    objects, so its oracle is 0 (Pascal-50S HI: a caption written for another image)."""
    caption = scene_captions(other, ("en",))["short"]["en"]
    return Candidate(scene.scene_id, caption, ("other-image",), Oracle(0.0, 0, len(caption.units), 0.0, 0))


def _pascal_pairs(scene: Scene, other: Scene) -> list[tuple[str, Candidate, Candidate]]:
    short = scene_captions(scene, ("en",))["short"]["en"]
    candidates = candidates_for(scene, short.description, ("en",), damaged=False)
    correct, erred = candidates[0], candidates[1:]
    caps = scene_captions(scene, ("en",))
    if "long" in caps:
        second = caps["long"]["en"]
    else:  # another short description of the same scene
        second = realise(describe_short(scene, random.Random(scene.seed + 2)), "en")
    pairs = [("HI", correct, _other_scene_caption(scene, other))]
    if second.text != correct.text:  # a one-object scene may have a single correct short caption
        pairs.insert(0, ("HC", correct, Candidate(scene.scene_id, second, (), oracle_score(scene, second))))
    if erred:
        pairs.append(("HM", correct, erred[0]))
    if len(erred) >= 2:
        pairs.append(("MM", erred[0], erred[1]))
    return pairs


def write_pascal(folder: Path, scenes: list[Scene], annotators: int, size: int) -> int:
    from scipy.io import savemat

    names = _images(folder, scenes, size)
    raters = panel(annotators)
    entries, categories, judgements = [], [], []
    codes = {"HC": 1, "HI": 2, "HM": 3, "MM": 4}
    for index, scene in enumerate(scenes):
        reference = scene_references(scene, ("en",))["en"][0]
        for category, first, second in _pascal_pairs(scene, scenes[(index + 1) % len(scenes)]):
            rng = random.Random(f"pascal-{scene.seed}-{category}")
            a, b = (first, second) if rng.random() < 0.5 else (second, first)
            entries.append([f"images/{names[scene.scene_id]}", a.text, b.text])
            categories.append(codes[category])
            for rater in raters:
                key = f"{scene.scene_id}-{category}"
                score_a, score_b = rater.rate(a, key + "-a")["overall"], rater.rate(b, key + "-b")["overall"]
                winner = 1 if score_a > score_b else 2 if score_b > score_a else rng.choice((1, 2))
                judgements.append((reference, a.text, b.text, winner))
    cells = np.empty((1, len(entries)), dtype=object)
    for position, entry in enumerate(entries):
        cell = np.empty((1, 3), dtype=object)
        cell[0, :] = entry
        cells[0, position] = cell
    savemat(folder / "pair_pascal.mat", {"new_input": cells, "category": np.array([categories])})
    triplets = np.empty((1, len(judgements)), dtype=[("A", "O"), ("B", "O"), ("C", "O"), ("D", "O")])
    for position, (reference, a, b, winner) in enumerate(judgements):
        triplets[0, position] = (reference, a, b, np.array([[float(winner)]]))
    savemat(folder / "consensus_pascal.mat", {"triplets": triplets})
    return len(entries)


def _swapped_shape(correct: Candidate, foil: Candidate) -> tuple[str, str]:
    for before, after in zip(correct.caption.description.mentions, foil.caption.description.mentions):
        if before.shape != after.shape:
            return before.shape, after.shape
    raise ValueError("the foil changes no shape")


def _reference_besides(scene: Scene, caption: str) -> str | None:
    """A short description of the scene that differs from `caption` (FOIL's references are the
    image's other correct captions), or None when the scene has no other."""
    for offset in range(1, 8):
        text = realise(describe_short(scene, random.Random(scene.seed + offset)), "en").text
        if text != caption:
            return text
    return None


def write_foil(folder: Path, scenes: list[Scene], size: int) -> int:
    names = _images(folder, scenes, size)
    images, annotations = [], []
    for scene in scenes:
        short = scene_captions(scene, ("en",))["short"]["en"]
        candidates = candidates_for(scene, short.description, ("en",), damaged=False)
        foils = [c for c in candidates if c.errors == ("shape",)]
        if not foils:
            continue
        correct, foil = candidates[0], foils[0]
        reference = _reference_besides(scene, correct.text)
        if reference is None:
            continue
        target, replaced = _swapped_shape(correct, foil)
        images.append({"id": scene.seed, "file_name": f"images/{names[scene.scene_id]}"})
        annotations += [
            {"id": scene.seed, "image_id": scene.seed, "caption": correct.text, "foil": False},
            {"id": scene.seed, "image_id": scene.seed, "caption": foil.text, "foil": True, "foil_id": scene.seed,
             "target_word": target, "foil_word": replaced},
            {"id": 10_000_000 + scene.seed, "image_id": scene.seed, "caption": reference, "foil": False},
        ]
    (folder / "foilv1.0_test_2017.json").write_text(json.dumps({"images": images, "annotations": annotations},
                                                               indent=1), encoding="utf-8")
    return len(images)


def write_world_benchmark(out, *, scenes: int = 12, annotators: int = 5, size: int = 96,
                          split: str = "heldout") -> dict[str, int]:
    """The three world benchmarks for `scenes` scenes of `split` under `out` (folders named in
    BENCHMARK_FOLDERS); returns the number of items of each."""
    out = Path(out)
    chosen = split_scenes(split, scenes)
    return {
        "world-ratings": write_ratings(out / "ratings", chosen, annotators, size),
        "world-pascal": write_pascal(out / "pascal", chosen, annotators, size),
        "world-foil": write_foil(out / "foil", chosen, size),
    }
