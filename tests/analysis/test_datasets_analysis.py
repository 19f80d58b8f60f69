"""Loaders parse small files written in the published formats."""
import json

import numpy as np
import pytest

from scoring.analysis.datasets import (
    RATING_COLUMNS, coco_sm_text_to_image, load_candidates_json, load_capeval1k, load_coco_sm,
    load_coco_sm_id_mapping, load_composite, load_flickr8k_json, load_flickr8k_raw, load_foil,
    load_m_capeval1k, load_pascal50s, make_item_id, sample_references,
)


def test_flickr8k_json(flickr8k_json):
    table = load_flickr8k_json(flickr8k_json, "expert")
    assert list(table.columns[: len(RATING_COLUMNS)]) == RATING_COLUMNS
    assert len(table) == 4  # NaN rating skipped
    assert set(table["collection"]) == {"Flickr8k-Expert"}
    dog = table[table["candidate"] == "a dog is running"]
    assert dog["human"].tolist() == [4.0, 3.0] and dog["rater"].tolist() == [0, 1]
    assert dog["item_id"].nunique() == 1 and dog["item_id"].iloc[0] == make_item_id("1000_aa", "a dog is running")
    assert dog["references"].iloc[0] == ["a dog runs", "a brown dog"]
    assert table[table["image_id"] == "2000_bb"]["candidate"].iloc[0] == "kids playing"
    assert set(load_flickr8k_json(flickr8k_json, "cf")["collection"]) == {"Flickr8k-CF"}


def test_flickr8k_raw_release(flickr8k_raw):
    expert = load_flickr8k_raw(flickr8k_raw, "expert")
    # the image's own reference "A brown dog ." is skipped; the others give 3 rows each
    assert len(expert) == 6
    assert "A brown dog ." not in set(expert["candidate"])
    first = expert[expert["image_id"] == "1000_aa.jpg"]
    assert first["human"].tolist() == [1.0, 1.0, 2.0]
    assert first["references"].iloc[0] == ["A dog runs .", "A brown dog ."]
    crowd = load_flickr8k_raw(flickr8k_raw, "cf")
    assert crowd["human"].tolist() == [1.0, 0.25]
    assert crowd["references"].iloc[0] == ["A dog runs ."]  # candidate removed from its refs
    assert crowd["n_no"].tolist() == [0, 3]


def test_flickr8k_bad_input(tmp_path, flickr8k_raw):
    with pytest.raises(FileNotFoundError):
        load_flickr8k_json(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="JSON"):
        load_flickr8k_json(bad)
    (flickr8k_raw / "ExpertAnnotations.txt").write_text("1000_aa.jpg\tnope#9\t1\t1\t1\n")
    with pytest.raises(ValueError, match="nope#9"):
        load_flickr8k_raw(flickr8k_raw, "expert")
    with pytest.raises(ValueError, match="kind"):
        load_flickr8k_raw(flickr8k_raw, "other")


def test_composite(composite_dir):
    table = load_composite(composite_dir, references={"1000_aa.jpg": ["ref one"]})
    assert len(table) == 5  # empty slot and junk tail rows dropped
    assert table["human"].tolist() == [5.0, 1.0, 2.0, 4.0, 2.0]
    assert set(table["subset"]) == {"8k"} and set(table["aspect"]) == {"correctness"}
    assert table.iloc[0]["image_id"] == "1000_aa.jpg" and table.iloc[0]["references"] == ["ref one"]
    assert table.iloc[3]["references"] == []


def test_composite_loads_one_aspect_of_every_subset_and_leaves_the_candidate_out_of_its_references(tmp_path):
    """Each caption once, with its correctness rating (the published Composite correlations'),
    from all three subsets, whether the folder or its 8k file is given; its own text is not among
    its references (an audit: the folder gave each caption a correctness and a throughness score,
    the 8k file alone dropped 30k and COCO, and the Polos CSV kept the candidate in its refs)."""
    from scoring.analysis.datasets import load_composite_da
    from scoring.analysis.reproduce import benchmark, find_benchmarks

    def write(name, url, first, second, scores):
        (tmp_path / name).write_text("Input.image_url;Input.text1;Input.text2;Answer.Q1Answer;Answer.Q2Answer\n"
                                     f"{url};{first};{second};{scores[0]};{scores[1]}\n")

    write("8k_correctness.csv", "http://x/8k_1.jpg", "a dog runs", "a cat sits", "54")
    write("30k_correctness.csv", "http://x/30k_1.jpg", "a man rides", "a boat", "42")
    write("coco_correctness.csv", "http://x/coco_1.jpg", "a plate of food", "a tree", "51")
    write("8k_throughness.csv", "http://x/8k_1.jpg", "a dog runs", "a cat sits", "24")
    refs = {"8k_1.jpg": ["a dog runs", "a brown dog runs on grass"]}
    for given in (tmp_path, find_benchmarks(tmp_path)["composite"]):
        table = benchmark("composite").load(given)
        assert len(table) == 6 and table["item_id"].is_unique and set(table["aspect"]) == {"correctness"}
        assert sorted(table["subset"].unique()) == ["30k", "8k", "coco"]
    table = load_composite(tmp_path, references=refs).set_index("candidate")
    assert table.loc["a dog runs", "references"] == ["a brown dog runs on grass"]
    assert table.loc["a cat sits", "references"] == ["a dog runs", "a brown dog runs on grass"]
    thorough = load_composite(tmp_path, aspect="throughness")
    assert thorough["human"].tolist() == [2.0, 4.0] and set(thorough["aspect"]) == {"throughness"}
    with pytest.raises(ValueError, match="give one aspect's files"):
        load_composite([tmp_path / "8k_correctness.csv", tmp_path / "8k_throughness.csv"])
    (tmp_path / "en_test_composite_da.csv").write_text(
        "mt,refs,score,imgid\na dog runs,\"['a dog runs', 'a brown dog on grass']\",0.8,8k_1.jpg\n")
    assert load_composite_da(tmp_path)["references"].tolist() == [["a brown dog on grass"]]


