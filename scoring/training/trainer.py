"""The one training loop every recipe runs on.

Deterministic by construction: the rows of micro-batch k are a pure function of (seed, k)
(a seeded permutation per epoch), and the recipe's per-batch randomness comes from
`random.Random(f"{seed}:{k}")`.  A snapshot (weights, optimizer, scheduler, torch RNG, step,
losses, the "before" metrics, the config and a fingerprint of the rows) is written every
`checkpoint_every` steps and on cancel, so a resumed run on the CPU ends with the same weights
as an uninterrupted one; a resume with another config or other rows is refused.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import math
import random
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from scoring.backbones import quiet_progress_bars
from scoring.backbones.graphs import device_work
from scoring.training.config import TrainConfig
from scoring.training.data import image_key, rows_fingerprint, split_by_image
from scoring.training.measures import HIGHER, NEITHER, describe
from scoring.training.models import check_model_ref
from scoring.training.recipes import RECIPES

SNAPSHOT = ".resume/snapshot.pt"
# Config keys a resume may change: where the run lives, how it runs, not what it trains. `data`
# and `heldout` are compared by their rows' content instead (a collection is exported anew).
RESUME_MAY_CHANGE = ("out", "data", "heldout", "device", "threads", "time_limit_s", "checkpoint_every")
SCRATCH = ".resume/initial"
RESULT_FILE = "training.json"


class Cancelled(RuntimeError):
    """The run was cancelled; its last snapshot stays resumable (`resume=True`)."""


# One run at a time in a process: torch's generators, its deterministic-algorithms switch and its
# thread count are process-wide, and the app runs a CPU job and a CUDA job in threads of one server.
_ONE_RUN = threading.Lock()


@contextlib.contextmanager
def _one_run_at_a_time(tell: Callable[[float, str], None], cancel: threading.Event | None):
    """Hold the process's one training run; a run that finds another going waits, saying so, and
    a cancel while it waits ends it."""
    if not _ONE_RUN.acquire(blocking=False):
        tell(0.0, "waiting for the training run already going in this process to finish")
        while not _ONE_RUN.acquire(timeout=1.0):
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled while waiting for another training run to finish")
    try:
        yield
    finally:
        _ONE_RUN.release()


@dataclass
class TrainResult:
    out_dir: Path
    recipe: str
    metric: str
    backbone_kind: str
    before: dict[str, float]
    after: dict[str, float]
    losses: list[tuple[int, float]] = field(default_factory=list)
    wall_s: float = 0.0
    device: str = "cpu"
    warnings: list[str] = field(default_factory=list)


def _device(config: TrainConfig) -> torch.device:
    if config.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' requested but CUDA is not available here")
    if config.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(config.device)


def _autocast_dtype(config: TrainConfig, device: torch.device) -> torch.dtype | None:
    """bf16 (fp16 where bf16 is unsupported) under CUDA autocast; fp32 on the CPU."""
    if device.type != "cuda" or config.precision == "fp32":
        return None
    if config.precision == "fp16" or (config.precision == "auto" and not torch.cuda.is_bf16_supported()):
        return torch.float16
    return torch.bfloat16


def _schedule(config: TrainConfig, total: int) -> Callable[[int], float]:
    name = config.schedule.get("name", "cosine")
    warmup = config.schedule.get("warmup", 0.05)
    if name not in ("cosine", "constant"):
        raise ValueError(f"unknown schedule {name!r}: use cosine or constant")
    if isinstance(warmup, float) and not 0.0 <= warmup < 1.0:  # 1.0 would warm up over every step, 2.0 never end
        raise ValueError(f"schedule.warmup {warmup!r}: a fraction of the steps is from 0 up to below 1; "
                         "give a number of steps as an integer")
    warmup_steps = int(round(warmup * total)) if isinstance(warmup, float) else int(warmup)

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        if name == "constant":
            return 1.0
        progress = (step - warmup_steps) / max(1, total - warmup_steps)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    return factor


def _optimizer(config: TrainConfig, params) -> torch.optim.Optimizer:
    options = dict(config.optimizer)
    name = options.pop("name", "adamw").lower()
    kinds = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}
    if name not in kinds:
        raise ValueError(f"unknown optimizer {name!r}: use {', '.join(kinds)}")
    return kinds[name](params, **options)


class BatchOrder:
    """Micro-batch k's rows: a seeded permutation per epoch, sliced."""

    def __init__(self, rows: list[dict], batch_size: int, seed: int):
        self.rows, self.batch_size, self.seed = rows, min(batch_size, len(rows)), seed
        self.per_epoch = math.ceil(len(rows) / self.batch_size)
        self._epoch, self._order = -1, None

    def __call__(self, k: int) -> list[dict]:
        epoch, position = divmod(k, self.per_epoch)
        if epoch != self._epoch:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._epoch, self._order = epoch, torch.randperm(len(self.rows), generator=generator).tolist()
        picked = self._order[position * self.batch_size:(position + 1) * self.batch_size]
        return [self.rows[i] for i in picked]


