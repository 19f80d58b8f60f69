"""The Metric protocol (scoring.metrics.base.Metric): every family declares the Scorer's hooks,
and every metric's MetricInfo gives its direction and the range its formula can reach."""
from __future__ import annotations

import numpy as np
import pytest

from scoring.metrics import build_metric
from scoring.metrics.base import Metric, MetricOutput, MetricUnavailable
from scoring.metrics.clip_score import ref_clip_score, ref_clip_score_max
from scoring.registry import load_registry

SHIPPED = ("tiny", "world", "hub", "bench")


def _metrics(profile: str):
    registry = load_registry(profile)
    return [(name, build_metric(spec)) for name, spec in registry.metrics.items()]


@pytest.mark.parametrize("profile", SHIPPED)
def test_every_shipped_metric_declares_the_hooks_and_a_range(profile):
    for name, metric in _metrics(profile):
        # the optional hooks come from the protocol; info and compute must be the family's own
        assert Metric in type(metric).__mro__, name
        assert type(metric).info is not Metric.info and type(metric).compute is not Metric.compute, name
        info = metric.info("label")
        assert info.higher_is_better is True, name
        low, high = info.range
        assert low == 0.0 and high > low, name


def test_ref_clip_score_range_is_two_w_over_w_plus_one():
    # by hand: H(w, 1) = 2·w·1/(w + 1); w = 2.5 -> 5/3.5, w = 2.0 (RefPAC-S) -> 4/3
    assert ref_clip_score_max(2.5) == pytest.approx(5 / 3.5)
    assert ref_clip_score_max(2.0) == pytest.approx(4 / 3)
    for profile in ("world", "hub"):
        registry = load_registry(profile)
        for name in ("RefCLIP-S", "RefPAC-S"):
            spec = registry.metrics[name]
            assert build_metric(spec).info("x").range == pytest.approx((0.0, 2 * spec.w / (spec.w + 1))), name
            assert build_metric(registry.metrics[name.replace("Ref", "")]).info("x").range == (0.0, spec.w)


def test_ref_clip_score_reaches_its_maximum_and_never_passes_it():
    rng = np.random.default_rng(0)
    e = rng.normal(size=(1, 8))
    e /= np.linalg.norm(e)
    # image, candidate and reference embedded alike: cos = 1 everywhere, the top of the range
    assert ref_clip_score(e, e, [e], 2.5)[0] == pytest.approx(5 / 3.5)
    images = rng.normal(size=(200, 8))
    texts = rng.normal(size=(200, 8))
    images /= np.linalg.norm(images, axis=1, keepdims=True)
    texts /= np.linalg.norm(texts, axis=1, keepdims=True)
    refs = [np.vstack([t, r]) for t, r in zip(texts, rng.normal(size=(200, 8)))]
    refs = [r / np.linalg.norm(r, axis=1, keepdims=True) for r in refs]
    values = ref_clip_score(images, texts, refs, 2.5)
    assert values.min() >= 0.0 and values.max() <= 5 / 3.5 + 1e-12
    assert values.max() > 2.5 / 3.5  # past the old stated half-range, below w = 2.5


class _Bare(Metric):
    """A family with only info and compute: the protocol's hooks are its defaults."""

    needs_image = False
    needs_references = False

    def __init__(self, spec):
        self.spec = spec

    def compute(self, context):
        return MetricOutput([1.0] * len(context.items), [False] * len(context.items))


def test_a_family_without_hooks_gets_the_protocols_defaults():
    metric = _Bare(None)
    assert metric.embedding_requests(None) == []
    assert metric.check_available() is None and metric.warm_up() is None


def test_the_scorer_calls_check_available_and_warm_up(tiny_scorer, monkeypatch):
    name = tiny_scorer.metric_names()[0]
    metric = tiny_scorer._metrics[name]
    calls = []
    monkeypatch.setattr(metric, "warm_up", lambda: calls.append("warm"), raising=False)
    monkeypatch.setattr(metric, "check_available",
                        lambda: (_ for _ in ()).throw(MetricUnavailable("no tool here")), raising=False)
    assert tiny_scorer.unavailable_reason(name) == "no tool here"
    assert tiny_scorer.warm_up([name]) == {name: "no tool here"} and calls == []  # not warmed when unavailable
    monkeypatch.setattr(metric, "check_available", lambda: None, raising=False)
    assert tiny_scorer.warm_up([name]) == {name: None} and calls == ["warm"]


