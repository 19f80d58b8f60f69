"""CapLens annotation: people and their data (accounts, collections, ratings, transcreations,
critical objects, agreement, import/export, fine-tuning sets, stored scores). Imports
`scoring` and `db`; see docs/architecture.md."""