def _git_commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True,
                              timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def lineage(base: str | None) -> list[dict]:
    """The CapLens runs a checkpoint continues, oldest first: what `base` was trained with and
    for how long (read from its training.json, or followed through its own `base` for records
    written before the lineage was kept). `base` may be a folder or a `PROFILE:BACKBONE` reference
    to a local checkpoint (a shipped world model continued). Empty for a model CapLens did not train."""
    folder = _local_folder(base)
    if folder is None or not (folder / RESULT_FILE).is_file():
        return []
    record = json.loads((folder / RESULT_FILE).read_text(encoding="utf-8"))
    if "recipe" not in record:  # the world's own training scripts write another record
        return []
    config = record.get("config", {})
    earlier = record["lineage"] if "lineage" in record else lineage(config.get("base"))
    return earlier + [{
        "folder": str(folder), "recipe": record.get("recipe"), "base": config.get("base"),
        "data": {k: record.get("data", {}).get(k) for k in ("source", "hash", "rows")},
        "lr": config.get("optimizer", {}).get("lr"), "steps": steps_taken(record),
        "wall_s": record.get("wall_s"), "device": record.get("device"), "git_commit": record.get("git_commit"),
        "finished_at": record.get("finished_at"),
    }]


def steps_taken(record: dict) -> int:
    """Optimizer steps a run record's model took: where a time limit stopped it, else its
    `steps`; counting its losses undercounts a shipped copy, which keeps only every n-th."""
    if record.get("stopped_early_at") is not None:  # 0 too: a limit reached before the first step
        return record["stopped_early_at"]
    return record.get("steps") or len(record.get("losses", []))


def _local_folder(base: str | None) -> Path | None:
    """The folder of a training base: a path as given, or a registry backbone whose checkpoint is
    on this machine (nothing is fetched for a record)."""
    if not base:
        return None
    if Path(base).exists() or ":" not in base:
        return Path(base)
    from scoring.registry import load_registry

    profile, _, name = base.partition(":")
    try:
        spec = load_registry(profile).backbones.get(name)
    except (ValueError, OSError):
        return None
    path = getattr(spec, "path", None)
    return Path(path) if path and Path(path).exists() else None


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else f"{seconds // 60}:{seconds % 60:02d}"


def _rng_state(device: torch.device) -> dict:
    """The generators' states; torch's as NumPy arrays, which the snapshot's load leaves on the
    CPU (its map_location moves tensors to the run's device, and the generators take CPU ones only)."""
    state = {"torch": torch.get_rng_state().numpy(), "python": random.getstate(), "numpy": np.random.get_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device).numpy()
    return state


def _restore_rng(state: dict, device: torch.device) -> None:
    """Put back `_rng_state`'s states; a snapshot written before they were arrays holds tensors,
    which its load put on the run's device: they go back to the CPU first."""
    torch.set_rng_state(torch.as_tensor(state["torch"]).cpu())
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(torch.as_tensor(state["cuda"]).cpu(), device)


