"""BLEU, METEOR, ROUGE-L and CIDEr-D agree with the COCO caption toolkit's own pipeline."""
from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest

from scoring.api import ScoreItem
from scoring.metrics import coco

pytestmark = pytest.mark.java

CANDIDATES = [
    "A man is riding a horse on the beach.",
    "Two dogs play with a red ball in the grass!",
    "a plate of food, with broccoli and rice",
    "A group of people standing next to a yellow bus.",
    "The cat sits on the window-sill, looking out.",
]
REFERENCES = [
    ["A person rides a brown horse along the beach.", "Man riding horse near the ocean", "a horse and rider on sand"],
    ["Two dogs are playing in the grass with a ball.", "dogs chasing a red ball"],
    ["A plate with broccoli, rice and meat.", "Food on a white plate.", "a healthy meal"],
    ["People waiting for a yellow school bus.", "A yellow bus parked near a crowd of people."],
    ["A cat sitting on a windowsill.", "The cat looks out of the window."],
]


def _toolkit_scores():
    """What pycocoevalcap's COCOEvalCap does: PTB-tokenise, then each scorer."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.meteor.meteor import Meteor
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    meteor = Meteor()  # its JVM loads while the tokenizer runs
    gts = {i: [{"caption": r} for r in refs] for i, refs in enumerate(REFERENCES)}
    res = {i: [{"caption": c}] for i, c in enumerate(CANDIDATES)}
    tokenizer = PTBTokenizer()
    gts, res = tokenizer.tokenize(gts), tokenizer.tokenize(res)
    out = {}
    bleu, bleu_items = Bleu(4).compute_score(gts, res, verbose=0)
    for n in range(4):
        out[f"BLEU-{n + 1}"] = (bleu[n], bleu_items[n])
    try:
        out["METEOR"] = meteor.compute_score(gts, res)
    finally:
        meteor.meteor_p.kill()
        meteor.meteor_p.wait()
    rouge, rouge_items = Rouge().compute_score(gts, res)
    out["ROUGE-L"] = (rouge, list(rouge_items))
    cider, cider_items = Cider().compute_score(gts, res)
    out["CIDEr"] = (cider, list(cider_items))
    return out, gts, res


def test_ngram_metrics_match_the_toolkit(java, tiny_scorer):
    names = ["BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr"]
    items = [ScoreItem(None, c, r) for c, r in zip(CANDIDATES, REFERENCES)]
    tiny_scorer.warm_up(["METEOR"])  # both JVMs load side by side
    expected, gts, res = _toolkit_scores()
    ours = tiny_scorer.score(items, names)
    for name in names:
        corpus, per_item = expected[name]
        assert ours[name].unavailable is None, name
        assert ours[name].values == pytest.approx(list(per_item), abs=1e-9), name
        assert ours[name].aggregate == pytest.approx(corpus, abs=1e-9), name
    # Our PTB tokenisation is the toolkit's, string for string.
    assert coco.ptb_tokenize(CANDIDATES) == [res[i][0] for i in range(len(CANDIDATES))]
    assert coco.ptb_tokenize(REFERENCES[2]) == gts[2]
    # BLEU's corpus value pools counts; it is not the mean of the per-item values.
    assert ours["BLEU-4"].aggregate != pytest.approx(sum(ours["BLEU-4"].values) / 5, abs=1e-6)


def test_cider_idf_comes_from_the_scored_set(java, tiny_scorer):
    alone = tiny_scorer.score([ScoreItem(None, CANDIDATES[0], REFERENCES[0])], ["CIDEr"])["CIDEr"]
    together = tiny_scorer.score([ScoreItem(None, c, r) for c, r in zip(CANDIDATES, REFERENCES)], ["CIDEr"])["CIDEr"]
    assert alone.values == [0.0]
    assert together.values[0] > 0


def test_batches_with_corpus_frequencies_equal_the_whole_set(java, tiny_scorer):
    """CIDEr-D with document frequencies of a whole corpus: batches score as the whole set does."""
    items = [ScoreItem(None, c, r) for c, r in zip(CANDIDATES, REFERENCES)]
    whole = tiny_scorer.score(items, ["CIDEr"])["CIDEr"].values
    frequencies = coco.CiderDocumentFrequency()
    for refs in REFERENCES:
        frequencies.add(coco.ptb_tokenize(refs))
    assert frequencies.reference_sets == 5
    batched = []
    for start in (0, 2, 4):
        batch = tiny_scorer.score(items[start:start + 2], ["CIDEr"], cider_document_frequency=frequencies)
        batched += batch["CIDEr"].values
    assert batched == whole  # the toolkit's arithmetic, bit for bit
    # Without the corpus frequencies a batch of one has no IDF and scores 0.
    alone = tiny_scorer.score(items[4:], ["CIDEr"])["CIDEr"].values
    assert alone == [0.0] and batched[4] > 0.5
    # Scoring does not grow the corpus table with the candidates' unseen n-grams.
    assert ("window-sill",) not in frequencies.counts and frequencies.counts[("window-sill",)] == 0.0


def test_items_without_references_get_none(java, tiny_scorer):
    items = [ScoreItem(None, CANDIDATES[0], REFERENCES[0]), ScoreItem(None, "no refs here", [])]
    results = tiny_scorer.score(items, ["BLEU-1", "ROUGE-L"])
    assert results["BLEU-1"].values[1] is None and results["ROUGE-L"].values[1] is None
    assert results["BLEU-1"].values[0] is not None


def test_meteor_is_thread_safe_and_restarts_after_a_crash(java, tiny_scorer):
    items = [ScoreItem(None, c, r) for c, r in zip(CANDIDATES, REFERENCES)]
    baseline = tiny_scorer.score(items, ["METEOR"])["METEOR"].values
    outputs, errors = [], []

    def work(subset):
        try:
            outputs.append((subset, tiny_scorer.score([items[i] for i in subset], ["METEOR"])["METEOR"].values))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=([0, 1, 2],)), threading.Thread(target=work, args=([3, 4],))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors and len(outputs) == 2
    for subset, values in outputs:
        assert values == pytest.approx([baseline[i] for i in subset], abs=1e-12)

    coco._meteor._proc.kill()  # the Java process dies: the next call starts a new one
    coco._meteor._proc.wait()
    again = tiny_scorer.score(items[:2], ["METEOR"])["METEOR"]
    assert again.unavailable is None and again.values == pytest.approx(baseline[:2], abs=1e-12)


def test_spice_scores_an_exact_match_as_1(java, tiny_scorer):
    """SPICE's success path needs the Stanford CoreNLP 3.6.0 jars (about 400 MB, fetched from
    Stanford by `python -m pycocoevalcap.spice.get_stanford_models`, not from PyPI): where they
    are absent this test is skipped, and says so, rather than passing without scoring."""
    missing = coco.Spice._missing_resources()
    if missing:
        pytest.skip(f"SPICE's CoreNLP jars are not installed ({', '.join(Path(m).name for m in missing)})")
    result = tiny_scorer.score([ScoreItem(None, "a dog", ["a dog"])], ["SPICE"])["SPICE"]
    assert result.unavailable is None and result.values == [pytest.approx(1.0)]


def test_a_meteor_answer_that_is_not_a_number_ends_the_process_and_the_next_call_starts_anew(
        java, tiny_scorer, monkeypatch):
    items = [ScoreItem(None, c, r) for c, r in zip(CANDIDATES, REFERENCES)]
    baseline = tiny_scorer.score(items[:2], ["METEOR"])["METEOR"].values
    broken = coco._meteor._proc
    assert broken is not None and broken.poll() is None
    monkeypatch.setattr(coco._meteor, "_read", lambda: "garbage")  # an answer the protocol cannot hold
    failed = tiny_scorer.score(items[2:3], ["METEOR"])["METEOR"]
    assert failed.unavailable == "METEOR failed: could not convert string to float: 'garbage'"
    assert coco._meteor._proc is None and broken.poll() is not None  # closed and reaped, not left running
    monkeypatch.undo()
    again = tiny_scorer.score(items[:3], ["METEOR"])["METEOR"]
    assert again.unavailable is None and again.values[:2] == pytest.approx(baseline, abs=1e-12)
    assert coco._meteor._proc is not broken and coco._meteor._proc.poll() is None


def _spice_jar_stand_in(calls):
    from pycocoevalcap.spice.spice import SPICE_JAR

    """What `spice-1.0.jar IN -out OUT` writes, for the toolkit's own Python to read: per image_id
    an "All" F-score made from its input (0.1 per reference + 0.01 per candidate token), so each
    item's value says which input it came from."""
    def check_call(command, cwd=None):
        calls.append(command)
        given = json.loads(Path(command[command.index(SPICE_JAR) + 1]).read_text())
        out = command[command.index("-out") + 1]
        Path(out).write_text(json.dumps([
            {"image_id": entry["image_id"], "scores": {"All": {
                "f": 0.1 * len(entry["refs"]) + 0.01 * len(entry["test"].split()), "pr": 0.5, "re": 0.5}}}
            for entry in reversed(given)]))  # the jar's output order is not the input's
    return check_call


