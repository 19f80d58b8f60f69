"""The offline demo collection: world images, five-language captions with controlled errors,
PR-MCS perturbations and simulated ratings, imported through the normal all-or-nothing importer.

`seed_demo_if_empty()` is what `caplens serve` calls on first run; `caplens world seed` runs it
on demand.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from .annotators import panel
from .captions import scene_captions
from .errors import candidates_for
from .grammar import LANGUAGES
from .render import render_scene
from .sets import split_scenes

DEMO_COLLECTION = "world-demo"
SEED_USER = "world-seed"
DEMO_SPLIT = "validation"  # neither trained on nor used by `caplens world measure`


def demo_rows(scenes: int, image_dir: Path, langs=LANGUAGES, annotators: int = 3) -> list[dict]:
    """Importer rows (JSONL fields of annotation.importers) for `scenes` world scenes."""
    from annotation.perturb import PRMCS_OPS, perturb

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
                    p = perturb(cand.text, op, seed=scene.seed + n, lang=cand.caption.lang,
                                critical=list(cand.caption.critical_objects))
                    if p.noop:
                        continue
                    rows.append({"image": image, "image_id": scene.scene_id, "caption": p.text,
                                 "language": cand.caption.lang, "kind": "perturbed", "parent_id": caption_id,
                                 "caption_id": f"{caption_id}-{op}", "op": op,
                                 "perturbation": {"p": p.p, "seed": p.seed, "changed_spans": [list(s) for s in p.changed_spans]}})
    return rows


def seed_demo(scenes: int = 12, force: bool = False) -> dict:
    """Import the demo collection into the configured database; skipped if it already exists."""
    from sqlalchemy import select

    from annotation.importers import import_rows
    from db.models import Collection, User
    from db.session import ensure_schema, session_scope
    from db.users import create_user

    if scenes < 1:
        raise ValueError("the demo needs at least one scene")
    engine = ensure_schema()
    with session_scope(engine) as session:
        if session.scalar(select(Collection).where(Collection.name == DEMO_COLLECTION)) is not None and not force:
            return {"collection": DEMO_COLLECTION, "skipped": "already seeded"}
        user = session.scalar(select(User).where(User.name == SEED_USER))
        if user is None:
            user = create_user(session, SEED_USER, "researcher")
        with tempfile.TemporaryDirectory(prefix="caplens-world-") as tmp:
            rows = demo_rows(scenes, Path(tmp))
            report = import_rows(session, user, rows, collection=DEMO_COLLECTION, base_dir=tmp,
                                 source_name=f"caplens world seed ({scenes} scenes)")
        return report.to_dict()


def seed_demo_if_empty(scenes: int = 12) -> dict | None:
    """Seed on first run: only when the database has no collection at all."""
    from sqlalchemy import func, select

    from db.models import Collection
    from db.session import ensure_schema, session_scope

    engine = ensure_schema()
    with session_scope(engine, read_only=True) as session:
        if session.scalar(select(func.count()).select_from(Collection)):
            return None
    return seed_demo(scenes)
