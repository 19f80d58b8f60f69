"""Shared fixtures: one set of tiny checkpoints per test session, built by scoring.tiny."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    from scoring.tiny import ensure_tiny_checkpoints

    folder = tmp_path_factory.mktemp("tiny") / "tiny-checkpoints"
    os.environ["CAPLENS_TINY_DIR"] = str(folder)
    return ensure_tiny_checkpoints(folder)


@pytest.fixture(scope="session")
def tiny_scorer(tiny_dir):
    from scoring.api import Scorer

    return Scorer("tiny", device="cpu")


def random_image(seed: int, size=(48, 40)) -> Image.Image:
    rng = np.random.RandomState(seed)
    return Image.fromarray((rng.rand(size[1], size[0], 3) * 255).astype("uint8"))


@pytest.fixture
def make_image():
    """Factory: a deterministic random RGB image per seed."""
    return random_image


@pytest.fixture
def images():
    return [random_image(i) for i in range(6)]


@pytest.fixture(scope="session")
def java():
    """Skip a test cleanly where no Java runtime is installed."""
    path = shutil.which("java")
    if path is None:
        pytest.skip("needs a Java runtime (java not on PATH)")
    return path