def test_spice_gives_each_item_the_toolkits_f_score_of_its_own_caption(java, tiny_scorer, monkeypatch):
    """SPICE's Python side, where the CoreNLP jars are absent: the toolkit's compute_score runs
    as shipped and only the Java call is replaced by a stand-in that writes the jar's output file."""
    from pycocoevalcap.spice import spice as toolkit

    calls = []
    monkeypatch.setattr(coco.Spice, "_missing_resources", staticmethod(lambda: []))
    monkeypatch.setattr(toolkit, "get_stanford_models", lambda: None)  # (it downloads them where absent)
    monkeypatch.setattr(toolkit.subprocess, "check_call", _spice_jar_stand_in(calls))
    items = [ScoreItem(None, "a dog on grass", ["a dog", "one dog"]), ScoreItem(None, "no references", []),
             ScoreItem(None, "a cat", ["a cat sits", "a cat", "cat"]), ScoreItem(None, "two birds fly high", ["birds"])]
    result = tiny_scorer.score(items, ["SPICE"])["SPICE"]
    assert result.unavailable is None and len(calls) == 1
    assert result.values == pytest.approx([0.2 + 0.04, None, 0.3 + 0.02, 0.1 + 0.04], abs=1e-12)
    assert result.aggregate == pytest.approx((0.24 + 0.32 + 0.14) / 3, abs=1e-12)

    def fails(command, cwd=None):
        raise subprocess.CalledProcessError(1, command)

    monkeypatch.setattr(toolkit.subprocess, "check_call", fails)
    failed = tiny_scorer.score(items[:1], ["SPICE"])["SPICE"]
    assert failed.unavailable.startswith("SPICE failed: Command") and failed.values == [None]

    def vanished(command, cwd=None):
        raise FileNotFoundError(2, "No such file or directory", "java")

    monkeypatch.setattr(toolkit.subprocess, "check_call", vanished)
    gone = tiny_scorer.score(items[:1], ["SPICE"])["SPICE"]
    assert gone.unavailable == "SPICE failed: [Errno 2] No such file or directory: 'java'" and gone.values == [None]


