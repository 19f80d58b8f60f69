"""Loaders of Polaris, Nebula and LongCap-Arena, each on a small fixture built in the layout its
publisher distributes (docs/analysis.md, "Data sets"):

- the Polos / DENEB / VELA CSV layout: `mt`, `refs` (a Python list literal), `score`, `imgid`,
  images under `images/` (read by validate/dataset.py of keio-smilab24/Polos and
  Ka2ukiMatsuda/DENEB; CaptionEvalKit's local loader reads the same columns);
- the Hugging Face Parquet shards `data/<split>-*.parquet`: Polaris (yuwd/Polaris) refs, cand,
  img {bytes, path}, human_score; Nebula (Ka2ukiMatsuda/Nebula) file_name, image, refs, mt,
  human_score; LongCap-Arena (Ka2ukiMatsuda/LongCap-Arena, split dci_val.desc ...) file_name,
  image, refs, cand, score;
- Spica's corrected Nebula labels (hiranohachiman/Spica `spica_*.csv`: imgid, mt, score).
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scoring.analysis.datasets import (
    LOADERS, load_longcap_arena, load_nebula, load_polaris, load_polos_csv, spica_corrections,
)

POLARIS_CSV = (
    "mt,refs,score,imgid\n"
    "a dog  runs,\"['a dog running', 'a brown dog']\",0.75,COCO_val2014_000000000042.jpg\n"
    "a cat,\"['a dog running', 'a brown dog']\",0.25,COCO_val2014_000000000042.jpg\n"
    "two kids play,\"['children playing']\",1.0,nocaps_17.jpg\n"
)


def _image_struct(name: str, data: bytes) -> dict:
    return {"bytes": data, "path": name}


def _parquet(path, columns: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)


def test_polaris_csv_layout(tmp_path):
    folder = tmp_path / "polaris"
    folder.mkdir()
    (folder / "polaris_test.csv").write_text(POLARIS_CSV)
    table = load_polaris(tmp_path)  # the data_en folder: polaris/polaris_test.csv is found inside
    assert table["candidate"].tolist() == ["a dog runs", "a cat", "two kids play"]
    assert table["human"].tolist() == [0.75, 0.25, 1.0]
    assert table["references"][0] == ["a dog running", "a brown dog"]
    assert table["image_path"][2] == "images/nocaps_17.jpg"
    assert table["collection"].unique().tolist() == ["Polaris"]
    assert table["item_id"].nunique() == 3
    assert LOADERS["polaris"](folder / "polaris_test.csv")["human"].sum() == 2.0


def test_polaris_hub_parquet(tmp_path):
    _parquet(tmp_path / "data" / "test-00000-of-00001.parquet", {
        "refs": [["a red bus", "a bus"], ["a man"]], "cand": ["a bus", "a woman"],
        "img": [_image_struct("bus.jpg", b"JPEG1"), _image_struct("man.jpg", b"JPEG2")],
        "human_score": pa.array([0.5, 0.125], type=pa.float32()),
    })
    _parquet(tmp_path / "data" / "train-00000-of-00001.parquet", {
        "refs": [["x"]], "cand": ["y"], "img": [_image_struct("t.jpg", b"T")], "human_score": [1.0]})
    table = load_polaris(tmp_path)
    assert table["candidate"].tolist() == ["a bus", "a woman"]  # the test split only
    assert table["image_id"].tolist() == ["bus.jpg", "man.jpg"]
    assert table["image"].tolist() == [b"JPEG1", b"JPEG2"]
    assert table["human"].tolist() == [0.5, 0.125]


def test_nebula_hub_parquet_with_spica_corrections(tmp_path):
    _parquet(tmp_path / "data" / "test-00000-of-00001.parquet", {
        "file_name": ["000001.jpg", "000002.jpg"], "image": [_image_struct("a", b"A"), _image_struct("b", b"B")],
        "refs": [["a plane"], ["a boat"]], "mt": ["a plane in the sky", "a car"], "human_score": [0.2, 0.9],
    })
    spica = tmp_path / "spica"
    spica.mkdir()
    # two Spica rows for one caption: the correction is their mean; the other caption is not in Spica
    (spica / "spica_test.csv").write_text("imgid,mt,score\n000001.jpg,a plane  in the sky,0.6\n000001,a plane in the sky,0.8\n")
    assert spica_corrections(spica) == {("000001", "a plane in the sky"): pytest.approx(0.7)}
    published = load_nebula(tmp_path)
    assert published["human"].tolist() == [0.2, 0.9]
    corrected = load_nebula(tmp_path, corrections=spica)
    assert corrected["human"].tolist() == [pytest.approx(0.7), 0.9]
    assert corrected["score_original"].tolist() == [0.2, 0.9]
    assert corrected["corrected"].tolist() == [True, False]


def test_nebula_csv_layout(tmp_path):
    (tmp_path / "nebula_test.csv").write_text("mt,refs,score,imgid\na boat,\"['a small boat']\",0.4,7.jpg\n")
    table = load_nebula(tmp_path / "nebula_test.csv")
    assert table.loc[0, ["candidate", "human", "image_path"]].tolist() == ["a boat", 0.4, "images/7.jpg"]


def test_longcap_arena_splits_and_aspects(tmp_path):
    _parquet(tmp_path / "data" / "dci_val.desc-00000-of-00001.parquet", {
        "file_name": ["sa_1.jpg"], "image": [_image_struct("sa_1.jpg", b"S")], "refs": [["a long reference"]],
        "cand": ["a long candidate"], "score": [4.0]})
    _parquet(tmp_path / "data" / "dci_test.desc-00000-of-00001.parquet", {
        "file_name": ["sa_2.jpg"], "image": [_image_struct("sa_2.jpg", b"S")], "refs": [["r"]],
        "cand": ["testb caption"], "score": [2.0]})
    testa = load_longcap_arena(tmp_path, "testa", "desc")
    assert testa["candidate"].tolist() == ["a long candidate"]
    assert testa[["aspect", "subset"]].iloc[0].tolist() == ["descriptiveness", "testa"]
    assert load_longcap_arena(tmp_path, "testb", "desc")["human"].tolist() == [2.0]
    (tmp_path / "rel_dci_test.csv").write_text("cand,refs,score,image\nshort,['r'],3,sa_3.jpg\n")
    assert LOADERS["longcap-arena-testb-rel"](tmp_path)["image_path"].tolist() == ["images/sa_3.jpg"]
    with pytest.raises(ValueError, match="aspect must be one of"):
        load_longcap_arena(tmp_path, "testa", "length")


@pytest.mark.parametrize("body, message", [
    ("mt,refs,score,imgid\nok,\"['r']\",1,a.jpg\nbad,not a list,1,b.jpg\n", r"polaris_test\.csv:3: refs is not a list"),
    ("mt,refs,score,imgid\nok,\"['r']\",high,a.jpg\n", r"polaris_test\.csv:2: score 'high' is not a number"),
    ("mt,refs,imgid\nok,\"['r']\",a.jpg\n", r"polaris_test\.csv:1: missing column\(s\) score"),
    ("mt,refs,score,imgid\n,\"['r']\",1,a.jpg\n", r"polaris_test\.csv:2: no mt"),
])
def test_malformed_csv_is_refused_with_file_and_line(tmp_path, body, message):
    (tmp_path / "polaris_test.csv").write_text(body)
    with pytest.raises(ValueError, match=message):
        load_polaris(tmp_path)


def test_malformed_parquet_row_is_named(tmp_path):
    _parquet(tmp_path / "data" / "test-00000-of-00001.parquet", {
        "refs": [["r"], ["r"]], "cand": ["fine", "no picture"],
        "img": [_image_struct("a.jpg", b"A"), {"bytes": None, "path": "b.jpg"}], "human_score": [0.1, 0.2]})
    with pytest.raises(ValueError, match=r"test-00000-of-00001\.parquet: row 2: no image bytes"):
        load_polaris(tmp_path)


def test_polos_csv_missing_file_and_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="polaris_test.csv"):
        load_polaris(tmp_path)
    with pytest.raises(FileNotFoundError):
        load_polos_csv(tmp_path / "absent.csv", "Polaris")
