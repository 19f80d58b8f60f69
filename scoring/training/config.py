"""Training configuration as data: a TOML file read into a frozen dataclass.

Relative paths in a config file (data, base, teacher, out) are resolved against the file's
folder; `${CAPLENS_DATA_DIR}`-style variables are expanded as in the registry.  A model
reference is a path, or `PROFILE:BACKBONE` (a backbone of a registry profile, for example
`world:clip`).  Presets ship in `scoring/training/presets/`.
"""
from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PRESETS_DIR = Path(__file__).resolve().parent / "presets"
# The recipes' names, for command lines that list them without loading torch; the same as
# `RECIPES` in recipes.py, in its order (tests/training/test_trainer_helpers.py checks).
RECIPE_NAMES = ("world-clip", "mcs-teacher", "pr-mcs", "pac-s", "specs", "itm", "umic", "caplens-r")
PATH_KEYS = ("base", "teacher", "out")
DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")


@dataclass(frozen=True)
class TrainConfig:
    """One training run.  `data` is a path to an exported set (its data file or folder) or a
    world generator spec (`{world = {scenes = 300, split = "train"}}`).  `heldout` (same forms)
    is a separate evaluation set: then all of `data` trains, and no image may be in both."""

    recipe: str
    data: str | dict[str, Any]
    out: str
    base: str | None = None  # checkpoint to start from (None: build `architecture` from scratch)
    teacher: str | None = None  # frozen second model: CLIP teacher (MCS) or vision tower (PR-MCS, CapLens-R)
    architecture: dict[str, Any] = field(default_factory=dict)  # shapes for models built from scratch
    loss: dict[str, float] = field(default_factory=dict)
    optimizer: dict[str, Any] = field(default_factory=lambda: {"name": "adamw", "lr": 5e-5, "weight_decay": 0.01})
    schedule: dict[str, Any] = field(default_factory=lambda: {"name": "cosine", "warmup": 0.05})
    options: dict[str, Any] = field(default_factory=dict)  # recipe-specific knobs (prefix, languages, ...)
    batch_size: int = 32
    grad_accum: int = 1
    epochs: int = 1
    max_steps: int | None = None
    seed: int = 0
    device: str = "auto"
    precision: str = "auto"
    heldout_fraction: float = 0.1
    heldout: str | dict[str, Any] | None = None  # a separate held-out set instead of a split of `data`
    max_heldout: int = 400  # held-out rows evaluated before and after (the split keeps them all out)
    checkpoint_every: int = 50  # optimizer steps between resumable snapshots
    grad_clip: float = 1.0
    threads: int | None = None
    time_limit_s: float | None = None  # stop early (evaluate and save) once training has run this long
    eval_every: int | None = None  # optimizer steps between evaluations on the held-out (validation) rows
    select_by: str | None = None  # with eval_every: keep the weights of the evaluation best on this measure

    def __post_init__(self):
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {self.device!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}")
        if self.batch_size < 1 or self.grad_accum < 1 or self.epochs < 1:
            raise ValueError("batch_size, grad_accum and epochs must be at least 1")
        if self.eval_every is not None and self.eval_every < 1:
            raise ValueError("eval_every must be at least 1")
        if self.select_by is not None and self.eval_every is None:
            raise ValueError("select_by needs eval_every: the weights are chosen among periodic evaluations")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if not 0.0 < self.heldout_fraction < 1.0:
            raise ValueError("heldout_fraction must be between 0 and 1")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _resolve(value: str, base: Path) -> str:
    from scoring.registry import expand_vars

    if _is_registry_ref(value):
        return value
    path = Path(expand_vars(value)).expanduser()
    return str(path if path.is_absolute() else (base / path).resolve())


def _is_registry_ref(value: str) -> bool:
    """`world:clip` names a registry backbone; `C:\\x` or a path with a slash before the colon does not."""
    head, sep, tail = value.partition(":")
    return bool(sep) and len(head) > 1 and "/" not in head and "\\" not in head and not tail.startswith(("/", "\\"))


def config_from_dict(values: dict[str, Any], base_dir: Path) -> TrainConfig:
    """A TrainConfig from plain data; unknown keys are an error (a typo must not be ignored)."""
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown config keys: {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    values = dict(values)
    for key in PATH_KEYS:
        if isinstance(values.get(key), str):
            values[key] = _resolve(values[key], base_dir)
    for key in ("data", "heldout"):
        if isinstance(values.get(key), str):
            values[key] = _resolve(values[key], base_dir)
    if isinstance((values.get("architecture") or {}).get("cross"), str):  # CapLens-R's cross-encoder checkpoint
        values["architecture"] = values["architecture"] | {"cross": _resolve(values["architecture"]["cross"], base_dir)}
    for key in ("recipe", "data", "out"):
        if key not in values:
            raise ValueError(f"config lacks {key!r}")
    return TrainConfig(**values)


def load_config(path: str | Path, **overrides) -> TrainConfig:
    """Read a TOML config (or a preset name such as `pr-mcs-tiny`); keyword overrides win.
    Override paths are taken relative to the working directory."""
    path = Path(path)
    if not path.suffix and not path.exists():
        path = PRESETS_DIR / f"{path.name}.toml"
    if not path.is_file():
        raise ValueError(f"config file not found: {path}")
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path.name}: invalid TOML: {exc}") from None
    config = config_from_dict(values, path.resolve().parent)
    if overrides:
        merged = config.to_dict() | {k: v for k, v in overrides.items() if v is not None}
        for key in PATH_KEYS + ("data", "heldout"):
            if key in overrides and isinstance(overrides[key], str):
                merged[key] = _resolve(overrides[key], Path.cwd())
        config = TrainConfig(**merged)
    return config


def presets() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.toml"))
