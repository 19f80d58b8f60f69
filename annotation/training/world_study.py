"""A rating study of world captions, rated by the world's simulated annotators through the
same queue people use (`annotation.studies.tasks.next_rating_item` / `submit_rating`) and exported with
`build_finetune_set`, so a metric trained on it learns from ratings exactly as a study would
deliver them: images, captions, references and ratings, nothing of the generator's truth.

The simulated annotator looks at the world's ground truth to decide its rating (as a person
looks at the picture); that is the only place the truth is read, and it never leaves this
module except as a rating.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from annotation.people.accounts import create_user
from annotation.transfer.finetune_sets import build_finetune_set
from annotation.transfer.importers import import_rows
from annotation.studies.tasks import next_rating_item, submit_rating
from db.models import Collection, User
from scoring.world.annotators import panel
from scoring.world.errors import Candidate
from scoring.world.grammar import LANGUAGES
from scoring.world.render import render_scene
from scoring.world.scene import Scene
from scoring.world.sets import rating_candidates


@dataclass(frozen=True)
class StudyReport:
    collection: str
    captions: int
    ratings: int
    annotators: tuple[str, ...]


def _import_rows(scenes: list[Scene], langs, image_dir: Path, size: int) -> tuple[list[dict], dict[str, Candidate]]:
    """Importer rows for the study (no ratings: the annotators add them) and each caption's
    candidate by its external id."""
    image_dir.mkdir(parents=True, exist_ok=True)
    for scene in scenes:
        render_scene(scene, size).save(image_dir / f"{scene.scene_id}.png")
    rows, truth = [], {}
    for key, scene, _style, cand, references in rating_candidates(scenes, tuple(langs)):
        rows.append({"image": f"{scene.scene_id}.png", "image_id": scene.scene_id, "caption": cand.text,
                     "language": cand.caption.lang, "kind": "candidate", "caption_id": key,
                     "references": references})
        truth[key] = cand
    return rows, truth


def run_world_study(session: Session, researcher: User, scenes: list[Scene], collection: str, work_dir: Path, *,
                    langs=("en",), annotators: int = 3, first_annotator: int = 0, size: int = 128) -> StudyReport:
    """Import `scenes`' candidates into `collection` and let `annotators` simulated annotators
    rate every caption through the queue, each until it offers them nothing more (k = the
    number of annotators: every caption ends with exactly that many ratings). A study needs a new
    collection and world languages; both are checked before anything is written."""
    if not langs or set(langs) - set(LANGUAGES):
        raise ValueError(f"a world study takes world languages: {', '.join(LANGUAGES)}")
    if session.scalar(select(Collection.id).where(Collection.name == collection)) is not None:
        raise ValueError(f"a collection named {collection!r} exists already; a study needs a new one")
    rows, truth = _import_rows(scenes, langs, Path(work_dir) / "images", size)
    import_rows(session, researcher, rows, collection=collection, base_dir=Path(work_dir) / "images",
                source_name=f"world study ({len(scenes)} scenes)")
    coll = session.scalar(select(Collection).where(Collection.name == collection))
    raters = panel(annotators, first_annotator)
    ratings = 0
    for rater in raters:
        user = session.scalar(select(User).where(User.name == rater.name)) or create_user(session, rater.name, "annotator")
        while (item := next_rating_item(session, user, coll, k=annotators)) is not None:
            values = rater.rate(truth[item.external_id], item.external_id)
            submit_rating(session, user, item.id, values["overall"], values["fluency"], values["relevance"],
                          values["descriptiveness"], k=annotators)
            ratings += 1
    return StudyReport(collection, len(rows), ratings, tuple(r.name for r in raters))


def export_study(session: Session, researcher: User, collection: str, out_dir: Path) -> dict:
    """The study's ratings as a CapLens-R training set (the `human` fine-tuning set)."""
    coll = session.scalar(select(Collection).where(Collection.name == collection))
    if coll is None:
        raise ValueError(f"no collection {collection!r}")
    return build_finetune_set(session, researcher, "human", out_dir, collection=coll)