def test_spice_reports_missing_resources(java, tiny_scorer, tmp_path, monkeypatch):
    """SPICE names the CoreNLP jars a toolkit folder lacks."""
    item = ScoreItem(None, "a dog", ["a dog"])
    monkeypatch.setattr(coco, "_toolkit_dir", lambda: tmp_path)  # a toolkit without the models
    result = tiny_scorer.score([item], ["SPICE"])["SPICE"]
    assert result.unavailable == (
        "SPICE needs the Stanford CoreNLP 3.6.0 models, not present: stanford-corenlp-3.6.0.jar, "
        "stanford-corenlp-3.6.0-models.jar (python -m pycocoevalcap.spice.get_stanford_models fetches them)")
    assert result.values == [None]


def test_spice_names_only_the_jar_its_toolkit_folder_lacks(java, tiny_scorer, tmp_path, monkeypatch):
    """Each CoreNLP jar that the toolkit's spice/lib folder lacks is named, and only that one."""
    lib = tmp_path / "spice" / "lib"
    lib.mkdir(parents=True)
    (lib / "stanford-corenlp-3.6.0.jar").write_bytes(b"PK")
    monkeypatch.setattr(coco, "_toolkit_dir", lambda: tmp_path)
    assert coco.Spice._missing_resources() == [str(lib / "stanford-corenlp-3.6.0-models.jar")]
    result = tiny_scorer.score([ScoreItem(None, "a dog", ["a dog"])], ["SPICE"])["SPICE"]
    assert result.unavailable.startswith("SPICE needs the Stanford CoreNLP 3.6.0 models, not present: "
                                         "stanford-corenlp-3.6.0-models.jar (python -m")
    (lib / "stanford-corenlp-3.6.0-models.jar").write_bytes(b"PK")
    assert coco.Spice._missing_resources() == []
    (lib / "stanford-corenlp-3.6.0.jar").unlink()
    assert coco.Spice._missing_resources() == [str(lib / "stanford-corenlp-3.6.0.jar")]


