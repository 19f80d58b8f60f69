"""CapLens scoring: backbones, metrics, analysis and fine-tuning recipes."""
