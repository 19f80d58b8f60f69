"""Score a whole corpus: `caplens score-corpus` (streaming, resumable, local or on Ray Data).

    from scoring.corpus import open_manifest, score_corpus
    report = score_corpus(open_manifest("captions.jsonl"), "out/", profile="world", engine="local")
    report.summary  # one row per model and metric: mean with its bootstrap interval

See docs/corpus.md; the engines are in `scoring.corpus.run` and `scoring.corpus.ray_engine`.
"""
from scoring.corpus.manifest import CorpusRow, Manifest, open_manifest, read_manifest
from scoring.lazy import on_first_use

# What `caplens score-corpus` offers before the engines (pandas, torch) load: they load on first use.
ENGINES = ("auto", "local", "ray")
DEFAULT_BATCH_ROWS = 256
__getattr__ = on_first_use(__name__, {name: "run" for name in (
    "CorpusReport", "current_scores", "read_errors", "read_scores", "run_manifest", "score_corpus")})

__all__ = ["DEFAULT_BATCH_ROWS", "ENGINES", "CorpusReport", "CorpusRow", "Manifest", "current_scores",
           "open_manifest", "read_errors", "read_manifest", "read_scores", "run_manifest", "score_corpus"]
