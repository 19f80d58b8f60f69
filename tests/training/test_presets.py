"""Every shipped preset loads, and the world presets keep the seed-range protocol: they train on
the train range only (within it, `skip` included), and a separate held-out set is validation."""
import pytest

from scoring.training import load_config
from scoring.training.config import presets
from scoring.training.recipes import RECIPES
from scoring.world.splits import split_range


@pytest.mark.parametrize("name", presets())
def test_a_preset_trains_on_train_scenes_and_chooses_on_validation_scenes(name):
    config = load_config(name, out="/nonexistent/run")
    assert config.recipe in RECIPES
    world = config.data["world"]  # every shipped preset trains on the world
    assert world["split"] == "train"
    train = split_range("train")
    assert world.get("skip", 0) + world["scenes"] <= train.stop - train.first
    if config.heldout is not None:
        assert config.heldout["world"]["split"] == "validation"
    if config.select_by:  # choosing a step needs scenes that are not trained on
        assert config.heldout is not None or config.heldout_fraction > 0


def test_the_presets_are_the_files_shipped():
    names = presets()
    assert {"caplens-r-cross-gpu", "caplens-r-cross-gpu-more", "caplens-r-hybrid", "pr-mcs", "specs", "umic"} <= set(names)
    assert len(names) == len(set(names)) >= 20
