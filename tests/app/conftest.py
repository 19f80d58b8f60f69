"""One CapLens server per test session (tiny profile, throwaway data directory), launched
in-process on a free localhost port, plus a seeded annotation collection."""
from __future__ import annotations

import io
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest
from PIL import Image

XSS = "<img src=x onerror=alert(1)>"
ANNOTATOR = ("ann", "annotator-password")
RESEARCHER = ("res", "researcher-password")
COLLECTION = "app-test"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def png_bytes(colour=(200, 30, 30), size=(48, 40)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="session")
def image_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("images") / "red.png"
    path.write_bytes(png_bytes())
    return path


@pytest.fixture(scope="session")
def server():
    """The real app (same code as `caplens serve --profile tiny`) on 127.0.0.1:<free port>."""
    from app.serve import create_app, launch, launch_kwargs

    demo, ctx = create_app("tiny", seed_demo=False)
    seeded = seed_annotation_data()
    kwargs = launch_kwargs("127.0.0.1", free_port(), False)
    kwargs.update(prevent_thread_lock=True, quiet=True)
    launch(demo, kwargs)
    yield SimpleNamespace(url=demo.local_url, demo=demo, ctx=ctx, xss=XSS, annotator=ANNOTATOR, researcher=RESEARCHER,
                          collection=COLLECTION, **seeded)
    demo.close()


def seed_annotation_data() -> dict:
    """Accounts and a small collection, written through the library's own functions."""
    from annotation.people.accounts import create_user
    from annotation.captions import add_caption, get_caption, get_or_create_collection
    from annotation.database import database_session
    from annotation.image_store import add_image
    from annotation.perturbations import store_perturbation
    from annotation.studies.tasks import submit_rating

    from scoring.perturb.ops import PRMCS_OPS, perturb

    captions = {}
    with database_session() as session:
        create_user(session, ANNOTATOR[0], "annotator", ANNOTATOR[1])
        researcher = create_user(session, RESEARCHER[0], "researcher", RESEARCHER[1])
        raters = [create_user(session, f"rater{i}", "annotator", f"rater-password-{i}") for i in (1, 2)]
        collection = get_or_create_collection(session, researcher, COLLECTION)
        seeded = [((200, 30, 30), "a red square on a white table", (0.9, 0.8)),
                  ((30, 30, 200), XSS, (0.1, 0.2)),
                  ((30, 200, 30), "a green field", (0.5, 0.7))]
        for colour, text, scores in seeded:
            image = add_image(session, png_bytes(colour), original_filename=f"{text[:5]}.png")
            add_caption(session, researcher, image, "a photo of a square", kind="reference", collection=collection)
            caption = add_caption(session, researcher, image, text, collection=collection)
            captions[text] = caption.id
            for rater, score in zip(raters, scores):
                submit_rating(session, rater, caption.id, score)
        parent = get_caption(session, captions["a red square on a white table"])
        for n, op in enumerate(PRMCS_OPS[:4]):
            store_perturbation(session, researcher, parent, perturb(parent.text, op, seed=n), collection=collection)
    return {"caption_ids": captions}


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
