"""BLEU-1..4, METEOR, ROUGE-L, CIDEr-D and SPICE exactly as the COCO caption toolkit.

The toolkit's pipeline is: PTB-tokenise candidates and references (Stanford CoreNLP's
PTBTokenizer, lower-cased, punctuation dropped), then run each scorer on
``{id: [tokenised refs]}`` / ``{id: [tokenised candidate]}``.  This module runs the same jar
files with the same flags and uses pycocoevalcap's own BLEU, ROUGE-L and CIDEr-D scorers.
Two pieces are re-implemented around the toolkit's jars for robustness, not arithmetic:

* PTB tokenisation writes its temporary file to the system temp dir (the toolkit writes
  into its installed package folder) and caches tokenised strings, so an edited caption
  re-tokenises only itself; every line separator of a text becomes a space first (the
  toolkit flattens only \\n, so a \\r, \\v, \\f, U+2028 or U+2029 in one caption there gives
  every later text of the batch another's tokens), and the tokenizer must return exactly one
  line per text;
* METEOR talks to one long-lived ``meteor-1.5.jar -stdio`` process with the toolkit's
  SCORE/EVAL protocol, but under a lock that is always released, with a read timeout, and
  restarts the process after any failure (the toolkit's wrapper deadlocks after one error).

CIDEr-D's IDF comes from the references of the items scored together, as in the toolkit:
scores of one item change with the set it is scored in, and a single item always gets 0
(so such values have no score fingerprint and are never stored: `scoring.fingerprint`).
A corpus scored in batches passes `CiderDocumentFrequency` (counted over the whole
reference corpus first) so that every batch uses the corpus IDF.
"""
from __future__ import annotations

import atexit
import os
import queue
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scoring.cache import LRUCache
from scoring.metrics.base import Metric, MetricInfo, MetricOutput, MetricUnavailable, ScoreContext, rows_with

TOOLKIT_CITATION = "Chen et al., Microsoft COCO Captions: Data Collection and Evaluation Server, 2015"
CITATIONS = {
    "bleu": "Papineni et al., BLEU: a Method for Automatic Evaluation of Machine Translation, ACL 2002",
    "meteor": "Denkowski & Lavie, Meteor Universal: Language Specific Translation Evaluation, WMT 2014",
    "rouge-l": "Lin, ROUGE: A Package for Automatic Evaluation of Summaries, 2004",
    "cider": "Vedantam et al., CIDEr: Consensus-based Image Description Evaluation, CVPR 2015",
    "spice": "Anderson et al., SPICE: Semantic Propositional Image Caption Evaluation, ECCV 2016",
}
# Languages written without spaces between words: the PTB tokenizer splits at spaces and
# punctuation, so it reads a whole caption in one of these as a single word.
UNSPACED_LANGUAGES = ("ja", "zh", "th")
METEOR_TIMEOUT_S = float(os.environ.get("CAPLENS_METEOR_TIMEOUT", "120"))


def _toolkit_dir() -> Path:
    import pycocoevalcap

    return Path(list(pycocoevalcap.__path__)[0]).resolve()


def require_java() -> str:
    java = shutil.which("java")
    if java is None:
        raise MetricUnavailable("needs a Java runtime (install default-jre-headless); `java` is not on PATH")
    return java


# -- PTB tokenisation ------------------------------------------------------------------
_ptb_cache = LRUCache(262144)


def one_line(text: str) -> str:
    """`text` as one tokenizer input line: every line boundary ``str.splitlines`` knows (\\n, \\r,
    \\r\\n, \\v, \\f, \\x1c-\\x1e, \\x85, U+2028, U+2029) becomes a space. The PTB tokenizer starts a
    new output line at \\n, \\r, \\v, \\f, U+2028 and U+2029, which would shift every later text
    of the batch onto another text's tokens; it reads the others as a space or as punctuation
    that the toolkit drops, so turning them into spaces changes no caption's tokens."""
    return " ".join(text.splitlines())