def split_rows(config: TrainConfig) -> tuple[list[dict], list[dict], str, dict]:
    """(training rows, held-out rows, data hash, data description) of a run's config: the
    held-out side is `heldout` when given (no image on both sides), else a seeded split by
    image. The trainer uses it, and so does registration to score a run's held-out set."""
    recipe = RECIPES[config.recipe]
    recipe.check(config)
    rows, data_hash, data_about = recipe.load_rows(config)
    rows = recipe.prepare_rows(rows, config)
    if not rows:
        raise ValueError(f"the set has no rows recipe {recipe.name} can use")
    if config.heldout is None:
        train_rows, heldout_rows = split_by_image(rows, config.heldout_fraction, config.seed)
    else:
        train_rows, heldout_rows = rows, recipe.prepare_rows(
            recipe.load_rows(dataclasses.replace(config, data=config.heldout))[0], config)
        shared = {image_key(r) for r in train_rows} & {image_key(r) for r in heldout_rows}
        if shared:
            raise ValueError(f"{len(shared)} image(s) are both in `data` and in `heldout`, e.g. {sorted(shared)[0]}")
        if not heldout_rows:
            raise ValueError(f"the held-out set has no rows recipe {recipe.name} can use")
    train_rows = recipe.training_rows(train_rows, config)
    if not train_rows:
        raise ValueError(f"no training rows are left for recipe {recipe.name} (options)")
    if config.options.get("budget") is not None:  # a learning-curve point: fewer training rows, same held-out
        train_rows = recipe.limit_training(train_rows, int(config.options["budget"]), config.seed)
    return train_rows, heldout_rows, data_hash, data_about


def _selection_sign(config: TrainConfig) -> int:
    """+1 where `select_by` is better higher (tau_c), -1 where lower (mse); a measure with no
    better direction cannot choose weights, so it is refused before the run starts."""
    better = describe(config.select_by, config.recipe).better
    if better == NEITHER:
        raise ValueError(f"select_by {config.select_by!r} has no better direction for recipe {config.recipe}: "
                         "choose a measure that is better higher or lower (docs: scoring/training/measures.py)")
    return 1 if better == HIGHER else -1


def _periodic_evaluation(config: TrainConfig, step: int, metrics: dict[str, float],
                         history: list, best: dict | None, module: torch.nn.Module) -> dict | None:
    """Record an evaluation; with `select_by`, the best so far in the measure's own direction
    (ties keep the earlier step), holding a CPU copy of its weights."""
    history.append((step, metrics))
    if not config.select_by:
        return best
    if config.select_by not in metrics:
        raise ValueError(f"select_by {config.select_by!r} is not a measure of this recipe; it reports "
                         f"{', '.join(metrics)}")
    value, sign = metrics[config.select_by], _selection_sign(config)
    if value == value and (best is None or sign * value > sign * best["value"]):  # a NaN evaluation is never kept
        best = {"step": step, "value": value, "metrics": metrics,
                "weights": {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}}
    return best


def _check_out(out: Path, resume: bool) -> None:
    """Refuse to overwrite a finished run, to resume nothing, or to start over an interrupted one."""
    if (out / RESULT_FILE).is_file():
        raise ValueError(f"{out} already holds a finished run: choose another `out`")
    if resume and not (out / SNAPSHOT).is_file():
        raise ValueError(f"nothing to resume in {out}: no snapshot (the run never reached its first one)")
    if not resume and (out / SNAPSHOT).is_file():
        raise ValueError(f"{out} holds an interrupted run: resume it, or choose another `out`")


def _check_resume(out: Path, snapshot: dict, config: dict, data: dict) -> None:
    """Refuse to resume a snapshot with another config or other rows: the restored optimizer and
    schedule would go on with the old settings while training.json recorded the new ones.
    Snapshots written before they kept both are resumed unchecked."""
    if "config" not in snapshot:
        return
    keys = sorted(k for k in set(config) | set(snapshot["config"])
                  if k not in RESUME_MAY_CHANGE and config.get(k) != snapshot["config"].get(k))
    changed = [f"{k} ({snapshot['config'].get(k)!r} then, {config.get(k)!r} now)" for k in keys]
    changed += [f"the {side} rows' content" for side in ("training", "held-out")
                if data[side] != snapshot["data"][side]]
    if changed:
        raise ValueError(f"cannot resume {out}: this run differs from the interrupted one in " + "; ".join(changed)
                         + ". Resume with its config and data, or start a new run in another `out` (to train a "
                         "finished run further, make it the new run's `base`)")