def _late_embeddings(scorer, groups, monkeypatch) -> list:
    """Score each group of metrics on empty embedding caches; every embedding stored after the
    Scorer's one pass over the requests (while the metrics run), as (metrics, cache, key)."""
    from PIL import Image

    from scoring.api import ScoreItem, Scorer
    from scoring.cache import LRUCache

    phase = {"now": "before"}
    stored_late = []
    original_put, original_embed = LRUCache.put, Scorer._embed_requested

    def put(cache, key, value):
        if phase["now"] == "metrics":
            stored_late.append((cache, key[-1] if isinstance(key, tuple) else key))
        return original_put(cache, key, value)

    def embed(self, *args):
        context = original_embed(self, *args)
        phase["now"] = "metrics"
        return context

    monkeypatch.setattr(LRUCache, "put", put)
    monkeypatch.setattr(Scorer, "_embed_requested", embed)
    picture = [Image.new("RGB", (40, 32), colour) for colour in ((200, 30, 30), (30, 200, 30))]
    items = [ScoreItem(picture[0], "a red square on a table", ["a red square", "a square"]),
             ScoreItem(None, "a caption without an image", ["a reference"]),
             ScoreItem(picture[1], "ein grünes Feld", ["a green field"], lang="de")]
    late = []
    for group in groups:
        for backbone in scorer._backbones.values():
            for kind in ("image_cache", "text_cache"):
                if hasattr(backbone, kind):
                    getattr(backbone, kind).clear()
        phase["now"], stored_late[:] = "before", []
        results = scorer.score(items, group)
        assert phase["now"] == "metrics"
        caches = {id(getattr(backbone, kind)): f"{name} {kind}" for name, backbone in scorer._backbones.items()
                  for kind in ("image_cache", "text_cache") if hasattr(backbone, kind)}
        late += [(group, caches[id(cache)], key) for cache, key in stored_late if id(cache) in caches]
        learned = [n for n in group if scorer.info(n).needs_image]
        assert all(results[n].values[0] == results[n].values[0] for n in learned)  # scored, not NaN
    return late


@pytest.mark.parametrize("profile", ["tiny", "world"])
def test_embedding_requests_cover_everything_compute_encodes(profile, monkeypatch):
    """Each metric lists the embeddings it reads (`embedding_requests`), the Scorer encodes them
    all first, and then no metric encodes anything more: a request of the wrong kind, backbone
    or rows would show as an embedding stored while the metrics run."""
    from scoring.api import Scorer

    scorer = Scorer(profile, device="cpu")
    names = [n for n in scorer.metric_names() if scorer.unavailable_reason(n) is None]
    assert _late_embeddings(scorer, [names], monkeypatch) == []
    assert sum(hasattr(b, k) for b in scorer._backbones.values() for k in ("image_cache", "text_cache")) >= 3


def test_each_metric_alone_requests_everything_it_encodes(monkeypatch):
    """The same, one metric at a time on empty caches: together, one metric's request can hide
    another's gap (RefCLIP-S that requested only its references was served CLIP-S's candidates)."""
    from scoring.api import Scorer

    scorer = Scorer("tiny", device="cpu")
    names = [n for n in scorer.metric_names() if scorer.unavailable_reason(n) is None and scorer.info(n).needs_image]
    assert len(names) >= 8 and _late_embeddings(scorer, [[n] for n in names], monkeypatch) == []


