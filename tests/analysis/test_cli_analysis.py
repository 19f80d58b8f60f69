"""`caplens analyze ...` from files to printed tables and CSV."""
import numpy as np
import pandas as pd
import pytest

from app.cli import main
from scoring.analysis.datasets import load_flickr8k_json


def test_correlation_joins_a_public_set(tmp_path, flickr8k_json, capsys):
    ratings = load_flickr8k_json(flickr8k_json)
    scores = ratings.drop_duplicates("item_id")[["item_id"]].copy()
    scores["CLIP-S"] = [0.9, 0.1, 0.5]
    scores["Random"] = [0.1, 0.9, 0.5]
    scores.to_csv(tmp_path / "s.csv", index=False)
    out = tmp_path / "corr.csv"
    code = main(["analyze", "correlation", "--scores", str(tmp_path / "s.csv"),
                 "--dataset", "flickr8k-expert", "--dataset-path", str(flickr8k_json), "--bootstrap", "20",
                 "--compare", "CLIP-S", "Random", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "Flickr8k-Expert" in printed and "paired bootstrap" in printed
    table = pd.read_csv(out).set_index("metric")
    assert table.loc["CLIP-S", "n"] == 4
    assert table.loc["CLIP-S", "kendall_b"] > 0 > table.loc["Random", "kendall_b"]


def test_correlation_long_scores_with_human_column(tmp_path, capsys):
    long = pd.DataFrame({"item_id": ["a", "b", "c"] * 2, "human": [1, 2, 3] * 2,
                         "metric": ["M"] * 3 + ["N"] * 3, "score": [0.1, 0.2, 0.3, 0.3, 0.2, 0.1]})
    long.to_csv(tmp_path / "long.csv", index=False)
    assert main(["analyze", "correlation", "--scores", str(tmp_path / "long.csv"), "--bootstrap", "0"]) == 0
    assert "kendall_c" in capsys.readouterr().out


def test_robustness_prints_table7(tmp_path, capsys):
    rows = [("a", "en", "M", "original", 2.0), ("a", "en", "M", "removal", 1.0), ("a", "en", "M", "repetition", 2.2)]
    pd.DataFrame(rows, columns=["item_id", "lang", "metric", "op", "score"]).to_csv(tmp_path / "r.csv", index=False)
    assert main(["analyze", "robustness", "--scores", str(tmp_path / "r.csv"), "--out", str(tmp_path / "t.csv"),
                 "--detection"]) == 0
    printed = capsys.readouterr().out
    assert "1.0000 (-50.00%)" in printed and "2.2000 (+10.00%)" in printed
    assert "scored below their original" in printed
    assert pd.read_csv(tmp_path / "t.csv").loc[0, "robustness"] == pytest.approx(25.0)


def test_pascal_foil_specificity_retrieval_length(tmp_path, pascal_dir, capsys):
    pd.DataFrame({"pair_id": [0, 1, 2], "M_a": [0.9, 0.1, 0.2], "M_b": [0.1, 0.9, 0.1]}).to_csv(tmp_path / "p.csv", index=False)
    assert main(["analyze", "pascal50s", "--scores", str(tmp_path / "p.csv"), "--pascal-dir", str(pascal_dir)]) == 0
    assert "1.0000" in capsys.readouterr().out

    pd.DataFrame({"M_correct": [0.9, 0.2], "M_foil": [0.1, 0.3]}).to_csv(tmp_path / "f.csv", index=False)
    assert main(["analyze", "foil", "--scores", str(tmp_path / "f.csv")]) == 0
    assert "0.5000" in capsys.readouterr().out

    pd.DataFrame({"metric": ["M", "M"], "kind": ["pos", "neg"], "base": [0.5, 0.5], "extended": [0.6, 0.4]}).to_csv(
        tmp_path / "sp.csv", index=False)
    assert main(["analyze", "specificity", "--scores", str(tmp_path / "sp.csv")]) == 0
    assert "sr_pos" in capsys.readouterr().out

    sims = np.eye(3) + 0.01
    np.savez(tmp_path / "sims.npz", en=sims, de=sims[:, ::-1], text_to_image=np.arange(3))
    assert main(["analyze", "retrieval", "--similarities", str(tmp_path / "sims.npz"), "--out", str(tmp_path / "ret.csv")]) == 0
    table = pd.read_csv(tmp_path / "ret.csv").set_index("lang")
    assert table.loc["en", "R@1"] == 1.0 and table.loc["de", "R@1"] == pytest.approx(1 / 3)

    rng = np.random.default_rng(0)
    pd.DataFrame({"human": rng.normal(size=40), "A": rng.normal(size=40), "B": rng.normal(size=40),
                  "candidate": ["word " * int(k) for k in rng.integers(1, 100, 40)]}).to_csv(tmp_path / "len.csv", index=False)
    assert main(["analyze", "length", "--scores", str(tmp_path / "len.csv"), "--metrics", "A", "B", "--combine", "A", "B"]) == 0
    assert "A<60|B" in capsys.readouterr().out


def test_load_writes_tidy_csv(tmp_path, composite_dir, capsys):
    assert main(["analyze", "load", "composite", str(composite_dir), "--out", str(tmp_path / "c.csv")]) == 0
    assert "Composite" in capsys.readouterr().out
    assert len(pd.read_csv(tmp_path / "c.csv")) == 5


def test_bad_input_gives_one_clear_line(tmp_path, capsys):
    assert main(["analyze", "robustness", "--scores", str(tmp_path / "missing.csv")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "empty.csv").write_text("")
    assert main(["analyze", "robustness", "--scores", str(tmp_path / "empty.csv")]) == 2
    assert "empty" in capsys.readouterr().err
    pd.DataFrame({"x": [1]}).to_csv(tmp_path / "x.csv", index=False)
    assert main(["analyze", "correlation", "--scores", str(tmp_path / "x.csv")]) == 2
    assert "human" in capsys.readouterr().err


def test_rating_set_columns_are_not_taken_for_metrics(tmp_path, flickr8k_raw, capsys):
    from scoring.analysis.datasets import load_flickr8k_raw

    scores = load_flickr8k_raw(flickr8k_raw, "cf")[["image_id", "candidate"]].assign(M=[0.9, 0.1])
    scores.to_csv(tmp_path / "s.csv", index=False)
    assert main(["analyze", "correlation", "--scores", str(tmp_path / "s.csv"), "--dataset", "flickr8k-cf",
                 "--dataset-path", str(flickr8k_raw), "--bootstrap", "0", "--out", str(tmp_path / "o.csv")]) == 0
    assert pd.read_csv(tmp_path / "o.csv")["metric"].tolist() == ["M"]


def test_retrieval_with_coco_sm_files(tmp_path, coco_sm_meta, capsys):
    english = np.array([[0.9, 0.1], [0.8, 0.3], [0.2, 0.7]])
    german = np.array([[0.4, 0.5], [0.8, 0.3], [0.2, 0.7]])
    np.savez(tmp_path / "sims.npz", en=english, de=german)
    for mapping in (coco_sm_meta, coco_sm_meta.parent / "id_mapping.json"):
        assert main(["analyze", "retrieval", "--similarities", str(tmp_path / "sims.npz"),
                     "--text-to-image", str(mapping), "--out", str(tmp_path / "r.csv")]) == 0
        table = pd.read_csv(tmp_path / "r.csv").set_index("lang")
        assert table.loc["en", "R@1"] == 1.0 and table.loc["de", "R@1"] == pytest.approx(2 / 3)
        assert table.loc["en", "NDCG@20"] == pytest.approx(1.0)
        assert table.loc["de", "NDCG@20"] < 1.0