def test_degenerate_candidates_do_not_break_alignment(java, tiny_scorer, images):
    """Empty and punctuation-only captions tokenise to '' and keep every other row in place."""
    candidates = ["", "...", CANDIDATES[1], "   "]
    refs = [REFERENCES[0], REFERENCES[0], REFERENCES[1], REFERENCES[2]]
    items = [ScoreItem(images[i], c, r) for i, (c, r) in enumerate(zip(candidates, refs))]
    results = tiny_scorer.score(items, ["BLEU-1", "ROUGE-L", "CIDEr", "METEOR", "CLIP-S"])
    assert all(r.unavailable is None for r in results.values())
    alone = tiny_scorer.score([ScoreItem(None, CANDIDATES[1], REFERENCES[1])], ["ROUGE-L"])["ROUGE-L"]
    assert results["ROUGE-L"].values[2] == pytest.approx(alone.values[0])
    assert results["ROUGE-L"].values[0] == 0.0 and results["ROUGE-L"].values[1] == 0.0
    assert all(isinstance(v, float) for v in results["CLIP-S"].values)


def test_document_frequencies_that_make_every_idf_zero_are_named_with_the_way_out():
    """Counted from no reference set, from one image's references, or from images that share
    the same references, every CIDEr-D value is 0: each case is told apart, in these words."""
    assert coco.document_frequency_problem(coco.CiderDocumentFrequency()) == (
        "not meaningful: no reference sets to count document frequencies from")
    tail = (" give every n-gram they count an IDF of 0 (counted from this batch: every value is 0); give several "
            "images with their own references or take the document frequencies from a collection")
    one = coco.CiderDocumentFrequency()
    one.add(["a red ball on grass", "a ball on the grass"])
    assert coco.document_frequency_problem(one) == "not meaningful: document frequencies from the references of one image" + tail
    same = coco.CiderDocumentFrequency()
    for _ in range(3):
        same.add(["a red ball on grass"])
    assert coco.document_frequency_problem(same) == "not meaningful: document frequencies from 3 identical reference sets" + tail
    same.add(["two dogs in the snow"])
    assert coco.document_frequency_problem(same) is None


def test_a_meteor_process_starts_once_closes_and_starts_again(monkeypatch):
    """A MeteorProcess of its own (the scorer's is made at import), its JVM stood in for by a
    sleeping process: warming it twice starts one, closing ends it, the next warm-up starts anew."""
    started = []

    def start(self):
        self._proc = subprocess.Popen(["sleep", "60"], stdin=subprocess.PIPE)
        started.append(self._proc)

    monkeypatch.setattr(coco.MeteorProcess, "_start", start)
    process = coco.MeteorProcess()
    try:
        process.warm_up()
        process.warm_up()
        assert len(started) == 1 and started[0].poll() is None
        process.close()
        assert process._proc is None and started[0].poll() is not None
        process.warm_up()
        assert len(started) == 2 and process._proc is started[1]
    finally:
        process.close()


def test_the_meteor_reader_is_a_daemon_thread_so_a_process_can_exit_while_the_jvm_runs(java):
    """Python joins every non-daemon thread before its exit handlers run, and the handler that
    ends the JVM is one of them: a reader that was no daemon would wait on the JVM's output for ever."""
    before = set(threading.enumerate())
    process = coco.MeteorProcess()
    try:
        process.warm_up()
        readers = [t for t in threading.enumerate() if t not in before]
        assert len(readers) == 1 and readers[0].daemon
    finally:
        process.close()


