"""CapLens-R's fluency model: a trigram language model of the texts raters judged fluent. Its
probabilities equal a hand computation and sum to one, damaged text scores lower, the recipe
cross-fits the training captions' features, and the metric scores what the recipe predicted."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from scoring.metrics.fluency import ANY_LANGUAGE, FluencyModel, TrigramModel, tokens


def test_tokens_are_padded_words_and_cjk_characters():
    assert tokens("A red ball, left.") == ["<s>", "<s>", "a", "red", "ball", ",", "left", ".", "</s>"]
    assert tokens("赤い ボール") == ["<s>", "<s>", "赤", "い", "ボ", "ー", "ル", "</s>"]
    assert tokens("") == ["<s>", "<s>", "</s>"]


def test_trigram_probability_is_the_hand_computed_interpolation():
    model = TrigramModel.fit(["a red ball", "a blue ball"])
    # Trigrams: (<s>,<s>,a) x2, (<s>,a,red), (<s>,a,blue), (a,red,ball), (a,blue,ball), (red,ball,</s>), (blue,ball,</s>).
    # Continuations: a 1 (<s>), red 1, blue 1, ball 2 (red, blue), </s> 1 -> 6 bigram types, vocabulary 5 + 1.
    d = 0.75
    unigram_ball = (2 + 0.5) / (6 + 0.5 * 6)
    bigram_ball_after_red = (1 - d) / 1 + d * 1 / 1 * unigram_ball  # "red" seen once, one type after it
    trigram = (1 - d) / 1 + d * 1 / 1 * bigram_ball_after_red  # (a, red) seen once, one type after it
    assert model.probability("a", "red", "ball") == pytest.approx(trigram)
    unigram_red = (1 + 0.5) / 9
    # After "a": red once and blue once (count 2, two types); "red" once of them.
    bigram_red_after_a = (1 - d) / 2 + d * 2 / 2 * unigram_red
    trigram_red = (1 - d) / 2 + d * 2 / 2 * bigram_red_after_a  # (<s>, a) seen twice, two types after it
    assert model.probability("<s>", "a", "red") == pytest.approx(trigram_red)
    assert model.probability("x", "y", "never") == pytest.approx(0.5 / 9)  # unseen context and word


@pytest.mark.parametrize("context", [("<s>", "a"), ("a", "red"), ("ball", "a"), ("nowhere", "seen")])
def test_probabilities_over_the_vocabulary_and_the_unseen_word_sum_to_one(context):
    model = TrigramModel.fit(["a red ball", "a blue ball", "the ball is red", "a ball"])
    words = list(model.continuations) + ["<unseen>"]
    assert sum(model.probability(*context, w) for w in words) == pytest.approx(1.0)


def test_damaged_text_scores_lower_and_its_unseen_pairs_are_counted():
    model = TrigramModel.fit(["a small green circle", "a small red square", "a large green square"])
    fluent = model.features("a small green square")
    damaged = model.features("a green small square")  # adjective order
    assert fluent[0] > damaged[0] and fluent[1] > damaged[1]
    assert fluent[2] == 0.0 and fluent[4] == 0.0
    # Of its five pairs (<s> a), (a green), (green small), (small square), (square </s>), the middle three are unseen;
    # of its five triples only (<s> <s> a) was seen.
    assert damaged[2] == pytest.approx(3 / 5) and damaged[3] == pytest.approx(4 / 5)
    assert damaged[4] == 1.0
    one = model.features("a large red square")  # only (large, red) is an unseen pair
    assert one[2] == pytest.approx(1 / 5) and one[4] == 1.0
    logs = [math.log(model.probability(*t)) for t in
            zip(tokens("a green small square"), tokens("a green small square")[1:], tokens("a green small square")[2:])]
    assert damaged[0] == pytest.approx(sum(logs) / len(logs)) and damaged[1] == pytest.approx(min(logs))


def test_a_fluency_model_reads_each_language_with_its_own_model_and_round_trips(tmp_path):
    model = FluencyModel.fit({"en": ["a red ball"], "de": ["ein roter Ball"]}, about={"threshold": 0.8})
    raw = model.raw(["a red ball", "ein roter Ball", "a red ball"], ["en", "de", "xx"])
    assert raw[0, 2] == 0.0 and raw[1, 2] == 0.0  # each seen in its own language
    assert np.allclose(raw[2], model.models[ANY_LANGUAGE].features("a red ball"))  # unknown language: all together
    assert model.raw(["ein roter Ball"], ["en"])[0, 2] > 0  # German text by the English model
    assert np.array_equal(model.features(["a red ball"], ["en"]), model.raw(["a red ball"], ["en"]).astype(np.float32))
    model.standardise_on(np.array([[1.0, 2, 3, 4, 5], [3.0, 2, 5, 4, 7]]))
    assert np.allclose(model.mean, [2, 2, 4, 4, 6]) and np.allclose(model.scale, [1, 1e-6, 1, 1e-6, 1])
    standardised = model.features(["a red ball"], ["en"])
    assert standardised.dtype == np.float32
    assert np.allclose(standardised, (model.raw(["a red ball"], ["en"]) - [2, 2, 4, 4, 6]) / [1, 1e-6, 1, 1e-6, 1])
    model.save(tmp_path)
    again = FluencyModel.load(tmp_path)
    texts, langs = ["a red ball", "a ball red", "ein Ball"], ["en", "en", "de"]
    assert np.array_equal(again.features(texts, langs), model.features(texts, langs))
    assert again.about == {"threshold": 0.8}
    first = (tmp_path / "fluency_lm.json.gz").read_bytes()
    model.save(tmp_path)
    assert (tmp_path / "fluency_lm.json.gz").read_bytes() == first  # same model, same bytes
    assert first[4:8] == b"\0\0\0\0"  # no time stamp in the gzip header, whenever it is written
    with pytest.raises(ValueError, match="^the fluency model has no fluent text to learn from: the set has no "
                                         "references and no caption rated fluent$"):
        FluencyModel.fit({"en": []})


def test_fluent_texts_are_the_references_and_the_captions_rated_fluent():
    from scoring.training import RECIPES

    rows = [{"language": "en", "references": ["r1", "r2"], "candidate": "good", "targets": [0.9, 0.8, 1, 1]},
            {"language": "en", "references": ["r1"], "candidate": "bad", "targets": [0.5, 0.79, 1, 1]},
            {"language": "de", "references": [], "candidate": "unrated", "targets": [0.5, float("nan"), 1, 1]},
            {"language": "de", "references": ["r3"], "candidate": "gut", "targets": [0.5, 1.0, 1, 1]}]
    assert RECIPES["caplens-r"].fluent_texts(rows, 0.8) == {"en": ["r1", "r2", "good"], "de": ["r3", "gut"]}


@pytest.mark.parametrize("apart", [False, True])
def test_a_head_with_a_fluency_model_scores_what_the_recipe_predicted(tmp_path, monkeypatch, apart):
    """The run keeps its fluency model in the head folder; each training caption's features come
    from a model fitted without its image's fold; the Scorer gives the recipe's predictions on
    held-out rows, and a damaged caption gets other fluency features than its fluent original.
    With `architecture.fluency_apart` the head keeps the fluency features' branch apart, and the
    registered metric loads it so."""
    from safetensors.torch import load_file

    from scoring.api import ScoreItem, Scorer
    from scoring.metrics.caplens_r import feature_size
    from scoring.metrics.fluency import FEATURES
    from scoring.training import RECIPES, load_config, train
    from scoring.training.data import image_key
    from scoring.training.trainer import split_rows
    from scoring.user_registry import register_run

    from scoring.tiny import ensure_tiny_checkpoints

    ensure_tiny_checkpoints()
    config = load_config("caplens-r-fluency-tiny", out=str(tmp_path / "run"),
                         architecture={"hidden": 16, "fluency_apart": apart})
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    result = train(config)
    about = json.loads((result.out_dir / "caplens_r.json").read_text(encoding="utf-8"))
    assert about.get("apart", 0) == (FEATURES if apart else 0)
    assert about["fluency"]["threshold"] == 0.8 and about["fluency"]["folds"] == 3
    assert set(about["fluency"]["texts"]) == {"en", "de"} and min(about["fluency"]["texts"].values()) > 10
    assert (result.out_dir / "fluency_lm.json.gz").is_file()

    recipe = RECIPES["caplens-r"]
    state = recipe.setup(config, torch.device("cpu"), tmp_path / "scratch")
    assert about["in_features"] == feature_size(state.vision.embedding_dim, fluency=True)
    train_rows, held, _, _ = split_rows(config)
    recipe.fit_on(state, train_rows)
    saved = FluencyModel.load(result.out_dir)
    assert np.allclose(saved.mean, state.fluency.mean) and np.allclose(saved.scale, state.fluency.scale)

    # Cross-fitting: a training caption's features come from the model without its fold.
    folds = {image_key(r): __import__("zlib").crc32(image_key(r).encode()) % 3 for r in train_rows}
    row = next(r for r in train_rows if r["targets"][1] >= 0.8)
    others = recipe.fluent_texts([r for r in train_rows if folds[image_key(r)] != folds[image_key(row)]], 0.8)
    expected = state.fluency.standardised(FluencyModel.fit(others).raw([row["candidate"]], [row["language"]]))[0]
    assert np.allclose(state.fluency_train[recipe.key(row)], expected)
    assert not np.allclose(expected, state.fluency.features([row["candidate"]], [row["language"]])[0])

    state.head.load_state_dict(load_file(str(result.out_dir / "model.safetensors")))
    rows = held[:10]
    recipe.prepare(state, rows, torch.device("cpu"))
    features = recipe.features(state, rows, torch.device("cpu")).numpy()
    assert np.allclose(features[:, -FEATURES:], saved.features([r["candidate"] for r in rows],
                                                               [r["language"] for r in rows]), atol=1e-6)
    with torch.no_grad():
        predicted = np.clip(recipe.predict(state, rows, torch.device("cpu")), 0.0, 1.0)
    name = register_run(result.out_dir, profile="tiny", check=False)
    items = [ScoreItem(r["image"], r["candidate"], references=r["references"], lang=r["language"]) for r in rows]
    scored = np.array(Scorer("tiny", "cpu").score(items, [name])[name].values, dtype=float)
    assert np.allclose(scored, predicted, atol=1e-5)

    fluent = next(r for r in held if r["language"] == "en" and r["targets"][1] >= 0.9)
    words = fluent["candidate"].split()
    damaged = " ".join(words[1:] + words[:1])
    f = saved.raw([fluent["candidate"], damaged], ["en", "en"])
    assert f[1, 0] < f[0, 0] and f[1, 2] > f[0, 2]


def test_the_cross_mode_refuses_a_fluency_threshold_it_would_ignore(tmp_path):
    from scoring.tiny import ensure_tiny_checkpoints
    from scoring.training import RECIPES, load_config

    ensure_tiny_checkpoints()
    config = load_config("caplens-r-cross-tiny", out=str(tmp_path / "run"), options={"fluency_threshold": 0.8})
    with pytest.raises(ValueError, match="fluency_threshold adds features to the frozen mode"):
        RECIPES["caplens-r"].setup(config, torch.device("cpu"), tmp_path / "scratch")


def test_a_fluency_branch_needs_fluency_features(tmp_path):
    from scoring.tiny import ensure_tiny_checkpoints
    from scoring.training import RECIPES, load_config

    ensure_tiny_checkpoints()
    config = load_config("caplens-r-tiny", out=str(tmp_path / "run"), architecture={"fluency_apart": True})
    with pytest.raises(ValueError, match="set options.fluency_threshold"):
        RECIPES["caplens-r"].setup(config, torch.device("cpu"), tmp_path / "scratch")
