"""`caplens finetune RECIPE --config FILE [--set FILE | --collection NAME] [--resume] [--register]`,
`caplens finetune register --out RUN_DIR` and `caplens finetune list`.

Lives in `annotation/` because `--collection` first exports the collection's fine-tuning set
(`annotation.transfer.finetune_sets`) and then trains on it with `scoring.training`.  A finished run
registers as a new version of its metric (`scoring.user_registry`), under the Train tab's
rule (`annotation.training.training_jobs.run_folder`): a smoke/tiny preset trains in its owner's
scratch folder and registers only with `--register` (or later, `caplens finetune register`).
Ctrl-C cancels cleanly: the run stays resumable with `--resume`.
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path


def register(subparsers, parents) -> None:
    """Add `caplens finetune`."""
    from scoring.training import RECIPE_NAMES

    finetune = subparsers.add_parser(
        "finetune", parents=parents, help="train a metric (PR-MCS, PAC-S, SPECS, UMIC, ITM, CapLens-R, ...) or list runs",
        description="Fine-tune a metric on a fine-tuning set, a collection or the synthetic world; "
                    "`caplens finetune list` shows finished runs and their before/after numbers.")
    finetune.add_argument("recipe", choices=[*RECIPE_NAMES, "list", "register"], metavar="RECIPE",
                          help=f"one of {', '.join(RECIPE_NAMES)}; `list`; or `register` (the finished run --out names)")
    finetune.add_argument("--config", help="TOML config file or preset name (default: the recipe's world preset)")
    source = finetune.add_mutually_exclusive_group()
    source.add_argument("--set", dest="set_path", type=Path, help="an exported fine-tuning set (folder or data file)")
    source.add_argument("--collection", help="export this collection's set and train on it")
    finetune.add_argument("--resume", action="store_true", help="continue an interrupted or cancelled run")
    finetune.add_argument("--out", help="run folder (overrides the config's `out`)")
    finetune.add_argument("--device", choices=("auto", "cpu", "cuda"))
    finetune.add_argument("--max-steps", type=int)
    finetune.add_argument("--user", help="act as this account (role checked; default: local administrator)")
    finetune.add_argument("--register", action="store_true",
                          help="register the run as a metric version even from a smoke/tiny preset (which otherwise "
                               "stays in your scratch space, out of everyone's metric lists)")
    finetune.set_defaults(handler=_finetune)


def _export_collection(name: str, recipe: str, user_name: str | None, seed: int) -> Path:
    from annotation.cli import _acting_user
    from annotation.database import database_session
    from annotation.training.training_jobs import export_collection_set
    from scoring.paths import data_dir

    out = data_dir() / "sets" / f"{name}-{recipe}-{time.strftime('%Y%m%d-%H%M%S')}"
    with database_session(read_only=True) as session:
        export_collection_set(session, _acting_user(session, user_name), recipe, name, out, seed=seed)
    print(f"exported the {recipe} set of collection {name!r} to {out}", file=sys.stderr)
    return out


def _run_with_progress(config, resume: bool):
    """train() in a worker thread with a tqdm bar; Ctrl-C sets the cancel event."""
    from tqdm import tqdm

    from scoring.training import train

    cancel = threading.Event()
    outcome: dict = {}
    bar = tqdm(total=1000, file=sys.stderr, bar_format="{l_bar}{bar}| {elapsed}<{remaining} {postfix}")

    def progress(fraction: float, message: str) -> None:
        bar.update(max(0, int(fraction * 1000) - bar.n))
        bar.set_postfix_str(message, refresh=True)

    def work() -> None:
        try:
            outcome["result"] = train(config, progress=progress, log=bar.write, cancel=cancel, resume=resume)
        except BaseException as exc:  # handed to the main thread
            outcome["error"] = exc

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.2)
    except KeyboardInterrupt:
        cancel.set()
        worker.join()
    finally:
        bar.close()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def _finetune(args: argparse.Namespace) -> int:
    from scoring.registry import data_dir
    from scoring.training import Cancelled, list_runs, load_config
    from annotation.training.training_jobs import run_folder, run_stamp, scratch_message
    from scoring.user_registry import register_run

    if args.recipe == "list":
        return _list(list_runs(data_dir() / "runs"))
    if args.recipe == "register":
        if not args.out:
            raise ValueError("name the finished run to register: caplens finetune register --out RUN_DIR")
        return _register(register_run, args.out, args.user)
    preset = args.config or args.recipe
    folder, scratch = run_folder(args.user or LOCAL_OWNER, args.recipe, preset, run_stamp())
    overrides = {"out": args.out or (str(folder) if scratch else None), "device": args.device,
                 "max_steps": args.max_steps}
    if args.set_path is not None:
        overrides["data"] = str(args.set_path)
    config = load_config(args.config or args.recipe, **overrides)
    if config.recipe != args.recipe:
        raise ValueError(f"config {args.config} is for recipe {config.recipe}, not {args.recipe}")
    if args.collection:
        overrides["data"] = str(_export_collection(args.collection, args.recipe, args.user, config.seed))
        config = load_config(args.config or args.recipe, **overrides)
    try:
        result = _run_with_progress(config, args.resume)
    except Cancelled as exc:
        print(f"{exc}; continue with: caplens finetune {args.recipe} --config {args.config or args.recipe} "
              f"--out {config.out} --resume", file=sys.stderr)
        return 130
    print(_table(result))
    for warning in result.warnings:
        print(f"warning: {warning}")
    if scratch and not args.register:
        print(f"{scratch_message(preset, f'register it with `caplens finetune register --out {config.out}`')}")
    else:
        _register(register_run, result, args.user)
    return 0


LOCAL_OWNER = "local-cli"  # whose scratch folder a run without --user trains in


def _register(register_run, run, user: str | None) -> int:
    try:
        name = register_run(run, owner=user)
    except ValueError as exc:
        print(f"not registered as a metric version: {exc}", file=sys.stderr)
        return 1
    print(f"registered as {name}: caplens score --metrics '{name}'")
    return 0


def _table(result) -> str:
    keys = list(dict.fromkeys([*result.before, *result.after]))
    lines = [f"{result.recipe} -> {result.metric} ({result.backbone_kind}) in {result.wall_s:.0f} s on {result.device}: "
             f"{result.out_dir}", "", "| held-out | before | after |", "|---|---|---|"]
    for key in keys:
        lines.append(f"| {key} | {result.before.get(key, float('nan')):.4f} | {result.after.get(key, float('nan')):.4f} |")
    return "\n".join(lines)


def _list(runs) -> int:
    if not runs:
        print("no finished runs")
        return 0
    for run in runs:
        print(_table(run))
        print()
    return 0