def ptb_tokenize(texts: list[str]) -> list[str]:
    """The toolkit's tokenisation of each text (PTBTokenizer -preserveLines -lowerCase,
    then the toolkit's punctuation list removed); cached per text, keyed by its `one_line`
    form. The tokenizer must give back exactly one line per text, else MetricUnavailable."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PUNCTUATIONS, STANFORD_CORENLP_3_4_1_JAR

    java = require_java()
    flats = [one_line(text) for text in texts]
    tokenised = {flat: cached for flat in set(flats) if (cached := _ptb_cache.get(flat)) is not None}
    todo = [flat for flat in dict.fromkeys(flats) if flat not in tokenised]
    if todo:
        jar = _toolkit_dir() / "tokenizer" / STANFORD_CORENLP_3_4_1_JAR
        with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as handle:
            handle.write("\n".join(todo).encode())
            name = handle.name
        try:
            run = subprocess.run(
                [java, "-cp", str(jar), "edu.stanford.nlp.process.PTBTokenizer", "-preserveLines", "-lowerCase", name],
                capture_output=True, timeout=300, check=False,
            )
        finally:
            os.unlink(name)
        if run.returncode != 0:
            raise MetricUnavailable(f"PTB tokenizer failed: {run.stderr.decode(errors='replace').strip()[:200]}")
        lines = run.stdout.decode().split("\n")
        if len(lines) != len(todo):
            # Nothing is cached: a line out of step would give every later text another's tokens.
            raise MetricUnavailable(
                f"the PTB tokenizer returned {len(lines)} lines for {len(todo)} texts (it must return one per text); "
                "no n-gram score was computed"
            )
        for flat, line in zip(todo, lines):
            tokenised[flat] = " ".join(w for w in line.rstrip().split(" ") if w not in PUNCTUATIONS)
            _ptb_cache.put(flat, tokenised[flat])
    return [tokenised[flat] for flat in flats]


def _tokenised(context: ScoreContext) -> tuple[list[int], dict[int, list[str]], dict[int, list[str]]]:
    """Rows with references and their tokenised gts/res dicts, shared by the n-gram metrics."""
    if "coco" not in context.memo:
        rows = rows_with(context, references=True)
        texts = [context.items[i].candidate for i in rows] + [r for i in rows for r in context.items[i].references]
        tokens = ptb_tokenize(texts) if rows else []
        res, gts, cursor = {}, {}, len(rows)
        for j, i in enumerate(rows):
            res[i] = [tokens[j]]
            count = len(context.items[i].references)
            gts[i] = tokens[cursor : cursor + count]
            cursor += count
        context.memo["coco"] = (rows, gts, res)
    return context.memo["coco"]


# -- METEOR process --------------------------------------------------------------------
class MeteorProcess:
    """One ``meteor-1.5.jar -stdio`` process speaking the toolkit's protocol, thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue | None = None

    def _start(self) -> None:
        java = require_java()
        folder = _toolkit_dir() / "meteor"
        self._proc = subprocess.Popen(
            [java, "-jar", "-Xmx2G", "meteor-1.5.jar", "-", "-", "-stdio", "-l", "en", "-norm"],
            cwd=folder, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        self._lines = queue.Queue()
        threading.Thread(target=self._pump, args=(self._proc, self._lines), daemon=True).start()

    @staticmethod
    def _pump(proc: subprocess.Popen, lines: queue.Queue) -> None:
        for raw in proc.stdout:
            lines.put(raw.decode(errors="replace").strip())
        lines.put(None)  # end of stream: the process died

    def _send(self, line: str) -> None:
        self._proc.stdin.write((line + "\n").encode())
        self._proc.stdin.flush()

    def _read(self) -> str:
        try:
            line = self._lines.get(timeout=METEOR_TIMEOUT_S)
        except queue.Empty:
            raise MetricUnavailable(f"METEOR did not answer within {METEOR_TIMEOUT_S:.0f} s") from None
        if line is None:
            raise MetricUnavailable("the METEOR process exited unexpectedly")
        return line

    def warm_up(self) -> None:
        """Start the Java process now (it takes seconds to load) without waiting for it."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()

    def score(self, gts: dict, res: dict) -> tuple[float, list[float]]:
        """(corpus METEOR, per-item METEOR) for tokenised ``gts``/``res`` as the toolkit."""
        with self._lock:
            try:
                if self._proc is None or self._proc.poll() is not None:
                    self._start()
                stats = []
                for key in res:
                    hypothesis = res[key][0].replace("|||", "").replace("  ", " ")
                    references = [r.replace("|||", "") for r in gts[key]]
                    self._send(" ||| ".join(("SCORE", " ||| ".join(references), hypothesis)))
                    stats.append(self._read())
                self._send("EVAL ||| " + " ||| ".join(stats))
                per_item = [float(self._read()) for _ in stats]
                return float(self._read()), per_item
            except (OSError, ValueError, MetricUnavailable) as exc:
                self.close_locked()
                if isinstance(exc, MetricUnavailable):
                    raise
                raise MetricUnavailable(f"METEOR failed: {exc}") from exc

    def close_locked(self) -> None:
        if self._proc is not None:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def close(self) -> None:
        with self._lock:
            self.close_locked()


_meteor = MeteorProcess()
atexit.register(_meteor.close)


# -- metric classes --------------------------------------------------------------------
class _CocoMetric(Metric):
    needs_image = False
    needs_references = True
    description = ""
    range = (0.0, 1.0)

    def __init__(self, spec):
        self.spec = spec

    def info(self, backbone_label: str) -> MetricInfo:
        return MetricInfo(
            name=self.spec.name, family=self.spec.family, needs_image=False, needs_references=True,
            languages=("en",), backbone="COCO caption toolkit (pycocoevalcap)",
            description=self.description, range=self.range,
            citation=f"{CITATIONS[self.spec.family]}; {TOOLKIT_CITATION}",
            one_word_languages=UNSPACED_LANGUAGES,
        )

    def check_available(self) -> None:
        require_java()

    def compute(self, context: ScoreContext) -> MetricOutput:
        n = len(context.items)
        rows, gts, res = _tokenised(context)
        if not rows:
            return MetricOutput([None] * n, [False] * n)
        aggregate, per_item = self._score(context, gts, res)
        values: list[float | None] = [None] * n
        for i, value in zip(rows, per_item):
            values[i] = float(value)
        return MetricOutput(values, [False] * n, aggregate)

    def _score(self, context, gts, res) -> tuple[float | None, list[float]]:
        raise NotImplementedError


class Bleu(_CocoMetric):
    description = (
        "BLEU-n: geometric mean of clipped 1..n-gram precisions against the references, with the brevity "
        "penalty ('closest' reference length); the corpus value pools counts over all items."
    )

    def _score(self, context, gts, res):
        from pycocoevalcap.bleu.bleu import Bleu as ToolkitBleu

        if "bleu" not in context.memo:
            context.memo["bleu"] = ToolkitBleu(4).compute_score(gts, res, verbose=0)
        corpus, per_item = context.memo["bleu"]
        order = (self.spec.n or 4) - 1
        return float(corpus[order]), [float(v) for v in per_item[order]]


class Meteor(_CocoMetric):
    def warm_up(self) -> None:
        require_java()
        _meteor.warm_up()

    description = (
        "METEOR 1.5: unigram alignment with stems, synonyms and paraphrases; harmonic mean of precision and "
        "recall with a fragmentation penalty (Java, as in the COCO toolkit)."
    )

    def _score(self, context, gts, res):
        return _meteor.score(gts, res)


class RougeL(_CocoMetric):
    description = "ROUGE-L: F-measure (β = 1.2) of the longest common subsequence, best over references."

    def _score(self, context, gts, res):
        from pycocoevalcap.rouge.rouge import Rouge

        _, per_item = Rouge().compute_score(gts, res)
        return None, [float(v) for v in per_item]


class _Frequencies(dict):
    """Document frequencies that read 0 for an unseen n-gram without growing (the toolkit
    indexes its defaultdict with every candidate n-gram)."""

    def __missing__(self, ngram):
        return 0.0


@dataclass
class CiderDocumentFrequency:
    """CIDEr-D document frequencies counted over a whole reference corpus, as the toolkit counts
    them over the items scored together: each reference set adds 1 to every n-gram it contains."""

    counts: _Frequencies = field(default_factory=_Frequencies)
    reference_sets: int = 0

    def add(self, tokenised_references: list[str]) -> None:
        """Count one item's PTB-tokenised reference set."""
        from pycocoevalcap.cider.cider_scorer import cook_refs

        for ngram in {ngram for ref in cook_refs(tokenised_references) for ngram in ref}:
            self.counts[ngram] = self.counts[ngram] + 1.0
        self.reference_sets += 1


def reference_document_frequency(reference_sets) -> CiderDocumentFrequency:
    """CIDEr-D document frequencies of `reference_sets` (one list of references per image; the
    caller passes each image once), PTB-tokenised as the toolkit does (needs Java)."""
    frequencies = CiderDocumentFrequency()
    sets = [list(refs) for refs in reference_sets if refs]
    tokens = iter(ptb_tokenize([r for refs in sets for r in refs]))
    for refs in sets:
        frequencies.add([next(tokens) for _ in refs])
    return frequencies


def document_frequency_problem(frequencies: CiderDocumentFrequency) -> str | None:
    """Why CIDEr-D values computed with `frequencies` mean nothing, else None. When every
    n-gram occurs in every reference set (the references of one image, or several images with
    the same references) every IDF is log(N/N) = 0, so every value is 0."""
    if frequencies.reference_sets == 0:
        return "not meaningful: no reference sets to count document frequencies from"
    if all(count >= frequencies.reference_sets for count in frequencies.counts.values()):
        where = ("the references of one image" if frequencies.reference_sets == 1
                 else f"{frequencies.reference_sets} identical reference sets")
        return (f"not meaningful: document frequencies from {where} give every n-gram they count an IDF of 0 "
                "(counted from this batch: every value is 0); give several images with their own references or "
                "take the document frequencies from a collection")
    return None


def _corpus_cider_scores(frequencies: CiderDocumentFrequency, gts: dict, res: dict) -> list[float]:
    """The toolkit's CIDEr-D arithmetic with the corpus IDF instead of the batch's."""
    from pycocoevalcap.cider.cider_scorer import CiderScorer

    class CorpusCiderScorer(CiderScorer):
        # compute_cider assigns ref_len = log(number of items scored); the corpus size is kept.
        ref_len = property(lambda self: np.log(float(frequencies.reference_sets)), lambda self, value: None)

    scorer = CorpusCiderScorer(n=4, sigma=6.0)
    for key in res:
        scorer += (res[key][0], gts[key])
    scorer.document_frequency = frequencies.counts
    return scorer.compute_cider()


class CiderD(_CocoMetric):
    description = (
        "CIDEr-D: TF-IDF weighted 1..4-gram cosine with the references, Gaussian length penalty (σ = 6), "
        "clipped counts, ×10. IDF comes from the references of the items scored together "
        "(of the whole corpus with `caplens score-corpus`)."
    )
    range = (0.0, 10.0)

    def _score(self, context, gts, res):
        from pycocoevalcap.cider.cider import Cider

        if context.cider_document_frequency is not None:
            return None, [float(v) for v in _corpus_cider_scores(context.cider_document_frequency, gts, res)]
        _, per_item = Cider().compute_score(gts, res)
        return None, [float(v) for v in np.atleast_1d(per_item)]


class Spice(_CocoMetric):
    description = "SPICE: F-score over scene-graph tuples parsed from candidate and references."

    @staticmethod
    def _missing_resources() -> list[str]:
        lib = _toolkit_dir() / "spice" / "lib"
        needed = ["stanford-corenlp-3.6.0.jar", "stanford-corenlp-3.6.0-models.jar"]
        return [str(lib / name) for name in needed if not (lib / name).is_file()]

    def check_available(self) -> None:
        require_java()
        missing = self._missing_resources()
        if missing:
            raise MetricUnavailable(
                "SPICE needs the Stanford CoreNLP 3.6.0 models, not present: "
                + ", ".join(Path(m).name for m in missing)
                + " (python -m pycocoevalcap.spice.get_stanford_models fetches them)"
            )

    def _score(self, context, gts, res):
        self.check_available()
        from pycocoevalcap.spice.spice import Spice as ToolkitSpice

        try:
            corpus, per_item = ToolkitSpice().compute_score(gts, res)
        except (subprocess.CalledProcessError, OSError) as exc:
            raise MetricUnavailable(f"SPICE failed: {exc}") from exc
        return float(corpus), [float(s["All"]["f"]) for s in per_item]

    def compute(self, context: ScoreContext) -> MetricOutput:
        self.check_available()
        return super().compute(context)