def test_bleu_runs_the_toolkit_once_a_batch_silently_and_defaults_to_bleu4(java, tiny_scorer, monkeypatch, capsys):
    """BLEU-1..4 of one batch share one toolkit call, which prints nothing (its verbose mode
    writes to stdout, into `caplens score`'s output); a BLEU row of a registry without `n` is BLEU-4."""
    import dataclasses

    from pycocoevalcap.bleu.bleu import Bleu as ToolkitBleu

    from scoring.metrics.base import ScoreContext

    calls, real = [], ToolkitBleu.compute_score
    monkeypatch.setattr(ToolkitBleu, "compute_score", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    items = [ScoreItem(None, c, r) for c, r in zip(CANDIDATES, REFERENCES)]
    capsys.readouterr()
    scores = tiny_scorer.score(items, ["BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4"])
    assert len(calls) == 1 and capsys.readouterr().out == ""
    spec = tiny_scorer.registry.metrics["BLEU-4"]
    unnumbered = coco.Bleu(dataclasses.replace(spec, n=None)).compute(ScoreContext(items, [None] * len(items), None))
    assert unnumbered.values == scores["BLEU-4"].values and unnumbered.aggregate == scores["BLEU-4"].aggregate


def test_meteor_says_when_its_process_is_silent_or_gone(monkeypatch):
    """What `_read` tells the user: METEOR not answering within its time limit, or its process
    ended (the reader thread puts None when the JVM's output closes)."""
    import queue

    from scoring.metrics.base import MetricUnavailable

    monkeypatch.setattr(coco, "METEOR_TIMEOUT_S", 0.2)
    process = coco.MeteorProcess()
    process._lines = queue.Queue()
    with pytest.raises(MetricUnavailable) as silent:
        process._read()
    assert str(silent.value) == "METEOR did not answer within 0 s"
    process._lines.put(None)
    with pytest.raises(MetricUnavailable) as gone:
        process._read()
    assert str(gone.value) == "the METEOR process exited unexpectedly"
    process._lines.put("0.5")
    assert process._read() == "0.5"


def test_a_caption_holding_meteors_field_separator_scores_as_without_it(java):
    """METEOR's protocol separates fields with |||: a caption holding it must not add a field."""
    references = {0: ["a dog runs on the grass"]}
    plain = coco._meteor.score(references, {0: ["a dog on grass"]})
    assert coco._meteor.score(references, {0: ["a dog ||| on grass"]}) == plain
    assert coco._meteor.score({0: ["a dog runs ||| on the grass"]}, {0: ["a dog on grass"]}) == plain


def test_a_text_tokenised_once_is_not_sent_to_the_tokenizer_again(java, monkeypatch):
    import uuid

    text = f"A cached caption, {uuid.uuid4().hex}."
    first = coco.ptb_tokenize([text])
    assert first == [f"a cached caption {text.split(', ')[1].rstrip('.').lower()}"]

    def no_java(*args, **kwargs):
        raise AssertionError("the tokenizer ran for a text it had already tokenised")

    monkeypatch.setattr(coco.subprocess, "run", no_java)
    assert coco.ptb_tokenize([text, text]) == first * 2


def test_a_failing_tokenizer_is_named_with_the_start_of_what_it_said(tmp_path, monkeypatch):
    """A tokenizer that exits with an error (here a stand-in `java` that writes 300 characters,
    one of them no UTF-8, to stderr) makes the n-gram metrics unavailable, quoting 200 of them."""
    from scoring.metrics.base import MetricUnavailable

    fake = tmp_path / "java"
    fake.write_bytes(b"#!/bin/sh\nprintf 'E\\377' >&2\nprintf '%0299d' 0 >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setattr(coco, "require_java", lambda: str(fake))
    with pytest.raises(MetricUnavailable) as failed:
        coco.ptb_tokenize(["a caption no cache holds yet 7f3a"])
    assert str(failed.value) == "PTB tokenizer failed: E\ufffd" + "0" * 198


def test_without_java_the_ngram_metrics_say_what_to_install_and_a_batch_without_references_needs_none(
        tiny_scorer, tmp_path, monkeypatch):
    """No `java` on PATH: BLEU and CIDEr are unavailable, naming the package to install; a batch
    where no item has references gives None per item and no truncation flag, without
    looking for Java at all."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with_references = tiny_scorer.score([ScoreItem(None, CANDIDATES[0], REFERENCES[0])], ["BLEU-1", "CIDEr"])
    for name in ("BLEU-1", "CIDEr"):
        assert with_references[name].unavailable == (
            "needs a Java runtime (install default-jre-headless); `java` is not on PATH"), name
    without = tiny_scorer.score([ScoreItem(None, "a dog", []), ScoreItem(None, "a cat", [])], ["BLEU-1", "ROUGE-L"])
    for name in ("BLEU-1", "ROUGE-L"):
        assert without[name].unavailable is None and without[name].values == [None, None], name
        assert without[name].truncated == [False, False], name


def test_the_ngram_metrics_of_one_batch_tokenise_it_once(java, tiny_scorer, monkeypatch):
    """BLEU, ROUGE-L and CIDEr-D of one batch share one tokenisation (kept in the batch's memo), and
    they truncate nothing (a flag the tables show beside a score)."""
    calls, real = [], coco.ptb_tokenize
    monkeypatch.setattr(coco, "ptb_tokenize", lambda texts: calls.append(len(texts)) or real(texts))
    items = [ScoreItem(None, c, r) for c, r in zip(CANDIDATES, REFERENCES)]
    scores = tiny_scorer.score(items, ["BLEU-1", "BLEU-4", "ROUGE-L", "CIDEr"])
    assert all(scores[name].available and scores[name].truncated == [False] * len(items) for name in scores)
    assert calls == [len(CANDIDATES) + sum(map(len, REFERENCES))]
