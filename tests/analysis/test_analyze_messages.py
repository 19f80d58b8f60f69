"""What `caplens analyze` says: the offline fallback in the words of `caplens serve` (console
and banner), `caplens score` and the README's sample; and no numbers for a metric it has just
called unavailable."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from app.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def captions_csv(tmp_path):
    Image.new("RGB", (32, 32), (200, 30, 30)).save(tmp_path / "red.png")
    rows = [dict(image="red.png", image_id="red", lang="en", candidate="a man in a red shirt rides a bike on the road",
                 references=json.dumps(["a man rides a bike", "a cyclist on a road"])),
            dict(image="red.png", image_id="red", lang="en", candidate="a man rides a red bike down a quiet road",
                 references=json.dumps(["a man rides a bike"]))]
    path = tmp_path / "captions.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.fixture
def offline(monkeypatch):
    """The hub cannot be reached; the world models load. Returns the line all commands print."""
    from scoring import profile_choice

    monkeypatch.delenv("CAPLENS_PROFILE", raising=False)
    monkeypatch.setattr(profile_choice, "probe", lambda profile, score=None: (
        "ConnectError: [Errno -3] Temporary failure in name resolution" if profile == "hub" else None))
    return profile_choice.choice_line(profile_choice.ProfileChoice("world", False, "ConnectError: x", None))


def readme_sample() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```\n\$ caplens serve\n(.*?)```", text, re.S)
    assert block, "README has no `$ caplens serve` sample"
    return block.group(1).splitlines()


def test_serve_score_analyze_and_the_readme_word_the_offline_fallback_alike(offline, captions_csv, capsys):
    from app.engine import choose_profile as app_choice
    from scoring.cli import choose_profile as cli_choice

    assert offline.startswith("offline: using the world models: the hub checkpoints could not be loaded (no network")
    ctx = app_choice(None)
    assert ctx.profile == "world" and ctx.console == offline
    assert ctx.banner.startswith("**offline: using the world models**: the hub checkpoints could not be loaded")
    assert cli_choice(None, None).profile == "world"
    assert capsys.readouterr().err.splitlines() == [f"caplens score: {offline}"]
    assert main(["analyze", "robustness", "--captions", str(captions_csv), "--metrics", "BLEU-1",
                 "--image-root", str(captions_csv.parent), "--ops", "removal"]) == 0
    assert f"caplens analyze: {offline}" in capsys.readouterr().err.splitlines()
    assert f"CapLens: {offline}" in readme_sample()  # `caplens serve` prints "CapLens: " + its console line


def test_the_readme_serve_sample_is_what_serve_prints(tmp_path, monkeypatch, capsys, offline):
    """Every line of the README's first-run sample, in its order, from the code that prints it
    (Gradio's own "Running on" line aside; the password is random)."""
    from annotation import app_start, warmup
    from app import engine, serve

    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(app_start, "seed_demo_if_empty", lambda: {"collection": "world-demo"})
    serve._storage()
    serve._prepare()
    print(f"CapLens: {engine.choose_profile(None).console}")
    seeding = serve._seed_demo_in_background()  # once the server answers (`serve.launch`)
    seeding.join(timeout=60)
    # The background warm-up's closing line, with its model loading and analysis stubbed (the
    # warm-up itself is tested in tests/annotation/test_warmup.py).
    monkeypatch.setattr(warmup, "load_models", lambda scorer, metrics: {})
    monkeypatch.setattr(warmup, "analyze_once", lambda scorer, metrics, collection: True)
    serve._warm_up(engine.choose_profile(None).profile, seeding).join(timeout=60)
    printed = capsys.readouterr().out.splitlines()
    volatile = [(re.compile(r"password '[^']+'"), "password '…'"), (re.compile(r"warmed up in \d+ s"), "warmed up in … s")]

    def steady(line: str) -> str:
        for pattern, replacement in volatile:
            line = pattern.sub(replacement, line)
        return line

    sample = [steady(line) for line in readme_sample() if not line.startswith("* Running on")]
    printed = [steady(line) for line in printed]
    assert sorted(sample) == sorted(printed), (sample, printed)
    order = ["Ratings are stored", "log in as", "offline: using the world models", "first run, filling",
             "demo collection 'world-demo'"]
    assert [next(i for i, line in enumerate(sample) if key in line) for key in order] == [0, 1, 2, 3, 4]


def test_a_collection_metric_unavailable_now_shows_no_cached_numbers(tmp_path, monkeypatch, capsys):
    """CLIP-S was scored and cached while its checkpoint loaded; now it cannot load: `analyze
    robustness --collection` says it is unavailable and prints no CLIP-S row from the cache."""
    from annotation.captions import get_collection
    from annotation.database import open_database
    from annotation.perturbations import store_perturbation
    from annotation.scores.score_store import fill_metric_cache
    from db.models import User
    from db.session import dispose_engines, session_scope
    from scoring.api import get_scorer
    from scoring.perturb.ops import perturb

    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CAPLENS_DATABASE_URL", f"sqlite:///{tmp_path / 'caplens.db'}")
    admin = User(name="local-cli", role="admin")
    engine = open_database()
    Image.new("RGB", (40, 30), (180, 120, 40)).save(tmp_path / "a.jpg")
    rows = pd.DataFrame([dict(image="a.jpg", image_id="a", lang="en", references=json.dumps(["a brown dog"]),
                              candidate=text) for text in ("a brown dog runs on the grass", "a small dog sits by a door")])
    rows.to_csv(tmp_path / "rows.csv", index=False)
    try:
        assert main(["db", "import", str(tmp_path / "rows.csv"), "--collection", "c",
                     "--image-dir", str(tmp_path)]) == 0
        with session_scope(engine) as session:
            collection = get_collection(session, "c")
            for caption in [c for c in collection.captions if c.kind == "candidate"]:
                store_perturbation(session, admin, caption, perturb(caption.text, "jumble", seed=1), collection=collection)
        with session_scope(engine) as session:
            assert fill_metric_cache(session, admin, get_scorer("tiny"), "c", ["BLEU-1", "CLIP-S"]) == {}
        monkeypatch.setenv("CAPLENS_REGISTRY_CLIP_PATH", str(tmp_path / "gone"))
        monkeypatch.setattr("scoring.api._shared", {})  # a new process: the checkpoint is gone
        capsys.readouterr()
        assert main(["analyze", "robustness", "--collection", "c", "--metrics", "BLEU-1", "CLIP-S", "--profile", "tiny",
                     "--numeric"]) == 0
        out = capsys.readouterr().out
    finally:
        dispose_engines()
    assert "CLIP-S: unavailable:" in out and "BLEU-1" in out
    assert [line for line in out.splitlines() if "CLIP-S" in line] == [
        line for line in out.splitlines() if line.startswith("CLIP-S: unavailable:")], out
