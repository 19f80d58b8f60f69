"""Stored metric scores and what is computed from them: the score store, a score-corpus run's
scores, a collection's analysis, and published benchmarks reproduced from the server."""
