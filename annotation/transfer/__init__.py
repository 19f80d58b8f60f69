"""Data in and out: imports (sources, checks, the staged transaction), exports, uploaded
archives opened under limits, whole-database transfers and fine-tuning sets."""
