"""Every metric of every shipped profile gives each item the same value however the items are
batched (in the spirit of torchmetrics' MetricTester): split in two, reordered, scored with
every cache cleared or served from the caches. CIDEr-D is exempt from the split check (its IDF
comes from the items scored together) and is checked split with its document frequencies held
fixed instead.

`tiny` and `world` run as shipped. The hub checkpoints cannot load offline and the bench ones
take 1.3 GB to build, so the `hub` and `bench` profiles run their own metric rows (w, prefix,
variant, families) on the tiny checkpoint of each backbone's kind: this checks their rows and the
code, not their published weights. SPICE cannot run without the Stanford CoreNLP 3.6.0 models
and is checked only to say so the same way in every call.
"""
from __future__ import annotations

import math

import pytest

from scoring.api import ScoreItem, Scorer
from scoring.metrics import coco
from scoring.metrics.coco import reference_document_frequency
from scoring.registry import load_registry
from tests.scoring.conftest import random_image

pytestmark = pytest.mark.java  # BLEU, METEOR, ROUGE-L and CIDEr-D run the toolkit's Java tools

LONG = ("a small brown dog and a large black dog are running on the green grass next to a red bus while "
        "two people are standing near a tree and a white bird is sitting on top of the blue car at the "
        "side of the road in the city under a big sky with three trees and a yellow house behind them ") * 2
IMAGES = [random_image(seed, (48 + 8 * seed, 40)) for seed in range(5)]
ITEMS = [
    ScoreItem(IMAGES[0], "a red circle above a blue square", ["a red circle over a blue square", "two shapes"]),
    ScoreItem(IMAGES[1], "Two dogs play with a red ball in the grass!",
              ["two dogs playing in the grass", "dogs and a ball", "a red ball on a field"]),
    ScoreItem(IMAGES[0], "A photo of something.", ["a red circle above a blue square"]),  # the same image again
    ScoreItem(IMAGES[2], LONG, ["dogs running near a bus", LONG[:80]]),  # over 77 tokens
    ScoreItem(IMAGES[3], "ein roter Kreis über einem blauen Quadrat", [], lang="de"),  # no references
    ScoreItem(None, "a cat sitting on a table", ["a cat on a table", "a small cat sitting"]),  # no image
    ScoreItem(IMAGES[4], "a cat", ["a cat on a mat", "a small black cat"]),
]
ORDER = [5, 2, 6, 0, 4, 1, 3]
SPLIT = 3
BATCH_IDF = {"cider"}  # families whose value depends on the other items of the batch
CANNOT_RUN_HERE = {"SPICE"}  # no Stanford CoreNLP 3.6.0 models in the test environment


def _tiny_path_of_kind(tiny, name: str, kind: str):
    """The tiny checkpoint for a backbone: the one of the same name and kind, else one of its kind."""
    if name in tiny.backbones and tiny.backbones[name].kind == kind:
        return tiny.backbones[name].path
    return next(spec.path for spec in tiny.backbones.values() if spec.kind == kind)


