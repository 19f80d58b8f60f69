"""Fine-tuning: one trainer, recipes as data, checkpoints the normal loaders read.

    from scoring.training import RECIPES, load_config, train
    result = train(load_config("pr-mcs-tiny"))

Configs, recipes and guarantees: docs/training.md. The recipes and the trainer (and torch with
them) load on first use, so a command line that only names recipes (`caplens --help`, every
`caplens db` and `user` command) starts without them.
"""
from scoring.lazy import on_first_use
from scoring.training.config import RECIPE_NAMES, TrainConfig, load_config, presets

__getattr__ = on_first_use(__name__, {
    "RECIPES": "recipes", "Recipe": "recipes", "Cancelled": "trainer", "TrainResult": "trainer",
    "list_runs": "trainer", "read_learning_curve": "trainer", "read_result": "trainer", "train": "trainer"})

__all__ = ["RECIPES", "RECIPE_NAMES", "Recipe", "TrainConfig", "TrainResult", "Cancelled", "load_config", "presets",
           "train", "list_runs", "read_learning_curve", "read_result"]