def test_capeval1k_and_multilingual(capeval_json, m_capeval_csv):
    table = load_capeval1k(capeval_json)
    assert table["human"].tolist() == [4.2, 2.8]
    assert table["system"].tolist() == ["AoANet", "BUTD"]
    assert table["fluency"].tolist() == [5.0, 3.0] and "descriptiveness" in table
    multi = load_m_capeval1k(m_capeval_csv)
    assert sorted(multi["lang"].unique()) == ["de", "en", "ja"]
    assert multi[multi["lang"] == "ja"]["candidate"].tolist() == ["犬が走る", "猫"]
    per_lang = load_m_capeval1k({"fr": capeval_json})
    assert set(per_lang["lang"]) == {"fr"} and set(per_lang["collection"]) == {"M-CapEval1k"}


def test_rating_table_reports_incomplete_records(tmp_path):
    path = tmp_path / "ratings.jsonl"
    path.write_text(json.dumps({"imgid": "1", "caption": "x"}) + "\n")
    with pytest.raises(ValueError, match="needs an image id, a caption and a score"):
        load_capeval1k(path)


def test_candidates_json(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"img1": "a dog", "img2": "a cat"}))
    (tmp_path / "r.json").write_text(json.dumps({"img1": ["a puppy", "a hound"], "img2": "a kitten"}))
    table = load_candidates_json(tmp_path / "c.json", tmp_path / "r.json")
    assert table["references"].tolist() == [["a puppy", "a hound"], ["a kitten"]]
    assert table["human"].isna().all()


def test_pascal50s(pascal_dir):
    pairs = load_pascal50s(pascal_dir)
    assert pairs["category"].tolist() == ["HC", "HM", "MM"]
    assert pairs[["votes_a", "votes_b"]].values.tolist() == [[2, 1], [0, 3], [3, 0]]
    assert pairs.loc[0, "caption_b"] == "a person on a horse" and pairs.loc[0, "image_id"] == "img0.jpg"
    assert pairs.loc[2, "references"] == ["reference 2-0", "reference 2-1", "reference 2-2"]
    assert len(sample_references(pairs.loc[0, "references"], 2, seed=1)) == 2
    assert sample_references(["a"], 5) == ["a"]


def test_pascal50s_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="pair_pascal.mat"):
        load_pascal50s(tmp_path)


def test_foil(foil_json):
    pairs = load_foil(foil_json).set_index("pair_id")
    assert pairs.loc[3, "correct"] == "A dog on a sofa." and pairs.loc[3, "foil"] == "A cat on a sofa."
    assert pairs.loc[3, "references"] == ["A dog lying on a couch."]
    assert pairs.loc[3, "image_path"] == "COCO_val2014_000000000005.jpg"
    assert pairs.loc[4, "correct"] == "A car near a tree."
    assert pairs.loc[4, "image_path"] == "COCO_val2014_000000000007.jpg"


def test_coco_sm(coco_sm_meta):
    captions = load_coco_sm(coco_sm_meta)
    assert len(captions) == 6 and set(captions["translator"]) == {"google"}
    assert coco_sm_text_to_image(captions, "de").tolist() == [0, 0, 1]
    assert captions[captions["lang"] == "de"]["caption"].tolist()[1] == "ein brauner Hund"
    mapping = load_coco_sm_id_mapping(coco_sm_meta.parent / "id_mapping.json")
    assert np.array_equal(mapping, [0, 0, 1])
    with pytest.raises(ValueError, match="no language"):
        load_coco_sm(coco_sm_meta, langs=["xx"])


def test_composite_latin1_and_bom(tmp_path):
    header = "Input.image_url;Input.text1;Answer.Q1Answer\n"
    (tmp_path / "coco_correctness.csv").write_bytes(("\ufeff" + header + "http://x/a.jpg;a café;4\n").encode("utf-8"))
    (tmp_path / "30k_correctness.csv").write_bytes((header + "http://x/b.jpg;a café;3\n").encode("latin-1"))
    table = load_composite(tmp_path)
    assert sorted(table["candidate"]) == ["a café", "a café"]
    assert set(table["subset"]) == {"coco", "30k"}
