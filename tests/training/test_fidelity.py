"""Fidelity points of the metric cards: SPECS offers the paper's and the released code's scale."""
import numpy as np
import pytest

from scoring.metrics.specs import specs_values


def test_specs_paper_scale_clips_cosine_and_released_scale_maps_it_to_unit_interval():
    image = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    text = np.array([[0.6, 0.8], [-0.6, 0.8], [0.0, 1.0]])  # cos 0.6, -0.6, 0
    assert specs_values(image, text, "paper").tolist() == pytest.approx([0.6, 0.0, 0.0])
    assert specs_values(image, text, "released").tolist() == pytest.approx([0.8, 0.2, 0.5])
    with pytest.raises(ValueError, match="SPECS scale must be one of paper, released, not 'other'"):
        specs_values(image, text, "other")
