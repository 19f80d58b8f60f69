"""Fine-tuning sets built from the database, each written with a manifest.

Every set is a folder: `data.<fmt>` (or a `datasets` folder `data/` for `hf`), `images/`
(the images the rows use, named by sha256) and `manifest.json` (kind, counts, languages,
operations, the collection, import ids the captions came from, seed, creation time).

- `prmcs`: PR-MCS triplets (image, original, perturbed, language, operation) from stored
  perturbed captions and their parents (PR-MCS §3.2).
- `specs`: SPECS triplets (image, c_j, c_j + d+, c_j + d-) from detail units of the stored
  captions, negatives drawn from another image's caption and token-shuffled with
  probability 0.9 (SPECS §3).
- `umic`: UMIC groups, one positive caption and four negatives (keyword substitution, a
  random or hard caption of another image, repetition & removal, word-order permutation;
  UMIC §3.2, from `scoring.perturb.negatives`).
- `pacs`: PAC-S pairs (image, human caption) with a model caption of the same image, in the
  caption's language, as the generated text T' when one is stored (PAC-S §3).
- `human`: human-rated sets for correlation (candidate, references, mean score, ratings),
  with each transcreation that has no ratings of its own at the score it keeps (its source's
  mean when it was written; M-CapEval1k, PR-MCS appendix C).

Building a set is a researcher or admin action.
"""
from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from datetime import datetime, timezone
from collections.abc import Mapping, Sequence
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from annotation.people.accounts import RESEARCH_ROLES, require_role
from annotation.captions import image_references, in_collection
from annotation.transfer.exporters import TABLE_FORMATS, Table, copy_image, stored_image_reader, write_table
from db.models import Caption, Collection, Image, Rating, Transcreation, User
from scoring.analysis.tables import rating_mean
from scoring.perturb.ops import PRMCS_OPS

SET_KINDS = ("prmcs", "specs", "umic", "pacs", "human")
UMIC_NEGATIVES = 4
HUMAN_CAPTION_KINDS = ("reference",)
MODEL_CAPTION_KINDS = ("candidate",)


def _scoped(query, collection: Collection | None):
    return query.where(in_collection(collection)) if collection is not None else query


def _prmcs_rows(session: Session, collection: Collection | None, rng: random.Random,
                options: dict) -> tuple[list[dict], dict]:
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


def _specs_rows(session: Session, collection: Collection | None, rng: random.Random,
                options: dict) -> tuple[list[dict], dict]:
    from scoring.perturb.detail_units import SHUFFLE_RATIO, specs_triplets

    query = (select(Caption, Image).join(Image, Image.id == Caption.image_id)
             .where(Caption.kind.in_(("reference", "candidate", "transcreated"))).order_by(Caption.id))
    by_language: dict[str, list[tuple[Caption, Image]]] = defaultdict(list)
    for caption, image in session.execute(_scoped(query, collection)):
        by_language[caption.language].append((caption, image))
    rows, skipped_languages = [], []
    for language, items in sorted(by_language.items()):
        if len({image.id for _c, image in items}) < 2:
            skipped_languages.append(language)  # negatives need a caption of another image
            continue
        triplets = specs_triplets([c.text for c, _i in items], lang=language, seed=rng.randrange(2**31),
                                  image_ids=[str(image.id) for _c, image in items])
        for triplet in triplets:
            caption, image = items[triplet.caption_index]
            rows.append({"image": image, "base": triplet.base, "positive": triplet.positive,
                         "negative": triplet.negative, "language": language, "j": triplet.unit_index,
                         "negative_shuffled": triplet.shuffled, "caption": caption.text, "caption_id": caption.id,
                         "negative_source_caption_id": items[triplet.negative_source][0].id,
                         "import_id": caption.import_id})
    return rows, {"negatives_shuffled": sum(r["negative_shuffled"] for r in rows), "shuffle_ratio": SHUFFLE_RATIO,
                  "languages_without_other_images": skipped_languages}


