"""Fine-tuning sets built from the database, each written with a manifest.

Every set is a folder: `data.<fmt>` (or a `datasets` folder `data/` for `hf`), `images/`
(the images the rows use, named by sha256) and `manifest.json` (kind, counts, languages,
operations, the collection, import ids the captions came from, seed, creation time).

- `prmcs`: PR-MCS triplets (image, original, perturbed, language, operation) from stored
  perturbed captions and their parents (PR-MCS §3.2).
- `specs`: SPECS triplets (image, c_j, c_j + d+, c_j + d-) from detail units of the stored
  captions, negatives drawn from another image's caption and token-shuffled with
  probability 0.9 (SPECS §3).
- `umic`: UMIC groups, one positive caption and four negatives: stored perturbations of it
  first, then captions of other images (UMIC §3).
- `pacs`: PAC-S pairs (image, human caption) with a model caption of the same image as the
  generated text T' when one is stored (PAC-S §3).
- `human`: human-rated sets for correlation (candidate, references, mean score, ratings).

Building a set is a researcher or admin action.
"""
from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from annotation.exporters import TABLE_FORMATS, copy_image, write_table
from annotation.workflows import _in_collection
from db.images import read_image_bytes
from db.models import Caption, Collection, Image, Rating, User
from db.users import RESEARCH_ROLES, require_role

SET_KINDS = ("prmcs", "specs", "umic", "pacs", "human")
PRMCS_OPS = ("repetition", "removal", "masking", "jumble", "substitution")
UMIC_NEGATIVES = 4
SPECS_SHUFFLE_RATIO = 0.9
HUMAN_CAPTION_KINDS = ("reference",)
MODEL_CAPTION_KINDS = ("candidate",)


def _scoped(query, collection: Collection | None):
    return query.where(_in_collection(collection)) if collection is not None else query


def _prmcs_rows(session: Session, collection: Collection | None, rng: random.Random) -> tuple[list[dict], dict]:
    parent = aliased(Caption)
    query = (select(Caption, parent, Image).join(parent, parent.id == Caption.parent_id)
             .join(Image, Image.id == Caption.image_id)
             .where(Caption.kind == "perturbed", Caption.perturbation_op.in_(PRMCS_OPS)).order_by(Caption.id))
    rows = []
    for perturbed, original, image in session.execute(_scoped(query, collection)):
        details = perturbed.perturbation or {}
        rows.append({"image": image, "original": original.text, "perturbed": perturbed.text,
                     "language": perturbed.language, "operation": perturbed.perturbation_op,
                     "p": details.get("p"), "seed": details.get("seed"),
                     "original_caption_id": original.id, "perturbed_caption_id": perturbed.id,
                     "import_id": perturbed.import_id})
    return rows, {"operations": dict(Counter(r["operation"] for r in rows))}


def _specs_rows(session: Session, collection: Collection | None, rng: random.Random) -> tuple[list[dict], dict]:
    try:
        from annotation.detail_units import detail_units
        from annotation.tokenize import detokenize, tokenize
    except ImportError as exc:
        raise ValueError(f"unavailable: SPECS triplets need annotation.detail_units ({exc})") from exc
    query = (select(Caption, Image).join(Image, Image.id == Caption.image_id)
             .where(Caption.kind.in_(("reference", "candidate", "transcreated"))).order_by(Caption.id))
    captions = list(session.execute(_scoped(query, collection)))
    units = {caption.id: detail_units(caption.text, caption.language) for caption, _image in captions}
    by_language: dict[str, list[tuple[Caption, list[str]]]] = defaultdict(list)
    for caption, _image in captions:
        by_language[caption.language].append((caption, units[caption.id]))
    rows, shuffled = [], 0
    for caption, image in captions:
        parts = units[caption.id]
        donors = [(c, u) for c, u in by_language[caption.language] if c.image_id != caption.image_id and u]
        if len(parts) < 2 or not donors:
            continue
        for j in range(1, len(parts)):
            base = "".join(parts[:j])
            donor_caption, donor_units = rng.choice(donors)
            negative_unit = rng.choice(donor_units)
            if rng.random() < SPECS_SHUFFLE_RATIO:
                tokens = tokenize(negative_unit, caption.language)
                rng.shuffle(tokens)
                negative_unit = _keep_leading_space(negative_unit, detokenize(tokens, caption.language))
                shuffled += 1
            rows.append({"image": image, "base": base.strip(), "positive": (base + parts[j]).strip(),
                         "negative": (base + negative_unit).strip(), "language": caption.language, "j": j,
                         "caption_id": caption.id, "negative_source_caption_id": donor_caption.id,
                         "import_id": caption.import_id})
    return rows, {"negatives_shuffled": shuffled, "shuffle_ratio": SPECS_SHUFFLE_RATIO}