def _seed_everything(config: TrainConfig, device: torch.device) -> None:
    if config.threads:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    random.seed(config.seed)
    np.random.seed(config.seed)
    torch.use_deterministic_algorithms(device.type == "cpu", warn_only=True)


class _Run:
    """One run's moving parts (model, optimizer, schedule, counters) and the steps of `train`:
    set up, evaluate, optimise one step, snapshot, choose the kept weights, write the record."""

    def __init__(self, config: TrainConfig, say: Callable[[str], None], tell: Callable[[float, str], None]):
        self.config, self.say, self.tell = config, say, tell
        self.recipe = RECIPES[config.recipe]
        self.out = Path(config.out)
        self.started = time.time()
        self.device = _device(config)
        self.autocast_dtype = _autocast_dtype(config, self.device)
        _seed_everything(config, self.device)

        tell(0.0, "loading data")
        self.train_rows, self.heldout_rows, self.data_hash, self.data_about = split_rows(config)
        self.eval_rows = self.heldout_rows[: config.max_heldout]
        say(f"{self.recipe.name}: {len(self.train_rows)} training rows, {len(self.heldout_rows)} held-out rows "
            f"({len({image_key(r) for r in self.heldout_rows})} images) on {self.device.type}")

        scratch = self.out / SCRATCH
        scratch.mkdir(parents=True, exist_ok=True)
        self.state = self.recipe.setup(config, self.device, scratch)
        self.state.warnings = self.recipe.warnings(self.train_rows, config)
        tell(0.0, "preparing")
        self.recipe.fit_on(self.state, self.train_rows)
        self.recipe.prepare(self.state, self.train_rows + self.eval_rows, self.device)
        for warning in self.state.warnings:
            say(f"warning: {warning}")
        self.module = self.state.trainable.to(self.device)
        self.params = [p for p in self.module.parameters() if p.requires_grad]
        self.order = BatchOrder(self.train_rows, config.batch_size, config.seed)
        self.total = config.max_steps or config.epochs * math.ceil(self.order.per_epoch / config.grad_accum)
        self.optimizer = _optimizer(config, self.params)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, _schedule(config, self.total))
        self.scaler = torch.amp.GradScaler("cuda") if self.autocast_dtype == torch.float16 else None
        self.step, self.elapsed_before = 0, 0.0
        self.losses: list[tuple[int, float]] = []
        # Periodic held-out evaluations, and the best one's step, value and weights (`select_by`).
        self.history: list[tuple[int, dict[str, float]]] = []
        self.best: dict | None = None
        self.before: dict[str, float] = {}

    @functools.cached_property
    def data_fingerprint(self) -> dict[str, str]:
        """What `_check_resume` compares: the content of the training and held-out rows."""
        return {"training": rows_fingerprint(self.train_rows), "held-out": rows_fingerprint(self.heldout_rows)}

    def autocast(self):
        if self.autocast_dtype:
            return torch.autocast("cuda", dtype=self.autocast_dtype)
        return contextlib.nullcontext()

    def elapsed(self) -> float:
        return self.elapsed_before + time.time() - self.started

    def evaluate(self, label: str) -> dict[str, float]:
        self.tell(0.0 if label == "before" else 1.0, f"evaluating {label} on {len(self.eval_rows)} held-out rows")
        self.module.eval()
        with torch.no_grad(), self.autocast(), device_work(self.device):
            metrics = self.recipe.evaluate(self.state, self.eval_rows, self.device)
        self.module.train()
        self.say(f"{label}: " + ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()))
        return metrics

    def begin(self, resume: bool) -> None:
        """The "before" evaluation of a new run, or everything a snapshot holds."""
        if not resume:
            self.before = self.evaluate("before")
            torch.manual_seed(self.config.seed)  # loading may have drawn random numbers (a model built from scratch)
            return
        snapshot = torch.load(self.out / SNAPSHOT, map_location=self.device, weights_only=False)
        _check_resume(self.out, snapshot, self.config.to_dict(), self.data_fingerprint)
        self.module.load_state_dict(snapshot["model"])
        self.optimizer.load_state_dict(snapshot["optimizer"])
        self.scheduler.load_state_dict(snapshot["scheduler"])
        self.step, self.losses, self.before = snapshot["step"], snapshot["losses"], snapshot["before"]
        self.history, self.best = snapshot.get("history", []), snapshot.get("best")
        self.elapsed_before = snapshot["elapsed"]
        if self.scaler and "scaler" in snapshot:  # fp16's loss scale (not in snapshots written before it was kept)
            self.scaler.load_state_dict(snapshot["scaler"])
        _restore_rng(snapshot["rng"], self.device)
        self.say(f"resumed at step {self.step}/{self.total}")

    def save_snapshot(self) -> None:
        path = self.out / SNAPSHOT
        tmp = path.with_suffix(".tmp")
        torch.save({"model": self.module.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "scheduler": self.scheduler.state_dict(), "step": self.step, "losses": self.losses,
                    "before": self.before, "history": self.history, "best": self.best,
                    "elapsed": self.elapsed(), "rng": _rng_state(self.device), "config": self.config.to_dict(),
                    "data": self.data_fingerprint}
                   | ({"scaler": self.scaler.state_dict()} if self.scaler else {}), tmp)
        tmp.replace(path)

    def optimise_one_step(self) -> float:
        """One optimizer step over `grad_accum` micro-batches; returns the step's loss. On CUDA
        the step holds the device shared, so the scorer's graph captures fall between steps."""
        with device_work(self.device):
            return self._optimise_one_step()

    def _optimise_one_step(self) -> float:
        config = self.config
        self.optimizer.zero_grad(set_to_none=True)
        step_loss = 0.0
        for micro in range(config.grad_accum):
            k = self.step * config.grad_accum + micro
            with self.autocast():
                loss, _ = self.recipe.batch_loss(self.state, self.order(k), random.Random(f"{config.seed}:{k}"),
                                                 self.device)
            loss = loss.float() / config.grad_accum
            (self.scaler.scale(loss) if self.scaler else loss).backward()
            step_loss += loss.item()
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        if config.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.params, config.grad_clip)
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        self.losses.append((self.step, round(step_loss, 6)))
        return step_loss

    def loop(self, cancel: threading.Event | None) -> int | None:
        """Optimise to the last step; the step a time limit stopped at (None when it did not)."""
        config, total = self.config, self.total
        self.module.train()
        loop_started, first_step = time.time(), self.step
        while self.step < total:
            if config.time_limit_s and self.elapsed() > config.time_limit_s:
                self.say(f"time limit of {config.time_limit_s:g} s reached at step {self.step}/{total}: stopping early")
                return self.step
            if cancel is not None and cancel.is_set():
                self.save_snapshot()
                self.say(f"cancelled at step {self.step}/{total}; resumable")
                raise Cancelled(f"cancelled at step {self.step}/{total}")
            step_loss = self.optimise_one_step()
            step = self.step
            if not math.isfinite(step_loss):  # every later step would be NaN too: stop, say why
                raise ValueError(f"the training loss is {step_loss} at step {step}/{total}: lower the learning "
                                 "rate or train in fp32 (precision = \"fp32\"); the last snapshot "
                                 f"(every {config.checkpoint_every} steps) can be resumed")
            rate = (time.time() - loop_started) / (step - first_step)
            message = (f"{self.recipe.name} step {step}/{total} loss {step_loss:.4f} "
                       f"{_clock(self.elapsed())} elapsed, ETA {_clock(rate * (total - step))}")
            self.tell(step / total, message)
            if step == 1 or step % max(1, total // 20) == 0 or step == total:
                self.say(message)
            if config.eval_every and step % config.eval_every == 0 and step < total:
                self.best = _periodic_evaluation(config, step, self.evaluate(f"step {step}"), self.history,
                                                 self.best, self.module)
            if step % config.checkpoint_every == 0 and step < total:
                self.save_snapshot()
        return None

    def finish(self) -> tuple[dict[str, float], int]:
        """The "after" evaluation and, with `select_by`, the best evaluated weights put back:
        (their metrics, their step)."""
        after = self.evaluate("after")
        if not self.config.select_by:
            return after, self.step
        final = _periodic_evaluation(self.config, self.step, after, self.history, self.best, self.module)
        if final is None:
            self.say(f"kept the weights of the last step {self.step} (no evaluation of {self.config.select_by} "
                     "gave a number)")
            return after, self.step
        if final["step"] == self.step:
            self.say(f"kept the weights of the last step {self.step} ({self.config.select_by} "
                     f"{final['value']:.4f} on the held-out rows, the best)")
            return after, self.step
        self.module.load_state_dict(final["weights"])
        self.say(f"kept the weights of step {final['step']} ({self.config.select_by} {final['value']:.4f} "
                 "on the held-out rows)")
        return final["metrics"], final["step"]

    def save(self, after: dict[str, float], selected_step: int, stopped_early: int | None) -> dict:
        """The model folder (the recipe's format, optionally in half precision) and training.json."""
        config, recipe = self.config, self.recipe
        recipe.save(self.state, self.out)
        if config.options.get("save_dtype"):
            store_weights_as(self.out, config.options["save_dtype"])
        device = self.device
        record = {
            "recipe": recipe.name, "metric": recipe.metric, "backbone_kind": recipe.result_kind(config),
            "summary": recipe.summary, "config": config.to_dict(),
            "data": {"hash": self.data_hash, **self.data_about, "train_rows": len(self.train_rows),
                     "heldout_rows": len(self.heldout_rows),
                     "heldout_images": len({image_key(r) for r in self.heldout_rows}),
                     "evaluated_rows": len(self.eval_rows)},
            "git_commit": _git_commit(),
            "device": device.type if device.type == "cpu" else torch.cuda.get_device_name(device),
            "precision": str(self.autocast_dtype).removeprefix("torch.") if self.autocast_dtype else "fp32",
            "torch": torch.__version__, "steps": self.total, "stopped_early_at": stopped_early,
            "wall_s": round(self.elapsed(), 1), "before": self.before, "after": after,
            "selected_step": selected_step, "history": self.history, "losses": self.losses,
            "warnings": self.state.warnings, "lineage": lineage(config.base),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "budget": recipe.budget(self.train_rows),
        }
        (self.out / RESULT_FILE).write_text(json.dumps(record, indent=1, ensure_ascii=False, default=str),
                                            encoding="utf-8")
        shutil.rmtree(self.out / ".resume", ignore_errors=True)
        return record


def train(config: TrainConfig, *, progress: Callable[[float, str], None] | None = None,
          log: Callable[[str], None] | None = None, cancel: threading.Event | None = None,
          resume: bool = False) -> TrainResult:
    """Run `config` to the end (or until `cancel` is set: raises Cancelled, resumable)."""
    if config.recipe not in RECIPES:
        raise ValueError(f"unknown recipe {config.recipe!r}; known: {', '.join(RECIPES)}")
    _check_out(Path(config.out), resume)
    for ref in (config.base, config.teacher):
        if ref:
            check_model_ref(ref)
    if config.select_by:
        _selection_sign(config)
    say = log or (lambda message: None)
    tell = progress or (lambda fraction, message: None)
    # quiet: no "Loading weights" or "Writing model shards" bars in the log
    with _one_run_at_a_time(tell, cancel), quiet_progress_bars():
        run = _Run(config, say, tell)
        run.begin(resume)
        stopped_early = run.loop(cancel)
        after, selected_step = run.finish()
        record = run.save(after, selected_step, stopped_early)
    if config.options.get("learning_curve"):
        learning_curve(config, record, log=say, cancel=cancel)
    tell(1.0, f"{run.recipe.name} done in {_clock(record['wall_s'])}")
    return TrainResult(out_dir=run.out, recipe=run.recipe.name, metric=run.recipe.metric,
                       backbone_kind=run.recipe.result_kind(config), before=run.before, after=after,
                       losses=run.losses, wall_s=record["wall_s"], device=record["device"],
                       warnings=run.state.warnings)


STORE_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def store_weights_as(folder: Path, dtype_name: str) -> None:
    """Rewrite the floating-point weights of every .safetensors file in `folder` in a smaller
    dtype (`options.save_dtype`): half the bytes for checkpoints that ship in the repository.
    Loaders cast weights to their own placement dtype, so fp32 inference reads them unchanged."""
    from safetensors.torch import load_file, save_file

    if dtype_name not in STORE_DTYPES:
        raise ValueError(f"options.save_dtype must be one of {', '.join(STORE_DTYPES)}, not {dtype_name!r}")
    for path in sorted(Path(folder).rglob("*.safetensors")):  # sub-folders too (a sentence-transformers Dense layer)
        if ".resume" in path.relative_to(folder).parts:  # the run's scratch, deleted once it is done
            continue
        tensors = load_file(str(path))
        smaller = {k: v.to(STORE_DTYPES[dtype_name]) if v.is_floating_point() else v for k, v in tensors.items()}
        save_file({k: v.contiguous() for k, v in smaller.items()}, str(path), metadata={"format": "pt"})


CURVE_FILE = "learning_curve.json"


def learning_curve(config: TrainConfig, full: dict, *, log: Callable[[str], None] | None = None,
                   cancel: threading.Event | None = None) -> list[dict]:
    """Held-out measures after training on each budget of `options.learning_curve` (e.g.
    ratings: 500, 2000, 8000, 32000), one run each under OUT/curve/, plus the full run as the
    last point; written to OUT/learning_curve.json, so a researcher sees how much data a study
    needs.  `options.learning_curve_steps` caps each point's steps (the full run's by default)."""
    out = Path(config.out)
    recipe = RECIPES[config.recipe]
    options = {k: v for k, v in config.options.items() if k not in ("learning_curve", "learning_curve_steps")}
    steps = config.options.get("learning_curve_steps") or config.max_steps
    points = []
    for budget in sorted(int(b) for b in config.options["learning_curve"]):
        if budget >= full["budget"]:
            continue  # the full run is that point
        folder = out / "curve" / str(budget)
        point_config = dataclasses.replace(config, out=str(folder), options=options | {"budget": budget},
                                           max_steps=steps)
        done = folder / RESULT_FILE
        record = json.loads(done.read_text(encoding="utf-8")) if done.is_file() else None
        if record is None:
            train(point_config, log=log, cancel=cancel, resume=(folder / SNAPSHOT).is_file())
            record = json.loads(done.read_text(encoding="utf-8"))
        points.append({"budget": record["budget"], "asked": budget, "steps": steps_taken(record), **record["after"]})
    points.append({"budget": full["budget"], "asked": None, "steps": steps_taken(full), **full["after"]})
    (out / CURVE_FILE).write_text(json.dumps({"unit": recipe.budget_unit, "points": points}, indent=1), encoding="utf-8")
    return points


def read_learning_curve(folder: str | Path) -> dict | None:
    """The learning curve a run wrote ({"unit", "points": [{"budget", "tau_c", ...}]}), or None."""
    path = Path(folder) / CURVE_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def read_result(folder: str | Path) -> TrainResult:
    """The TrainResult of a finished run folder (from its training.json)."""
    folder = Path(folder)
    record = json.loads((folder / RESULT_FILE).read_text(encoding="utf-8"))
    return TrainResult(out_dir=folder, recipe=record["recipe"], metric=record["metric"],
                       backbone_kind=record["backbone_kind"], before=record["before"], after=record["after"],
                       losses=[tuple(x) for x in record["losses"]], wall_s=record["wall_s"], device=record["device"],
                       warnings=record.get("warnings", []))


def list_runs(root: str | Path) -> list[TrainResult]:
    """Finished runs under `root` (any depth), newest first. A run whose training.json cannot be
    read (cut short, edited by hand) is left out with a warning, not the whole list."""
    root = Path(root)
    found = sorted(root.rglob(RESULT_FILE), key=lambda p: p.stat().st_mtime, reverse=True) if root.is_dir() else []
    runs = []
    for path in found:
        try:
            runs.append(read_result(path.parent))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logging.getLogger(__name__).warning("left out %s: its %s cannot be read (%s: %s)", path.parent,
                                                RESULT_FILE, type(exc).__name__, exc)
    return runs
