"""Study guidelines (issue 24): written by researchers only, shown first to an annotator who
has not started the collection, and still there (not first) once they have."""
from __future__ import annotations

import pytest
from sqlalchemy import select

from annotation.captions import add_caption, get_collection, get_or_create_collection
from annotation.image_store import add_image
from annotation.studies.guidelines import study_guidelines, write_guidelines
from annotation.studies.tasks import skip_item, submit_rating
from db.models import User
from db.session import session_scope

TEXT = "# How to rate\n\n1.0 only when every detail is right."


@pytest.fixture
def study(engine, accounts, make_png):
    with session_scope(engine) as s:
        rita = s.merge(accounts["rita"])
        collection = get_or_create_collection(s, rita, "g")
        ids = [add_caption(s, rita, add_image(s, make_png((n * 60, 5, 5))), f"caption {n}", collection=collection).id
               for n in range(2)]
    return ids


def _id(engine, name):
    with session_scope(engine, read_only=True) as s:
        return s.scalar(select(User.id).where(User.name == name))


def test_guidelines_come_first_then_stay_reachable(engine, accounts, study):
    assert write_guidelines(_id(engine, "rita"), "g", TEXT) == "Guidelines of g saved."
    ann, bea = _id(engine, "ann"), _id(engine, "bea")
    assert study_guidelines(ann, "g") == study_guidelines(bea, "g")
    assert study_guidelines(ann, "g").text == TEXT and study_guidelines(ann, "g").first
    with session_scope(engine) as s:
        submit_rating(s, s.merge(accounts["ann"]), study[0], 0.5)
        skip_item(s, s.merge(accounts["bea"]), study[1])
    assert study_guidelines(ann, "g").text == TEXT and not study_guidelines(ann, "g").first
    assert not study_guidelines(bea, "g").first  # a skip starts the collection too
    assert write_guidelines(_id(engine, "root"), "g", "  ") == "Guidelines of g removed."
    assert study_guidelines(ann, "g").text == ""


def test_annotators_may_not_write_guidelines(engine, accounts, study):
    with pytest.raises(PermissionError):
        write_guidelines(_id(engine, "ann"), "g", "rate everything 1.0")
    with session_scope(engine, read_only=True) as s:
        assert get_collection(s, "g").guidelines is None
