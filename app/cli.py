"""The `caplens` console command.

Each package contributes its own subcommands through a `register(subparsers, parents)`
function, so this module only assembles them and imports nothing heavy: handlers import
torch, gradio or SQLAlchemy lazily when they run.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

# Modules that contribute subcommands, in the order `caplens --help` lists them.
COMMAND_MODULES = (
    "app.serve",
    "scoring.cli",
    "scoring.corpus.cli",
    "scoring.perturb.cli",
    "scoring.world.cli",
    "annotation.analysis_cli",
    "annotation.cli",  # after scoring.world.cli: it adds `world seed`
    "annotation.training_cli",
)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--data-dir",
        default=argparse.SUPPRESS,
        help="data directory (default: $CAPLENS_DATA_DIR, else ~/.caplens)",
    )
    parser = argparse.ArgumentParser(
        prog="caplens",
        description="Inspect, stress-test and annotate image-caption evaluation metrics.",
        parents=[common],
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers, [common])
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "data_dir", None):
        os.environ["CAPLENS_DATA_DIR"] = str(args.data_dir)
    try:
        return int(args.handler(args) or 0)
    except (ValueError, LookupError, OSError) as exc:
        # Library functions signal bad input with these; the user gets one clear line
        # (CAPLENS_DEBUG=1 shows the traceback).
        if os.environ.get("CAPLENS_DEBUG"):
            raise
        print(f"caplens {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
