"""The command line every world benchmark shares (issue 30's protocol), kept in one place so that
no benchmark can lack a part of it: the seed range (`--first-seed`, `--scenes`: a reported range,
or the validation range with `--choose`, both checked by `scoring.world.splits.check_range`), the
bootstrap size, the device, the profile, and where the report and the full result are written.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

LANGS = "en,de,fr,es,ja"


def protocol_parser(description: str, *, langs: bool = True, metrics: str | None = None) -> argparse.ArgumentParser:
    """A parser with the protocol's options; `langs` and `metrics` (its default list) where the
    benchmark takes them."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--first-seed", type=int, default=1_000_000, help="first scene seed (test range or outside)")
    parser.add_argument("--scenes", type=int, default=300)
    if langs:
        parser.add_argument("--langs", default=LANGS)
    parser.add_argument("--profile", default="world", help="a profile name or TOML file (a candidate's checkpoints)")
    if metrics is not None:
        parser.add_argument("--metrics", default=metrics)
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples of the scenes")
    parser.add_argument("--device")
    parser.add_argument("--choose", action="store_true", help="run on validation scenes, to choose (not to report)")
    parser.add_argument("--json", type=Path, help="also write the full result here")
    parser.add_argument("--md", type=Path, help="also write the report here")
    return parser


def jsonable(value):
    """A result with its `Estimate`s (value, interval, scenes) as plain dictionaries."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):  # bench_world_vision's rows are lists of dictionaries
        return [jsonable(v) for v in value]
    if hasattr(value, "low") and hasattr(value, "high"):
        return {"value": value.value, "low": value.low, "high": value.high, "scenes": value.n}
    return value


def command_line(script: str, r: dict) -> str:
    """The command that reproduces a report of a world range (with --choose on validation)."""
    choose = "--choose " if r["range"].startswith("validation") else ""
    return (f"python benchmarks/{script} {choose}--first-seed {r['first_seed']} --scenes {r['scenes']} "
            f"--langs {','.join(r['langs'])} --profile {r['profile']}")


def run_and_write(script: str, args: argparse.Namespace, run: Callable[[], dict], report: Callable[[dict], str]) -> int:
    """Runs the benchmark, prints its report and writes --md and --json; a range the protocol
    refuses (checked before the run loads any model), or any other ValueError of the run, is one
    line on stderr and exit status 2."""
    from scoring.world.splits import check_range

    try:
        check_range(args.first_seed, args.scenes, args.choose)
        result = run()
    except ValueError as exc:
        print(f"{script}: {exc}", file=sys.stderr)
        return 2
    text = report(result)
    print(text)
    if args.md:
        args.md.write_text(text, encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(jsonable(result), indent=1, ensure_ascii=False), encoding="utf-8")
    return 0
