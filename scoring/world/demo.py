"""The offline demo collection as importer rows: world images, five-language captions with
controlled errors, PR-MCS perturbations and simulated ratings. `annotation.demo_seed` imports
them into the database.
"""
from __future__ import annotations

from pathlib import Path

from .annotators import panel
from .captions import scene_captions
from .errors import candidates_for
from .grammar import LANGUAGES
from .render import render_scene
from .sets import split_scenes
from ..perturb.ops import PRMCS_OPS, perturb
from ..perturb.pos import TaggerUnavailableError

DEMO_COLLECTION = "world-demo"
DEMO_SPLIT = "validation"  # neither trained on nor used by `caplens world measure`


def demo_rows(scenes: int, image_dir: Path, langs=LANGUAGES, annotators: int = 3) -> list[dict]:
    """Importer rows (JSONL fields of annotation.transfer.importers) for `scenes` world scenes."""
    raters = panel(annotators)
    rows: list[dict] = []
    for scene in split_scenes(DEMO_SPLIT, scenes):
        image = f"{scene.scene_id}.png"
        render_scene(scene, 224).save(image_dir / image)
        caps = scene_captions(scene, tuple(langs))
        # References in the candidate's own language: the scene's correct captions of every
        # style, less the candidate itself (an English reference would make BLEU & co.
        # meaningless for the other four languages).
        references = {lang: [caps[style][lang].text for style in caps] for lang in langs}
        for style, per_lang in caps.items():
            for k, cand in enumerate(candidates_for(scene, per_lang["en"].description, tuple(langs))):
                caption_id = f"{scene.scene_id}-{style}-{cand.caption.lang}-{k}"
                base = {"image": image, "image_id": scene.scene_id, "caption": cand.text,
                        "language": cand.caption.lang, "kind": "candidate", "caption_id": caption_id,
                        "model": "world-" + ("+".join(cand.errors + cand.damage) or "correct"),
                        "critical_objects": list(cand.caption.critical_objects),
                        "references": [r for r in references[cand.caption.lang] if r != cand.text]}
                for n, rater in enumerate(raters):
                    row = {**base, **rater.rate(cand, caption_id)}
                    if n:  # the caption's critical objects are marked once, by the first annotator
                        row.pop("critical_objects")
                    rows.append(row)
                if cand.errors or cand.damage:
                    continue
                for n, op in enumerate(PRMCS_OPS):  # perturbations of the correct caption
                    try:
                        p = perturb(cand.text, op, seed=scene.seed + n, lang=cand.caption.lang,
                                    critical=list(cand.caption.critical_objects))
                    except TaggerUnavailableError:
                        # A language whose optional POS pipeline is not installed (Spanish on a
                        # Space) has no substitution: the demo leaves that operation out.
                        continue
                    if p.noop:
                        continue
                    rows.append({"image": image, "image_id": scene.scene_id, "caption": p.text,
                                 "language": cand.caption.lang, "kind": "perturbed", "parent_id": caption_id,
                                 "caption_id": f"{caption_id}-{op}", "op": op,
                                 "perturbation": {"p": p.p, "seed": p.seed, "changed_spans": [list(s) for s in p.changed_spans]}})
    return rows


def score_examples(image_dir: Path, size: int = 224) -> list[dict]:
    """Ready-made inputs for the Score tab's examples: world images written to `image_dir`
    and table rows (image, candidate, references) with correct and wrong captions, so that a
    visitor sees scores with one click. Each: {"label", "images": [paths], "rows": [[...]]}."""
    from ..session_scoring import ScoreRow, table_records
    from .sets import scene_references

    image_dir = Path(image_dir)
    image_dir.mkdir(parents=True, exist_ok=True)
    scenes = split_scenes(DEMO_SPLIT, 3)
    chosen = {0: ("correct", "colour", "shape"), 1: ("correct", "colour", "shape"),
              2: ("correct", "relation", "missing", "hallucinated", "word-order")}
    paths, rows = {}, {}
    for index, scene in enumerate(scenes):
        path = image_dir / f"{scene.scene_id}.png"
        if not path.is_file():
            render_scene(scene, size).save(path)
        paths[index] = str(path)
        caps = scene_captions(scene, ("en",))
        # References: other short descriptions of the scene (the long one would dwarf the candidates).
        others = [scene_captions(scene, ("en",), seed=k)["short"]["en"].text for k in range(1, 4)]
        references = list(dict.fromkeys(scene_references(scene, ("en",))["en"] + others))
        by_kind = {}
        for cand in candidates_for(scene, caps["short"]["en"].description, ("en",)):
            by_kind.setdefault((cand.errors + cand.damage or ("correct",))[0], cand.text)
        rows[index] = [ScoreRow(path.name, by_kind[kind], references) for kind in chosen[index] if kind in by_kind]
    return [
        {"label": "Two world images, each with its own captions and references",
         "images": [paths[0], paths[1]], "rows": table_records(rows[0] + rows[1])},
        {"label": "One world image: a correct caption and four kinds of error",
         "images": [paths[2]], "rows": table_records(rows[2])},
    ]
