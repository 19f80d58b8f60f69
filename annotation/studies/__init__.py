"""Studies and their queues: ratings, transcreations and critical objects (`tasks`), the
annotator's screens, queue orders and priorities, guidelines, quality control and review,
pairwise judgments, and agreement between annotators."""
