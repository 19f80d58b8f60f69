"""A score's cache key (`scoring.fingerprint.score_fingerprint`) digests everything the value
depends on: every setting of the metric's registry row, the backbones it reads, and CIDEr-D's
document frequencies; the corpus runner's metric version is that same key.

Before: the key held only the profile and the checkpoints, so after CAPLENS_REGISTRY_CLIP_S_W=1.0
or a new prefix the app served CLIP-S values of the old setting, every n-gram metric had the key
"toolkit", and a CIDEr-D value scored with one image's IDF was served for a request of three.
"""
from __future__ import annotations

import json

import pytest
from PIL import Image

from scoring.api import Scorer
from scoring.corpus import open_manifest
from scoring.corpus.run import plan_corpus
from scoring.fingerprint import score_fingerprint
from scoring.metrics.coco import CiderDocumentFrequency

# (environment override, the metric whose values it changes, how to read the new setting back)
SETTINGS = {
    "CLIP-S w": ("CAPLENS_REGISTRY_CLIP_S_W", "1.0", "CLIP-S", lambda r: r.metrics["CLIP-S"].w, 1.0),
    "CLIP-S prefix": ("CAPLENS_REGISTRY_CLIP_S_PREFIX", "A picture of ", "CLIP-S",
                      lambda r: r.metrics["CLIP-S"].prefix, "A picture of "),
    "RefPAC-S w": ("CAPLENS_REGISTRY_REFPAC_S_W", "2.5", "RefPAC-S", lambda r: r.metrics["RefPAC-S"].w, 2.5),
    "SPECS scale": ("CAPLENS_REGISTRY_SPECS_SCALE", "released", "SPECS",
                    lambda r: r.metrics["SPECS"].extra["scale"], "released"),
    "UMIC variant": ("CAPLENS_REGISTRY_UMIC_VARIANT", "umic-c", "UMIC", lambda r: r.metrics["UMIC"].variant, "umic-c"),
    "BLEU-4 order": ("CAPLENS_REGISTRY_BLEU_4_N", "3", "BLEU-4", lambda r: r.metrics["BLEU-4"].n, 3),
    "CLIP token limit": ("CAPLENS_REGISTRY_CLIP_MAX_TOKENS", "20", "CLIP-S",
                         lambda r: r.backbones["clip"].max_tokens, 20),
    # CapLens-R reads this text backbone through an extra field (text_backbone), not `backbone`.
    "CapLens-R text encoder": ("CAPLENS_REGISTRY_MCLIP_TEXT_MAX_TOKENS", "16", "CapLens-R",
                               lambda r: r.backbones["mclip-text"].max_tokens, 16),
}


def _keys(scorer) -> dict[str, str | None]:
    return {name: score_fingerprint(scorer, name) for name in scorer.metric_names()}


@pytest.fixture(scope="module")
def world_scorer():
    return Scorer("world", device="cpu")  # registry and fingerprints only: no model loads here


@pytest.fixture(scope="module")
def world_keys(world_scorer):
    return _keys(world_scorer)


def test_keys_are_per_metric_and_stable(world_keys):
    again = _keys(Scorer("world", device="cpu"))
    assert again == world_keys
    keyed = {name: key for name, key in world_keys.items() if key is not None}
    assert set(world_keys) - set(keyed) == {"CIDEr"}  # batch IDF: no key (see below)
    assert len(set(keyed.values())) == len(keyed)  # BLEU-1 and BLEU-2 differ by their order n alone
    assert all(key.startswith("world:") for key in keyed.values())


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_a_changed_setting_changes_the_key_of_the_metrics_it_changes(monkeypatch, world_keys, setting):
    variable, value, metric, read_back, expected = SETTINGS[setting]
    monkeypatch.setenv(variable, value)
    changed = Scorer("world", device="cpu")
    assert read_back(changed.registry) == expected  # the override took effect
    keys = _keys(changed)
    assert keys[metric] != world_keys[metric]
    assert keys["BLEU-1"] == world_keys["BLEU-1"]
    if setting in ("CLIP-S w", "CLIP-S prefix"):  # a metric row's own setting: its neighbour keeps its key
        assert keys["RefCLIP-S"] == world_keys["RefCLIP-S"]