def _keep_leading_space(original: str, rebuilt: str) -> str:
    return (" " + rebuilt.lstrip()) if original[:1].isspace() else rebuilt


def _umic_rows(session: Session, collection: Collection | None, rng: random.Random) -> tuple[list[dict], dict]:
    query = (select(Caption, Image).join(Image, Image.id == Caption.image_id)
             .where(Caption.kind.in_(("reference", "candidate"))).order_by(Caption.id))
    positives = list(session.execute(_scoped(query, collection)))
    children: dict[int, list[Caption]] = defaultdict(list)
    for child in session.scalars(select(Caption).where(Caption.kind == "perturbed").order_by(Caption.id)):
        children[child.parent_id].append(child)
    pool = [(c.image_id, c.text, c.id) for c, _image in positives]
    sources: Counter = Counter()
    rows = []
    for caption, image in positives:
        negatives = [(c.text, f"perturbed:{c.perturbation_op}", c.id) for c in children.get(caption.id, [])]
        rng.shuffle(negatives)
        negatives = negatives[:UMIC_NEGATIVES]
        others = [p for p in pool if p[0] != caption.image_id]
        if len(negatives) + len(others) < UMIC_NEGATIVES:
            continue
        for _image_id, text, other_id in rng.sample(others, UMIC_NEGATIVES - len(negatives)):
            negatives.append((text, "random-caption", other_id))
        sources.update(source for _t, source, _i in negatives)
        rows.append({"image": image, "positive": caption.text, "negatives": [n[0] for n in negatives],
                     "negative_sources": [n[1] for n in negatives], "negative_caption_ids": [n[2] for n in negatives],
                     "language": caption.language, "caption_id": caption.id, "import_id": caption.import_id})
    return rows, {"negative_sources": dict(sources), "negatives_per_group": UMIC_NEGATIVES}


def _pacs_rows(session: Session, collection: Collection | None, rng: random.Random) -> tuple[list[dict], dict]:
    query = (select(Caption, Image).join(Image, Image.id == Caption.image_id)
             .where(Caption.kind.in_(HUMAN_CAPTION_KINDS)).order_by(Caption.id))
    generated: dict[int, list[Caption]] = defaultdict(list)
    gen_query = select(Caption).where(Caption.kind.in_(MODEL_CAPTION_KINDS), Caption.source_model.is_not(None))
    for caption in session.scalars(_scoped(gen_query, collection).order_by(Caption.id)):
        generated[caption.image_id].append(caption)
    rows = []
    for caption, image in session.execute(_scoped(query, collection)):
        options = generated.get(image.id, [])
        pick = rng.choice(options) if options else None
        rows.append({"image": image, "caption": caption.text, "language": caption.language,
                     "generated_caption": pick.text if pick else None,
                     "generated_by": pick.source_model if pick else None,
                     "caption_id": caption.id, "import_id": caption.import_id})
    with_generated = sum(1 for r in rows if r["generated_caption"])
    return rows, {"pairs_with_generated_caption": with_generated,
                  "generated_images": "not stored in the database; add them as extra pairs"}


