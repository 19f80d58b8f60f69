"""CapLens annotation: perturbations, negatives, detail units, annotation workflows, import/export."""
