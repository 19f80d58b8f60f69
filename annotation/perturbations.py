"""Perturbed captions stored with their provenance (op, p, seed, changed spans) in a collection."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from annotation.people.accounts import RESEARCH_ROLES, require_role
from annotation.captions import add_caption, in_collection
from annotation.studies.tasks import critical_objects
from db.models import Caption, Collection, User
from scoring.perturb.ops import PRMCS_OPS, canonical_op, perturb


def store_perturbation(session: Session, user: User, parent: Caption, perturbation,
                       collection: Collection | None = None) -> Caption:
    """Store a perturbed caption with its provenance.

    `perturbation` is an `scoring.perturb.ops.Perturbation` (or anything with the same
    `to_dict()`/fields): its text becomes the caption; op, p, seed and changed spans are kept.
    """
    details = perturbation.to_dict() if hasattr(perturbation, "to_dict") else dict(perturbation)
    text = details.pop("text")
    details.pop("parent", None)  # the parent is the `parent_id` column
    if details.get("noop"):
        raise ValueError(f"perturbation {details.get('op')} left the caption unchanged: {details.get('noop_reason')}")
    return add_caption(session, user, parent.image, text, language=details.get("lang") or parent.language,
                       kind="perturbed", source_model=parent.source_model, parent=parent,
                       perturbation=details, collection=collection)


@dataclass
class PerturbationSummary:
    stored: dict[str, int]  # op -> perturbed captions stored
    unchanged: dict[str, int]  # op -> captions the operation could not change
    already_present: int


def perturb_collection(session: Session, user: User, collection: Collection, ops: Sequence[str] | None = None, *,
                       seed: int = 0, p: float | None = None) -> PerturbationSummary:
    """Store PR-MCS perturbations of every reference / candidate caption of a collection.

    Substitution uses the critical objects annotators marked (else nouns, see
    `scoring.perturb.ops`). Perturbations already stored with the same op and seed are kept,
    so running it again only fills gaps.
    """
    require_role(user, *RESEARCH_ROLES)
    ops = tuple(dict.fromkeys(canonical_op(op) for op in ops or PRMCS_OPS))  # 'permutation' is jumble
    sources = list(session.scalars(select(Caption).where(
        in_collection(collection), Caption.kind.in_(("reference", "candidate", "transcreated"))).order_by(Caption.id)))
    existing = {(c.parent_id, c.perturbation_op, (c.perturbation or {}).get("seed")) for c in session.scalars(
        select(Caption).where(Caption.kind == "perturbed", Caption.parent_id.in_([c.id for c in sources])))}
    stored, unchanged, present = dict.fromkeys(ops, 0), dict.fromkeys(ops, 0), 0
    for caption in sources:
        critical = critical_objects(session, caption.id) or None
        for op in ops:
            if (caption.id, op, seed) in existing:
                present += 1
                continue
            result = perturb(caption.text, op, p=p, seed=seed, lang=caption.language, critical=critical)
            if result.noop:
                unchanged[op] += 1
                continue
            details = {**result.to_dict(), "critical": list(result.critical) if result.critical else None}
            store_perturbation(session, user, caption, details, collection)
            stored[op] += 1
    return PerturbationSummary(stored, unchanged, present)
