"""Studies run on a collection: its guidelines (Markdown), which a researcher writes and
every annotator sees before their first item of the collection and can open from every item.

Writing guidelines is a researcher or admin action, checked here; reading them is anyone's
with a login (they are what annotators work by).
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from annotation.people.accounts import ALL_ROLES, RESEARCH_ROLES, require_role
from annotation.people.acting import acting, chosen_collection
from annotation.captions import get_collection, in_collection
from db.models import Caption, Collection, QueueSkip, Rating, User

MAX_GUIDELINES_CHARS = 20_000


def set_guidelines(session: Session, user: User, collection: Collection, markdown: str | None) -> None:
    """Write (or, empty, remove) the collection's guidelines."""
    require_role(user, *RESEARCH_ROLES)
    text = (markdown or "").strip()
    if len(text) > MAX_GUIDELINES_CHARS:
        raise ValueError(f"guidelines longer than {MAX_GUIDELINES_CHARS} characters")
    collection.guidelines = text or None
    session.flush()


@dataclass(frozen=True)
class Guidelines:
    """A collection's guidelines as the Rate view shows them: `first` when this annotator has
    neither rated nor skipped an item of it yet (the guidelines then come first, opened)."""

    text: str
    first: bool


def guidelines_for(session: Session, user: User, collection: Collection) -> Guidelines:
    require_role(user, *ALL_ROLES)
    in_coll = select(Caption.id).where(in_collection(collection))
    started = session.scalar(select(Rating.id).where(Rating.annotator_id == user.id,
                                                     Rating.caption_id.in_(in_coll)).limit(1)) is not None
    started = started or session.scalar(select(QueueSkip.id).where(
        QueueSkip.annotator_id == user.id, QueueSkip.caption_id.in_(in_coll)).limit(1)) is not None
    return Guidelines(collection.guidelines or "", not started)


def study_guidelines(account_id: int | None, collection_name: str) -> Guidelines:
    with acting(account_id, read_only=True) as (session, user):
        return guidelines_for(session, user, get_collection(session, collection_name))


def write_guidelines(account_id: int | None, collection_name: str, markdown: str | None) -> str:
    """Save the guidelines from the Study tab; what to tell the researcher."""
    chosen_collection(account_id, collection_name)
    with acting(account_id) as (session, user):
        set_guidelines(session, user, get_collection(session, collection_name), markdown)
    return f"Guidelines of {collection_name} saved." if (markdown or "").strip() else \
        f"Guidelines of {collection_name} removed."