def _human_rows(session: Session, collection: Collection | None, rng: random.Random) -> tuple[list[dict], dict]:
    query = (select(Caption, Image).join(Image, Image.id == Caption.image_id)
             .where(Caption.kind != "reference", Caption.id.in_(select(Rating.caption_id))).order_by(Caption.id))
    results = list(session.execute(_scoped(query, collection)))
    ratings: dict[int, list[tuple[str, float]]] = defaultdict(list)
    ids = [caption.id for caption, _image in results]
    for start in range(0, len(ids), 500):
        for caption_id, name, overall in session.execute(
                select(Rating.caption_id, User.name, Rating.overall).join(User, User.id == Rating.annotator_id)
                .where(Rating.caption_id.in_(ids[start:start + 500])).order_by(Rating.id)):
            ratings[caption_id].append((name, overall))
    references: dict[tuple[int, str], list[str]] = defaultdict(list)
    for image_id, language, text in session.execute(
            select(Caption.image_id, Caption.language, Caption.text).where(Caption.kind == "reference")
            .order_by(Caption.id)):
        references[(image_id, language)].append(text)
    rows = []
    for caption, image in results:
        scores = ratings[caption.id]
        rows.append({"image": image, "candidate": caption.text, "language": caption.language, "kind": caption.kind,
                     "references": references.get((image.id, caption.language), []),
                     "human_score": sum(s for _n, s in scores) / len(scores), "n_ratings": len(scores),
                     "ratings": {name: score for name, score in scores},
                     "caption_id": caption.id, "parent_caption_id": caption.parent_id, "import_id": caption.import_id})
    return rows, {"ratings": sum(r["n_ratings"] for r in rows)}


_BUILDERS = {"prmcs": _prmcs_rows, "specs": _specs_rows, "umic": _umic_rows, "pacs": _pacs_rows,
             "human": _human_rows}


def build_finetune_set(session: Session, user: User, kind: str, out_dir: str | Path, *,
                       collection: Collection | None = None, fmt: str = "jsonl", seed: int = 0) -> dict:
    """Write fine-tuning set `kind` to `out_dir`; returns its manifest."""
    require_role(user, *RESEARCH_ROLES)
    if kind not in SET_KINDS:
        raise ValueError(f"unknown fine-tuning set {kind!r}: choose one of {', '.join(SET_KINDS)}")
    if fmt not in TABLE_FORMATS:
        raise ValueError(f"unknown format {fmt!r}: choose one of {', '.join(TABLE_FORMATS)}")
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ValueError(f"{out_dir}: exists and is not empty")
    rng = random.Random(seed)
    rows, details = _BUILDERS[kind](session, collection, rng)
    if not rows:
        where = f"collection {collection.name!r}" if collection is not None else "the database"
        raise ValueError(f"no {kind} examples in {where}: {_WHAT_IS_NEEDED[kind]}")
    images_by_sha = {}
    for row in rows:
        image = row.pop("image")
        images_by_sha[image.sha256] = image
        row["image"] = copy_image(image, out_dir / "images")
        row["image_sha256"] = image.sha256
    data_name = "data" if fmt == "hf" else f"data.{fmt}"
    write_table(rows, out_dir / data_name, fmt,
                image_bytes=(lambda row: read_image_bytes(images_by_sha[row["image_sha256"]])) if fmt == "hf" else None)
    manifest = {
        "kind": kind, "format": fmt, "data": data_name, "rows": len(rows), "images": len(images_by_sha),
        "languages": dict(Counter(row["language"] for row in rows)), **details,
        "provenance": {
            "collection": collection.name if collection is not None else None,
            "import_ids": sorted({row["import_id"] for row in rows if row.get("import_id") is not None}),
            "seed": seed, "built_by": user.name, "created_at": datetime.now(timezone.utc).isoformat(),
            "database_captions": session.scalar(select(func.count(Caption.id))),
        },
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest


_WHAT_IS_NEEDED = {
    "prmcs": "store perturbed captions (PR-MCS operations) of captions first",
    "specs": "needs captions with at least two detail units and captions of other images in the same language",
    "umic": "needs captions of at least two images",
    "pacs": "needs reference (human) captions",
    "human": "needs rated captions",
}