def _scorer_on_tiny_checkpoints(profile: str, tmp_path_factory) -> Scorer:
    """A scorer of `profile`'s metric rows with each backbone loaded from a tiny checkpoint."""
    tiny = load_registry("tiny", overrides=[])
    rows = load_registry(profile, overrides=[])
    config = tmp_path_factory.mktemp(f"{profile}-on-tiny") / "registry.toml"
    config.write_text("".join(
        f'[backbones."{name}"]\npath = "{_tiny_path_of_kind(tiny, name, spec.kind)}"\n'
        for name, spec in rows.backbones.items()), encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:  # only while the registry is read
        patch.setenv("CAPLENS_REGISTRY_CONFIG", str(config))
        patch.setattr("scoring.bench.ensure_bench_checkpoints", lambda *a, **k: None)
        scorer = Scorer(profile, device="cpu")
    assert {b.path for b in scorer.registry.backbones.values()} <= {b.path for b in tiny.backbones.values()}
    return scorer


PROFILES = ["tiny", "world", "hub", "bench"]


@pytest.fixture(scope="module")
def scorers(tiny_scorer, tmp_path_factory):
    made = {"tiny": tiny_scorer, "world": Scorer("world", device="cpu")}
    for profile in ("hub", "bench"):
        made[profile] = _scorer_on_tiny_checkpoints(profile, tmp_path_factory)
    return made


def _score(scorer, items, **options) -> dict[str, tuple]:
    results = scorer.score(items, **options)
    return {name: (r.unavailable, r.values, r.truncated) for name, r in results.items()}


def _cold(scorer, items, **options) -> dict[str, tuple]:
    """Scored with every cache empty: embeddings, pair scores and PTB tokens."""
    scorer.clear_caches()
    coco._ptb_cache.clear()
    return _score(scorer, items, **options)


def _same(expected: dict, got: dict, names) -> None:
    for name in names:
        (why, values, truncated), (why_got, values_got, truncated_got) = expected[name], got[name]
        assert why_got == why, name
        assert truncated_got == truncated, name
        assert [v is None for v in values_got] == [v is None for v in values], name
        assert [v for v in values_got if v is not None] == pytest.approx(
            [v for v in values if v is not None], rel=1e-6, abs=1e-6), name


@pytest.fixture(scope="module")
def whole(scorers):
    """Each profile's values of all items in one call, every cache empty."""
    return {profile: _cold(scorer, ITEMS) for profile, scorer in scorers.items()}


@pytest.mark.parametrize("profile", PROFILES)
def test_every_metric_but_spice_runs_and_scores_what_it_can(scorers, whole, profile):
    """The checks below compare values: every metric must have some, else they check nothing."""
    registry = scorers[profile].registry
    unavailable = {name for name, (why, _, _) in whole[profile].items() if why}
    assert unavailable == CANNOT_RUN_HERE & set(registry.metrics)
    for name, (why, values, _) in whole[profile].items():
        if why:
            continue
        spec = registry.metrics[name]
        needs_references = spec.family in ("refclip-s", "bleu", "meteor", "rouge-l", "cider")
        needs_image = spec.family not in ("bleu", "meteor", "rouge-l", "cider")
        expected_none = [(needs_references and not item.references) or (needs_image and item.image is None)
                         for item in ITEMS]
        assert [v is None for v in values] == expected_none, name
        assert all(math.isfinite(v) for v in values if v is not None), name
    assert any(any(t) for _, _, t in whole[profile].values())  # the long caption was cut somewhere


@pytest.mark.parametrize("profile", PROFILES)
def test_values_do_not_depend_on_the_caches(scorers, whole, profile):
    scorer = scorers[profile]
    names = list(whole[profile])
    _same(whole[profile], _score(scorer, ITEMS), names)  # served from the caches the cold call filled
    _same(whole[profile], _cold(scorer, ITEMS), names)  # and computed again from nothing


@pytest.mark.parametrize("profile", PROFILES)
def test_values_do_not_depend_on_the_order_of_the_items(scorers, whole, profile):
    scorer = scorers[profile]
    reordered = _cold(scorer, [ITEMS[i] for i in ORDER])
    back = {name: (why, [None] * len(ITEMS), [False] * len(ITEMS)) for name, (why, _, _) in reordered.items()}
    for name, (_, values, truncated) in reordered.items():
        for position, index in enumerate(ORDER):
            back[name][1][index], back[name][2][index] = values[position], truncated[position]
    _same(whole[profile], back, list(whole[profile]))  # CIDEr-D too: the same set, so the same IDF


@pytest.mark.parametrize("profile", PROFILES)
def test_values_do_not_depend_on_the_split_of_the_items(scorers, whole, profile):
    scorer = scorers[profile]
    first, second = _cold(scorer, ITEMS[:SPLIT]), _cold(scorer, ITEMS[SPLIT:])
    joined = {name: (why, first[name][1] + second[name][1], first[name][2] + second[name][2])
              for name, (why, _, _) in first.items()}
    names = [n for n in whole[profile] if scorer.registry.metrics[n].family not in BATCH_IDF]
    _same(whole[profile], joined, names)
    cider = [n for n in whole[profile] if scorer.registry.metrics[n].family in BATCH_IDF]
    assert cider == ["CIDEr"]
    # Its values do move with the batch (the reason for the exemption) ...
    assert joined["CIDEr"][1] != pytest.approx(whole[profile]["CIDEr"][1])


@pytest.mark.parametrize("profile", PROFILES)
def test_cider_with_fixed_document_frequencies_does_not_depend_on_the_split(scorers, whole, profile):
    scorer = scorers[profile]
    # The frequencies of all items' reference sets: what CIDEr-D counts over the whole batch.
    fixed = reference_document_frequency([item.references for item in ITEMS])
    parts = [_cold(scorer, part, metrics=["CIDEr"], cider_document_frequency=fixed)["CIDEr"]
             for part in (ITEMS[:SPLIT], ITEMS[SPLIT:])]
    joined = {"CIDEr": (None, parts[0][1] + parts[1][1], parts[0][2] + parts[1][2])}
    _same(whole[profile], joined, ["CIDEr"])
    reordered = _cold(scorer, [ITEMS[i] for i in ORDER], metrics=["CIDEr"], cider_document_frequency=fixed)
    assert reordered["CIDEr"][1] == pytest.approx([whole[profile]["CIDEr"][1][i] for i in ORDER])