def _umic_rows(session: Session, collection: Collection | None, rng: random.Random,
               options: dict) -> tuple[list[dict], dict]:
    """UMIC's four negatives per caption (scoring.perturb.negatives); a negative the perturbation
    could not produce is replaced by a stored perturbation of the caption, else by a
    caption of another image."""
    import numpy as np

    from scoring.perturb.negatives import umic_negatives

    query = (select(Caption, Image).join(Image, Image.id == Caption.image_id)
             .where(Caption.kind.in_(("reference", "candidate"))).order_by(Caption.id))
    positives = list(session.execute(_scoped(query, collection)))
    stored: dict[int, list[Caption]] = defaultdict(list)
    for child in session.scalars(select(Caption).where(Caption.kind == "perturbed").order_by(Caption.id)):
        stored[child.parent_id].append(child)
    by_language: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for caption, image in positives:
        by_language[caption.language][image.sha256].append(caption.text)
    embeddings = options.get("image_embeddings")
    sources: Counter = Counter()
    rows = []
    for caption, image in positives:
        captions_by_image = by_language[caption.language]
        if len(captions_by_image) < 2:
            continue
        hard = {}
        if embeddings is not None:
            known = [sha for sha in captions_by_image if sha in embeddings]
            if image.sha256 in embeddings and len(known) > 1:
                hard = {"image_ids": known, "embeddings": np.asarray([embeddings[sha] for sha in known])}
        negatives = []
        replacements = [(c.text, f"stored:{c.perturbation_op}") for c in stored.get(caption.id, [])]
        others = [t for sha, texts in sorted(captions_by_image.items()) if sha != image.sha256 for t in texts]
        for negative in umic_negatives(image.sha256, caption.text, captions_by_image, lang=caption.language,
                                       seed=rng.randrange(2**31), **hard):
            if not negative.noop and negative.text != caption.text:
                negatives.append((negative.text, negative.kind))
            elif replacements:
                negatives.append(replacements.pop(0))
            else:
                negatives.append((rng.choice(others), "random"))
        sources.update(kind for _t, kind in negatives)
        rows.append({"image": image, "positive": caption.text, "negatives": [n[0] for n in negatives],
                     "negative_kinds": [n[1] for n in negatives], "language": caption.language,
                     "caption_id": caption.id, "import_id": caption.import_id})
    return rows, {"negative_kinds": dict(sources), "negatives_per_group": UMIC_NEGATIVES,
                  "hard_negatives": "from image embeddings" if embeddings is not None else "none (no embeddings given)"}


def _pacs_rows(session: Session, collection: Collection | None, rng: random.Random,
               options: dict) -> tuple[list[dict], dict]:
    query = (select(Caption, Image).join(Image, Image.id == Caption.image_id)
             .where(Caption.kind.in_(HUMAN_CAPTION_KINDS)).order_by(Caption.id))
    # by (image, language): T' is a caption of the same image in the caption's language
    generated: dict[tuple[int, str], list[Caption]] = defaultdict(list)
    gen_query = select(Caption).where(Caption.kind.in_(MODEL_CAPTION_KINDS), Caption.source_model.is_not(None))
    for caption in session.scalars(_scoped(gen_query, collection).order_by(Caption.id)):
        generated[(caption.image_id, caption.language)].append(caption)
    rows = []
    for caption, image in session.execute(_scoped(query, collection)):
        options = generated.get((image.id, caption.language), [])
        pick = rng.choice(options) if options else None
        rows.append({"image": image, "caption": caption.text, "language": caption.language,
                     "generated_caption": pick.text if pick else None,
                     "generated_by": pick.source_model if pick else None,
                     "caption_id": caption.id, "import_id": caption.import_id})
    with_generated = sum(1 for r in rows if r["generated_caption"])
    return rows, {"pairs_with_generated_caption": with_generated,
                  "generated_images": "not stored in the database; add them as extra pairs"}


ASPECTS = ("fluency", "relevance", "descriptiveness")  # rated besides `overall`; each the mean of who rated it