# What each family says about itself (SPEC.md and the papers): inputs, languages, the attainable
# range as a function of w, words its description starts and ends with, and its citation's
# first author. The description words are checked case-sensitively: they are what users read.
N_GRAM = (False, True, ("en",))
FAMILIES = {
    "clip-s": ((True, False, ("en",)), lambda w: (0.0, w), "Image-caption compatibility: cosine between",
               "No references.", ("Hessel et al., CLIPScore", "Sarto et al.")),
    "refclip-s": ((True, True, ("en",)), lambda w: (0.0, 2 * w / (w + 1)), "Harmonic mean of",
                  "needs references.", ("Hessel et al., CLIPScore", "Sarto et al.")),
    "mcs": ((True, False, None), lambda w: (0.0, w), "Multilingual CLIPScore: cosine between the CLIP image",
            "Any language; no references.", ("Kim et al., PR-MCS",)),
    "specs": ((True, False, ("en",)), lambda w: (0.0, 1.0), "Cosine between image and caption embeddings of a "
              "specificity-enhanced LongCLIP (248 text tokens)", "Suited to long captions.", ("SPECS: ",)),
    "itm": ((True, False, ("en",)), lambda w: (0.0, 1.0),
            {"umic-c": "P(match) from an image-text-matching cross-encoder: softmax of its two ITM logits",
             "umic": "UMIC's S(I, X) = sigmoid(W·i_CLS + b): one logit"},
            "needs detector region features.", ("Lee et al., UMIC",)),
    "caplens-r": ((True, False, None), lambda w: (0.0, 1.0), "Predicted human rating:",
                  "Only as good as the ratings it learned from.", ("CapLens-R",)),
    "bleu": (N_GRAM, lambda w: (0.0, 1.0), "BLEU-n: geometric mean", "pools counts over all items.",
             ("Papineni et al.",)),
    "meteor": (N_GRAM, lambda w: (0.0, 1.0), "METEOR 1.5:", "(Java, as in the COCO toolkit).", ("Denkowski & Lavie",)),
    "rouge-l": (N_GRAM, lambda w: (0.0, 1.0), "ROUGE-L: F-measure (β = 1.2)", "best over references.", ("Lin, ROUGE",)),
    "cider": (N_GRAM, lambda w: (0.0, 10.0), "CIDEr-D: TF-IDF weighted 1..4-gram cosine", "`caplens score-corpus`).",
              ("Vedantam et al.",)),
    "spice": (N_GRAM, lambda w: (0.0, 1.0), "SPICE: F-score over scene-graph tuples",
              "parsed from candidate and references.", ("Anderson et al.",)),
}


@pytest.mark.parametrize("profile", SHIPPED)
def test_every_metric_describes_itself_as_its_family_does(profile):
    registry = load_registry(profile)
    for name, spec in registry.metrics.items():
        (needs_image, needs_references, languages), span, starts, ends, cited = FAMILIES[spec.family]
        info = build_metric(spec).info("the backbone's label")
        assert (info.name, info.family) == (name, spec.family), name
        assert (info.needs_image, info.needs_references, info.languages) == (needs_image, needs_references,
                                                                             languages), name
        assert info.range == pytest.approx(span(spec.w)), name
        starts = starts[spec.variant] if isinstance(starts, dict) else starts  # a family with variants
        assert info.description.startswith(starts) and info.description.endswith(ends), (name, info.description)
        assert any(info.citation.startswith(c) for c in cited), (name, info.citation)
        assert (info.w, info.prefix) == (spec.w, spec.prefix), name
        if needs_image:  # learned metrics name the checkpoint they run on; n-gram metrics their toolkit
            assert info.backbone == "the backbone's label", name
        else:
            assert info.backbone == "COCO caption toolkit (pycocoevalcap)", name
    specs = registry.metrics["SPECS"]
    scale = specs.extra.get("scale", "paper")
    assert f"on the {scale} scale" in build_metric(specs).info("x").description
    mcs = {name: build_metric(registry.metrics[name]).info("x").description for name in ("MCS", "PR-MCS")}
    assert "perturbation robust" in mcs["PR-MCS"] and "perturbation robust" not in mcs["MCS"]


@pytest.mark.parametrize("profile", ["tiny", "world"])
def test_a_batch_without_any_image_gives_image_metrics_no_value_and_no_error(profile):
    from scoring.api import ScoreItem, Scorer

    scorer = Scorer(profile, device="cpu")
    learned = [n for n in scorer.metric_names() if scorer.info(n).needs_image and scorer.unavailable_reason(n) is None]
    results = scorer.score([ScoreItem(None, "a red square", ["a red square"]),
                            ScoreItem(None, "a dog", ["a cat"])], learned)
    assert len(learned) >= 8
    for name in learned:
        assert results[name].unavailable is None and results[name].values == [None, None], name
        assert results[name].truncated == [False, False], name


class _Tower:
    """An embedding tower that records what it is asked for and answers the same unit vector
    for everything (so each score is w · cos 1 = w)."""

    def __init__(self, dim: int):
        self.dim, self.asked = dim, []

    def text_embeddings(self, texts):
        self.asked.append(("text", list(texts)))
        truncated = np.array([len(t) > 15 for t in texts])  # as if its limit were 15 characters
        return np.tile(np.eye(self.dim, dtype=np.float32)[:1], (len(texts), 1)), truncated

    def image_embeddings(self, images, keys=None):
        self.asked.append(("image", list(images), keys))
        return np.tile(np.eye(self.dim, dtype=np.float32)[:1], (len(images), 1))


