"""`caplens finetune RECIPE --collection NAME`: exports the collection's set, trains the tiny
preset, prints before/after and registers the run as a new metric version."""
from __future__ import annotations

from app.cli import main


def test_finetune_a_collection_prints_before_after_and_registers(accounts, engine, tmp_path, make_png, capsys):
    from annotation.captions import add_caption, get_or_create_collection
    from annotation.image_store import add_image
    from db.session import session_scope
    from scoring.api import metric_names
    from scoring.tiny import ensure_tiny_checkpoints

    ensure_tiny_checkpoints()
    with session_scope(engine) as session:
        user = session.get(type(accounts["rita"]), accounts["rita"].id)
        collection = get_or_create_collection(session, user, "shapes")
        for n, colour in enumerate([(200, 10, 10), (10, 200, 10), (10, 10, 200), (200, 200, 10)]):
            image = add_image(session, make_png(colour, size=(24, 24)), original_filename=f"{n}.png")
            for text in (f"a square of colour {n}", f"colour number {n} fills the picture"):
                add_caption(session, user, image, text, kind="reference", collection=collection)
    code = main(["finetune", "umic", "--config", "umic-tiny", "--collection", "shapes", "--user", "rita",
                 "--out", str(tmp_path / "run"), "--register"])  # a tiny preset registers only when asked
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "exported the umic set of collection 'shapes'" in err
    assert "| pairwise_accuracy |" in out
    name = out.split("registered as ")[1].split(":")[0]
    assert name.startswith("UMIC@shapes-") and name in metric_names("tiny")
    code = main(["finetune", "world-clip", "--config", "world-clip-tiny", "--collection", "shapes", "--user", "rita"])
    assert code == 2 and "which no collection provides" in capsys.readouterr().err
