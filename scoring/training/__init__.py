"""Fine-tuning: one trainer, recipes as data, checkpoints the normal loaders read.

    from scoring.training import RECIPES, load_config, train
    result = train(load_config("pr-mcs-tiny"))

Configs, recipes and guarantees: docs/training.md.
"""
from scoring.training.config import TrainConfig, load_config, presets
from scoring.training.recipes import RECIPES, Recipe
from scoring.training.trainer import Cancelled, TrainResult, list_runs, read_learning_curve, read_result, train

__all__ = ["RECIPES", "Recipe", "TrainConfig", "TrainResult", "Cancelled", "load_config", "presets", "train",
           "list_runs", "read_learning_curve", "read_result"]
