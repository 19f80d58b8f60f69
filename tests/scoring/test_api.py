"""The Scorer API surface the app relies on (docs/scoring.md)."""
from __future__ import annotations

import pytest

from scoring.api import MetricResult, ScoreItem, get_scorer


def test_info_documents_every_metric(tiny_scorer):
    for name in tiny_scorer.metric_names():
        info = tiny_scorer.info(name)
        assert info.name == name and info.description and info.citation
        assert info.range[0] == 0.0 and info.range[1] > 0
    assert tiny_scorer.info("MCS").languages is None and tiny_scorer.info("CLIP-S").languages == ("en",)
    assert tiny_scorer.info("RefPAC-S").needs_references and not tiny_scorer.info("PAC-S").needs_references
    assert tiny_scorer.info("UMIC-C").backbone == "tiny BLIP ITM (random)"
    assert tiny_scorer.info("MCS").backbone == "tiny multilingual text encoder (random, sentence-transformers layout) + tiny CLIP (random)"


def test_progress_and_result_shape(tiny_scorer, images):
    calls = []
    results = tiny_scorer.score(
        [ScoreItem(images[0], "a dog"), ScoreItem(images[1], "a cat")], ["pac-s", "CLIP-S"],
        progress=lambda fraction, desc="": calls.append((fraction, desc)),
    )
    assert list(results) == ["CLIP-S", "PAC-S"]  # registry order, registry spelling
    assert [c[0] for c in calls] == [0.0, 0.5, 1.0] and calls[0][1] == "scoring CLIP-S"
    result = results["PAC-S"]
    assert isinstance(result, MetricResult) and result.available
    assert len(result.values) == len(result.truncated) == 2 and result.backbone.startswith("tiny PAC-S")


def test_get_scorer_shares_one_instance(tiny_dir):
    assert get_scorer("tiny") is get_scorer("tiny")
    assert get_scorer("tiny").score([], ["CLIP-S"])["CLIP-S"].values == []


def test_warm_up_reports_availability(tiny_dir, tmp_path, monkeypatch, images):
    """Warm-up loads what can load and names the reason for what cannot, the same reason
    scoring then reports."""
    from scoring.api import Scorer

    missing = tmp_path / "no-such-umic-checkpoint"
    monkeypatch.setenv("CAPLENS_REGISTRY_UMIC_ITM_PATH", str(missing))
    scorer = Scorer("tiny", device="cpu")
    reasons = scorer.warm_up(["CLIP-S", "BLEU-1", "UMIC", "UMIC-C"])
    assert reasons == {"CLIP-S": None, "BLEU-1": None, "UMIC": f"checkpoint not found: {missing}", "UMIC-C": None}
    assert "clip" in scorer._backbones  # warmed: loaded before the first score()
    results = scorer.score([ScoreItem(images[0], "a dog")], ["UMIC", "UMIC-C"])
    assert results["UMIC"].unavailable == reasons["UMIC"] and results["UMIC"].values == [None]
    assert results["UMIC-C"].unavailable is None and 0.0 <= results["UMIC-C"].values[0] <= 1.0


def test_device_selection():
    import pytest
    import torch

    from scoring.backbones import select_placement

    placement = select_placement("cpu")
    assert placement.dtype == torch.float32 and placement.label == "cpu/float32"
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            select_placement("cuda")
    with pytest.raises(ValueError, match="unknown device"):
        select_placement("quantum")
    auto = select_placement(None)
    expected = "cuda" if torch.cuda.is_available() else ("mps" if torch.backends.mps.is_available() else "cpu")
    assert auto.device.type == expected
    if auto.device.type == "cuda":
        assert auto.dtype in (torch.bfloat16, torch.float16)


def test_concurrent_score_calls_agree_with_sequential_ones(tiny_dir, images):
    """The app scores from several request threads on one shared Scorer."""
    import threading

    from scoring.api import Scorer

    scorer = Scorer("tiny", device="cpu")  # cold: the threads race to load the backbones
    metrics = ["CLIP-S", "RefPAC-S", "MCS", "SPECS", "UMIC-C"]
    batches = [[ScoreItem(images[i], f"caption {i} {k}", ["a reference"]) for i in range(3)] for k in range(4)]
    results, errors = {}, []

    def work(k):
        try:
            results[k] = scorer.score(batches[k], metrics)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and len(results) == 4
    reference = Scorer("tiny", device="cpu")
    for k, batch in enumerate(batches):
        expected = reference.score(batch, metrics)
        for name in metrics:
            assert results[k][name].values == expected[name].values


def test_one_thread_scores_every_stage_on_the_calling_thread(tiny_dir, monkeypatch):
    """A worker given one CPU (a Ray actor) must use one: with threads=1 neither the text pass
    nor the next image batch runs beside the caller, and the values stay those of the
    overlapping pipeline."""
    import threading

    import torch

    from scoring.api import Scorer
    from scoring.pixels import ImagePipeline
    from tests.scoring.conftest import random_image

    items = [ScoreItem(random_image(100 + i), f"a picture number {i}", [f"picture {i}"]) for i in range(40)]
    seen: list[str] = []
    original = ImagePipeline._prepare_on_side_stream

    def recording(self, prepare, batch):
        seen.append(threading.current_thread().name)
        return original(self, prepare, batch)

    monkeypatch.setattr(ImagePipeline, "_prepare_on_side_stream", recording)
    before = torch.get_num_threads()
    try:
        overlapping = Scorer("tiny", device="cpu").score(items, ["CLIP-S", "RefCLIP-S", "MCS"])
        assert seen and all(name.startswith("caplens-prepare") for name in seen)  # 40 images: 2 batches
        seen.clear()
        serial = Scorer("tiny", device="cpu", threads=1)
        results = serial.score(items, ["CLIP-S", "RefCLIP-S", "MCS"])
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert seen == [] and not serial._text_worker._threads and serial.images._workers._max_workers == 1
    for name, result in results.items():
        assert result.values == pytest.approx(overlapping[name].values, abs=1e-5), name
