"""Score a whole corpus: `caplens score-corpus` (streaming, resumable, local or on Ray Data).

    from scoring.corpus import open_manifest, score_corpus
    report = score_corpus(open_manifest("captions.jsonl"), "out/", profile="world", engine="local")
    report.summary  # one row per model and metric: mean with its bootstrap interval

See docs/corpus.md; the engines are in `scoring.corpus.run` and `scoring.corpus.ray_engine`.
"""
from scoring.corpus.manifest import CorpusRow, Manifest, open_manifest, read_manifest
from scoring.corpus.run import CorpusReport, current_scores, read_errors, read_scores, run_manifest, score_corpus

__all__ = ["CorpusReport", "CorpusRow", "Manifest", "current_scores", "open_manifest", "read_errors", "read_manifest",
           "read_scores", "run_manifest", "score_corpus"]