def _mcs_context(text_dim: int, image_dim: int):
    from scoring.api import ScoreItem
    from scoring.metrics.base import ScoreContext

    spec = load_registry("tiny").metrics["MCS"]
    towers = {spec.backbone: _Tower(text_dim), spec.vision_backbone: _Tower(image_dim)}
    items = [ScoreItem("red.png", "ein rotes Quadrat", lang="de"), ScoreItem(None, "no image"),
             ScoreItem("blue.png", "a blue square")]
    return spec, towers, ScoreContext(items, ["key-red", None, "key-blue"], towers.__getitem__)


def test_mcs_reads_each_image_with_its_key_and_scores_only_rows_with_an_image():
    spec, towers, context = _mcs_context(8, 8)
    output = build_metric(spec).compute(context)
    assert output.values == [pytest.approx(spec.w), None, pytest.approx(spec.w)]  # cos 1 x w; no image, no value
    assert output.truncated == [True, False, False]  # the tower's flag, on its row
    assert towers[spec.vision_backbone].asked == [("image", ["red.png", "blue.png"], ["key-red", "key-blue"])]
    assert towers[spec.backbone].asked == [("text", [spec.prefix + "ein rotes Quadrat", spec.prefix + "a blue square"])]
    requests = build_metric(spec).embedding_requests(context)
    assert [(r.backbone, r.kind, r.inputs) for r in requests] == [
        (spec.vision_backbone, "image", ("key-red", "key-blue")),
        (spec.backbone, "text", (spec.prefix + "ein rotes Quadrat", spec.prefix + "a blue square"))]


def test_mcs_names_both_widths_when_its_towers_disagree():
    spec, _, context = _mcs_context(8, 6)
    with pytest.raises(MetricUnavailable, match=r"^text encoder outputs 8 dims but the vision tower 6$"):
        build_metric(spec).compute(context)


def test_mcs_and_pr_mcs_say_which_text_encoder_they_read_and_every_metric_reports_its_w_and_prefix():
    import dataclasses

    registry = load_registry("tiny")
    described = {name: build_metric(registry.metrics[name]).info("x").description for name in ("MCS", "PR-MCS")}
    assert "a multilingual text encoder distilled into CLIP's text space, clipped at 0" in described["MCS"]
    assert "the PR-MCS fine-tuned multilingual text encoder (perturbation robust), clipped" in described["PR-MCS"]
    rows = [spec for profile in ("tiny", "world") for spec in load_registry(profile).metrics.values()]
    assert "caplens-r" in {spec.family for spec in rows}
    for spec in rows:  # every learned family reports its row's w and prefix, not a default
        if not FAMILIES[spec.family][0][0]:
            continue  # n-gram metrics have neither
        info = build_metric(dataclasses.replace(spec, w=spec.w + 1.5, prefix="A photo depicts ")).info("x")
        assert (info.w, info.prefix) == (spec.w + 1.5, "A photo depicts "), spec.name


def test_caplens_r_says_what_it_reads_and_where_its_provenance_is():
    """The description is how a Space visitor learns what the learned metric reads and where to
    find what it was trained on; its middle sentences are checked as the users read them."""
    described = next(build_metric(spec).info("x").description for spec in load_registry("world").metrics.values()
                     if spec.family == "caplens-r")
    for words in ("candidate and reference embeddings (and, for a head trained so, an image-text",
                  "reading of the pair and a word trigram model of the texts its raters judged fluent), trained on",
                  "a collection's human ratings (see its training.json for the collection, the number of ratings",
                  "and tau_c on held-out images). Only"):
        assert words in described, words


def test_harmonic_mean_by_hand_and_zero_where_both_scores_are_zero():
    """RefCLIP-S's combination: 2ab/(a+b), and 0 (not nan, no warning) where both are 0."""
    import warnings

    from scoring.metrics.base import harmonic_mean

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = harmonic_mean([0.0, 0.5, 0.2, 0.0], [0.0, 0.5, 0.8, 0.7])
    assert out.dtype == np.float64
    assert out.tolist() == pytest.approx([0.0, 0.5, 2 * 0.2 * 0.8 / 1.0, 0.0], abs=1e-15)
