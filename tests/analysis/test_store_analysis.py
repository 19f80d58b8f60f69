"""Public rating sets into a database collection and back, with cached metric scores."""
import pandas as pd
import pytest
from PIL import Image

from annotation.captions import get_collection
from annotation.database import open_database
from annotation.perturbations import store_perturbation
from annotation.scores.score_store import collection_robustness_scores, collection_table, fill_metric_cache, into_collection
from app.cli import main
from db.models import User
from db.session import dispose_engines, session_scope
from scoring.analysis.correlation import correlation_table
from scoring.analysis.datasets import load_flickr8k_json, make_item_id
from scoring.analysis.robustness import robustness_table
from scoring.analysis.tables import import_rows_for
from scoring.api import get_scorer
from scoring.perturb.ops import perturb


@pytest.fixture
def database(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CAPLENS_DATABASE_URL", f"sqlite:///{tmp_path / 'caplens.db'}")
    engine = open_database()
    yield engine
    dispose_engines()


@pytest.fixture
def flickr_with_images(flickr8k_json):
    root = flickr8k_json.parent
    (root / "Flicker8k_Dataset").mkdir()
    Image.new("RGB", (40, 30), (180, 120, 40)).save(root / "Flicker8k_Dataset" / "1000_aa.jpg")
    Image.new("RGB", (40, 30), (20, 90, 200)).save(root / "Flicker8k_Dataset" / "2000_bb.jpg")
    return flickr8k_json, root


ADMIN = User(name="local-cli", role="admin")


def test_rows_rescale_the_published_scale(flickr_with_images):
    path, root = flickr_with_images
    rows = import_rows_for(load_flickr8k_json(path), root)
    assert [r["score"] for r in rows] == pytest.approx([1.0, 2 / 3, 0.0, 1 / 3])  # Expert 1-4 -> [0, 1]
    assert rows[0]["caption_id"] == rows[1]["caption_id"] and rows[0]["annotator"] != rows[1]["annotator"]
    with pytest.raises(ValueError, match="outside the scale"):
        import_rows_for(load_flickr8k_json(path), root, scale=(0, 1))
    with pytest.raises(FileNotFoundError):
        import_rows_for(load_flickr8k_json(path), root / "elsewhere")


def test_collection_round_trip_with_cached_scores(database, flickr_with_images):
    path, root = flickr_with_images
    scorer = get_scorer("tiny")
    with session_scope(database) as session:
        report = into_collection(session, ADMIN, load_flickr8k_json(path), "f8k", root)
        assert report.counts
    with session_scope(database) as session:
        assert fill_metric_cache(session, ADMIN, scorer, "f8k", ["BLEU-1", "CLIP-S"]) == {}
    with session_scope(database) as session:
        table = collection_table(session, ADMIN, "f8k")
    assert len(table) == 4 and set(table["lang"]) == {"en"}
    assert sorted(table["human"].round(4)) == [0.0, 0.3333, 0.6667, 1.0]
    assert {"BLEU-1", "CLIP-S"} <= set(table.columns) and table["BLEU-1"].notna().all()
    # A reference caption is not scored against references that include itself (BLEU-1 = 1).
    with session_scope(database) as session:
        from sqlalchemy import func, select

        from db.models import Caption, MetricScore

        assert session.scalar(select(func.count()).select_from(MetricScore).join(
            Caption, Caption.id == MetricScore.caption_id).where(Caption.kind == "reference")) == 0
        assert session.scalar(select(func.count()).select_from(MetricScore)) > 0
    result = correlation_table(table, ["BLEU-1", "CLIP-S"], n_boot=0)
    assert set(result["metric"]) == {"BLEU-1", "CLIP-S"}


def test_robustness_from_a_collection(database, flickr_with_images):
    path, root = flickr_with_images
    with session_scope(database) as session:
        into_collection(session, ADMIN, load_flickr8k_json(path), "f8k", root)
        collection = get_collection(session, "f8k")
        for caption in [c for c in collection.captions if c.kind == "candidate"]:
            for op in ("removal", "jumble"):
                change = perturb(caption.text, op, seed=1, lang=caption.language)
                if not change.noop:
                    store_perturbation(session, ADMIN, caption, change, collection=collection)
    with session_scope(database) as session:
        fill_metric_cache(session, ADMIN, get_scorer("tiny"), "f8k", ["BLEU-1"])
        scores = collection_robustness_scores(session, ADMIN, "f8k")
    assert set(scores["op"]) >= {"original", "removal"}
    table = robustness_table(scores)
    assert table.loc[0, "metric"] == "BLEU-1" and table.loc[0, "n_original"] == 3


def test_cli_imports_and_correlates_a_collection(database, flickr_with_images, capsys, tmp_path):
    path, root = flickr_with_images
    assert main(["analyze", "load", "flickr8k-expert", str(path), "--collection", "f8k", "--image-root", str(root)]) == 0
    assert '"collection": "f8k"' in capsys.readouterr().out
    out = tmp_path / "corr.csv"
    assert main(["analyze", "correlation", "--collection", "f8k", "--metrics", "BLEU-1", "ROUGE-L", "SPICE",
                 "--profile", "tiny", "--bootstrap", "0", "--compare", "BLEU-1", "ROUGE-L", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "SPICE: unavailable:" in printed and "paired bootstrap: BLEU-1" in printed
    table = pd.read_csv(out)
    # three rated captions (one row each, its mean rating), as the Analyze tab counts them
    assert set(table["metric"]) == {"BLEU-1", "ROUGE-L"} and (table["n"] == 3).all()
    assert main(["analyze", "correlation", "--collection", "f8k", "--metrics", "BLEU-1", "--profile", "tiny",
                 "--bootstrap", "0", "--per-rating", "--out", str(out)]) == 0
    assert (pd.read_csv(out)["n"] == 4).all()  # each of the four ratings its own row


def test_specificity_from_a_collection(database, flickr_with_images, capsys):
    path, root = flickr_with_images
    ratings = load_flickr8k_json(path)
    ratings["candidate"] = ratings["candidate"] + " with a red ball in the green park near the old house"
    ratings["item_id"] = [make_item_id(i, c) for i, c in zip(ratings["image_id"], ratings["candidate"])]
    with session_scope(database) as session:
        into_collection(session, ADMIN, ratings, "f8k", root)
    assert main(["analyze", "specificity", "--collection", "f8k", "--metrics", "ROUGE-L", "--profile", "tiny"]) == 0
    printed = capsys.readouterr().out
    assert "sr_pos" in printed and "ROUGE-L" in printed


def test_length_buckets_from_a_collection(database, flickr_with_images, capsys):
    path, root = flickr_with_images
    with session_scope(database) as session:
        into_collection(session, ADMIN, load_flickr8k_json(path), "f8k", root)
    assert main(["analyze", "length", "--collection", "f8k", "--metrics", "BLEU-1"]) == 2
    assert "give --profile" in capsys.readouterr().err
    assert main(["analyze", "length", "--collection", "f8k", "--metrics", "BLEU-1", "--profile", "tiny",
                 "--edges", "0", "3", "100"]) == 0
    printed = capsys.readouterr().out
    assert "0-2" in printed and "3-99" in printed