def _human_rows(session: Session, collection: Collection | None, rng: random.Random,
                options: dict) -> tuple[list[dict], dict]:
    query = (select(Caption, Image).join(Image, Image.id == Caption.image_id)
             .where(Caption.kind != "reference", Caption.id.in_(select(Rating.caption_id))).order_by(Caption.id))
    results = list(session.execute(_scoped(query, collection)))
    ratings: dict[int, list[tuple[str, float]]] = defaultdict(list)
    aspects: dict[int, dict[str, list[float]]] = defaultdict(lambda: {a: [] for a in ASPECTS})
    ids = [caption.id for caption, _image in results]
    for start in range(0, len(ids), 500):
        for caption_id, name, overall, *values in session.execute(
                select(Rating.caption_id, User.name, Rating.overall, *(getattr(Rating, a) for a in ASPECTS))
                .join(User, User.id == Rating.annotator_id)
                .where(Rating.caption_id.in_(ids[start:start + 500])).order_by(Rating.id)):
            ratings[caption_id].append((name, overall))
            for aspect, value in zip(ASPECTS, values):
                if value is not None:
                    aspects[caption_id][aspect].append(value)
    # A transcreation is written to keep its source's score, so it is a rated caption in its
    # language without ratings of its own (one that has some is rated, with its own mean).
    kept = (select(Caption, Image, Transcreation.source_score, User.name)
            .join(Transcreation, Transcreation.result_caption_id == Caption.id)
            .join(Image, Image.id == Caption.image_id).join(User, User.id == Transcreation.annotator_id)
            .where(Transcreation.source_score.is_not(None), Caption.id.not_in(select(Rating.caption_id)))
            .order_by(Caption.id))
    transcreations = list(session.execute(_scoped(kept, collection)))
    references = image_references(session, [image.id for _c, image, *_ in results + transcreations])
    rows = []
    for caption, image in results:
        scores = ratings[caption.id]
        rows.append({"image": image, "candidate": caption.text, "language": caption.language, "kind": caption.kind,
                     "references": references.get((image.id, caption.language), []),
                     "human_score": rating_mean(sum(s for _n, s in scores) / len(scores)), "n_ratings": len(scores),
                     **{a: (rating_mean(sum(v) / len(v)) if (v := aspects[caption.id][a]) else None) for a in ASPECTS},
                     "ratings": {name: score for name, score in scores}, "score_from": "ratings",
                     "caption_id": caption.id, "parent_caption_id": caption.parent_id, "import_id": caption.import_id})
    for caption, image, score, author in transcreations:
        rows.append({"image": image, "candidate": caption.text, "language": caption.language, "kind": caption.kind,
                     "references": references.get((image.id, caption.language), []),
                     "human_score": rating_mean(score), "n_ratings": 0, **{a: None for a in ASPECTS}, "ratings": {},
                     "score_from": f"transcreation by {author} of caption {caption.parent_id}",
                     "caption_id": caption.id, "parent_caption_id": caption.parent_id, "import_id": caption.import_id})
    return rows, {"ratings": sum(r["n_ratings"] for r in rows),
                  "transcreations": sum(r["n_ratings"] == 0 for r in rows)}


_BUILDERS = {"prmcs": _prmcs_rows, "specs": _specs_rows, "umic": _umic_rows, "pacs": _pacs_rows,
             "human": _human_rows}


def build_finetune_set(session: Session, user: User, kind: str, out_dir: str | Path, *,
                       collection: Collection | None = None, fmt: str = "jsonl", seed: int = 0,
                       image_embeddings: Mapping[str, Sequence[float]] | None = None) -> dict:
    """Write fine-tuning set `kind` to `out_dir`; returns its manifest.

    `image_embeddings` (image sha256 -> vector, computed by `scoring`) turns on UMIC's hard
    negatives: half of the borrowed captions come from the most similar images.
    """
    require_role(user, *RESEARCH_ROLES)
    if kind not in SET_KINDS:
        raise ValueError(f"unknown fine-tuning set {kind!r}: choose one of {', '.join(SET_KINDS)}")
    if fmt not in TABLE_FORMATS:
        raise ValueError(f"unknown format {fmt!r}: choose one of {', '.join(TABLE_FORMATS)}")
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ValueError(f"{out_dir}: exists and is not empty")
    rng = random.Random(seed)
    rows, details = _BUILDERS[kind](session, collection, rng, {"image_embeddings": image_embeddings})
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
    read = stored_image_reader()
    write_table(Table(list(dict.fromkeys(name for row in rows for name in row)), rows), out_dir / data_name, fmt,
                image_bytes=(lambda row: read(row["image_sha256"], images_by_sha[row["image_sha256"]].format))
                if fmt == "hf" else None)
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
    "umic": "needs captions of at least two images in the same language",
    "pacs": "needs reference (human) captions",
    "human": "needs rated captions",
}
