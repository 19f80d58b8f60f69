"""CapLens scoring, the pure library: registry, backbones, metrics, perturbations, analysis,
training and the synthetic world. Imports neither `annotation`, `db` nor `app`."""