def _frequencies(*reference_sets: list[str]) -> CiderDocumentFrequency:
    frequencies = CiderDocumentFrequency()
    for references in reference_sets:
        frequencies.add(references)  # already PTB-tokenised
    return frequencies


def test_cider_is_keyed_by_its_document_frequencies_and_unkeyed_without(world_scorer):
    one = _frequencies(["a cat on a mat", "a cat sits"])
    three = _frequencies(["a cat on a mat", "a cat sits"], ["two dogs run"], ["a red bus"])
    assert score_fingerprint(world_scorer, "CIDEr") is None  # IDF of whatever batch it is scored in
    assert score_fingerprint(world_scorer, "CIDEr", one) != score_fingerprint(world_scorer, "CIDEr", three)
    same = _frequencies(["a cat on a mat", "a cat sits"], ["two dogs run"], ["a red bus"])
    assert score_fingerprint(world_scorer, "CIDEr", three) == score_fingerprint(world_scorer, "CIDEr", same)
    other_count = _frequencies(["a cat on a mat", "a cat sits"], ["two dogs run"], ["a red bus", "a bus"])
    assert score_fingerprint(world_scorer, "CIDEr", three) != score_fingerprint(world_scorer, "CIDEr", other_count)
    # Metrics without an IDF ignore the frequencies.
    assert score_fingerprint(world_scorer, "BLEU-4", three) == score_fingerprint(world_scorer, "BLEU-4")
    assert score_fingerprint(world_scorer, "CLIP-S", one) == score_fingerprint(world_scorer, "CLIP-S")


# -- the corpus runner's metric version is the same key -----------------------------------
def _manifest(folder, references: list[list[str]]):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "manifest.jsonl", "w", encoding="utf-8") as handle:
        for k, refs in enumerate(references):
            Image.new("RGB", (32, 24), (40 * k, 90, 200)).save(folder / f"{k}.png")
            handle.write(json.dumps({"id": str(k), "image": f"{k}.png", "candidate": "a cat on a mat",
                                     "references": refs}) + "\n")
    return open_manifest(folder / "manifest.jsonl")


def _versions(manifest, out, metrics) -> dict[str, tuple[str, str]]:
    plan = plan_corpus(manifest, out, profile="world", metrics=metrics)
    return {m.name: (m.version, m.checkpoint_hash) for m in plan.metrics}


def test_corpus_metric_version_changes_with_a_metric_setting(tmp_path, monkeypatch):
    manifest = _manifest(tmp_path / "corpus", [["a cat on a mat"], ["two dogs run"]])
    before = _versions(manifest, tmp_path / "out", ["CLIP-S", "BLEU-1"])
    app_key = score_fingerprint(Scorer("world", device="cpu"), "CLIP-S")  # as the app keys its store
    assert before["CLIP-S"] == (app_key, app_key)  # imported corpus scores are found by the app
    monkeypatch.setenv("CAPLENS_REGISTRY_CLIP_S_W", "1.0")
    after = _versions(manifest, tmp_path / "out", ["CLIP-S", "BLEU-1"])
    assert after["CLIP-S"][0] != before["CLIP-S"][0]
    assert after["BLEU-1"] == before["BLEU-1"]
    monkeypatch.setenv("CAPLENS_REGISTRY_BLEU_1_N", "2")
    assert _versions(manifest, tmp_path / "out", ["BLEU-1"])["BLEU-1"] != before["BLEU-1"]


@pytest.mark.java
def test_corpus_cider_version_changes_with_the_corpus_references(tmp_path, java):
    first = _versions(_manifest(tmp_path / "a", [["a cat on a mat"], ["two dogs run"]]), tmp_path / "out-a",
                      ["CIDEr", "BLEU-1"])
    again = _versions(_manifest(tmp_path / "b", [["a cat on a mat"], ["two dogs run"]]), tmp_path / "out-b",
                      ["CIDEr", "BLEU-1"])
    other = _versions(_manifest(tmp_path / "c", [["a cat on a mat"], ["two dogs walk"]]), tmp_path / "out-c",
                      ["CIDEr", "BLEU-1"])
    assert first == again
    assert other["CIDEr"] != first["CIDEr"] and other["BLEU-1"] == first["BLEU-1"]
