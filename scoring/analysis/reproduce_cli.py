"""`caplens analyze reproduce` and `caplens analyze fetch`: the field's tables in one command.

Registered under `caplens analyze` by `annotation.analysis_cli.register`; nothing here needs
the database. Heavy imports happen inside the handlers.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def register(commands, parents) -> None:
    """Add `reproduce` and `fetch` to the `caplens analyze` subcommands."""
    from .benchmark_names import HUB_REPOS, PUBLISHED_BENCHMARKS

    reproduce = commands.add_parser(
        "reproduce", parents=parents, help="score a benchmark and set each value beside the paper's",
        description=(
            "Load BENCHMARK as published, score it with --profile through the corpus runner (resumable: run "
            "again to go on), compute its protocol (Kendall tau_b/tau_c, Pascal-50S or FOIL accuracy) with "
            "95 %% bootstrap intervals and print ours, the paper's value, the difference and ✓ (within ±0.1 "
            "point) or ✗. ✓/✗ only where the metric's checkpoints are the published ones. BENCHMARK is one of "
            f"{', '.join(PUBLISHED_BENCHMARKS)}; 'all' runs every one found under --dataset-path; 'world' "
            "writes the world's ratings, pairs and foils and runs them (offline). See docs/analysis.md."),
    )
    reproduce.add_argument("benchmark", metavar="BENCHMARK", choices=[*PUBLISHED_BENCHMARKS, "all", "world"])
    reproduce.add_argument("--dataset-path", type=Path,
                           help="the benchmark's file or folder as published (with 'all': a folder searched for "
                                "every benchmark's files)")
    reproduce.add_argument("--metrics", nargs="+", help="metrics to score (default: CLIP-S, RefCLIP-S, PAC-S, "
                                                       "RefPAC-S, BLEU-4, METEOR, ROUGE-L, CIDEr, SPICE)")
    reproduce.add_argument("--profile", help="scoring profile (default: $CAPLENS_PROFILE or hub; world for 'world')")
    reproduce.add_argument("--device", help="torch device for the scorer")
    reproduce.add_argument("--image-root", type=Path, help="folder image paths are relative to "
                                                           "(default: the data file's folder)")
    reproduce.add_argument("--out", type=Path, help="output folder (default: reproduce/<BENCHMARK>); scores are "
                                                    "kept there and a second run resumes them")
    reproduce.add_argument("--bootstrap", type=int, default=1000, help="bootstrap replicates (default 1000)")
    reproduce.add_argument("--seed", type=int, default=0)
    reproduce.add_argument("--scenes", type=int, default=12, help="with 'world': scenes to write (default 12)")
    reproduce.add_argument("--quiet", action="store_true", help="no progress bars")
    reproduce.set_defaults(handler=run_reproduce)

    fetch = commands.add_parser(
        "fetch", parents=parents, help="download a benchmark from the Hugging Face hub",
        description="Download NAME's published copy from the Hugging Face hub (huggingface_hub) into --dest "
                    "(default: <data dir>/benchmarks/NAME), for `reproduce NAME --dataset-path`.",
    )
    fetch.add_argument("name", metavar="NAME", choices=sorted(HUB_REPOS))
    fetch.add_argument("--dest", type=Path, help="folder to download into")
    fetch.set_defaults(handler=run_fetch)


def _print_result(result, out: Path) -> None:
    import pandas as pd

    from .reproduce import format_table, write_results

    print(f"\n{result.benchmark}: {result.items} items, profile {result.profile}")
    for metric, reason in result.unavailable.items():
        print(f"{metric}: unavailable: {reason}")
    if result.errors:
        print(f"{result.errors} rows could not be scored (see {out / 'scores' / 'errors.jsonl'})")
    with pd.option_context("display.max_rows", 500, "display.width", 250, "display.max_colwidth", 90):
        print(format_table(result.table).to_string(index=False))
    csv_path, md_path = write_results(result, out)
    print(f"wrote {csv_path} and {md_path}")


def run_reproduce(args: argparse.Namespace) -> int:
    from .reproduce import reproduce, reproduce_found, reproduce_world

    options = dict(metrics=args.metrics, profile=args.profile, device=args.device, n_boot=args.bootstrap,
                   seed=args.seed, show_progress=not args.quiet)
    if args.benchmark == "world":
        out = args.out or Path("reproduce") / "world"
        counts, results = reproduce_world(out, scenes=args.scenes, **options)
        print("wrote the world benchmarks under " + str(out / "data") + ": "
              + ", ".join(f"{name} {count} items" for name, count in counts.items()))
        for result in results:
            _print_result(result, out / result.benchmark)
        return 0
    if args.dataset_path is None:
        raise ValueError(f"{args.benchmark} needs --dataset-path (its files as published; "
                         "`caplens analyze fetch NAME` downloads those on the Hugging Face hub)")
    if args.benchmark == "all":
        out = args.out or Path("reproduce")
        results = reproduce_found(args.dataset_path, out=out, image_root=args.image_root, **options)
        for result in results:
            _print_result(result, out / result.benchmark)
        return 0
    out = args.out or Path("reproduce") / args.benchmark
    _print_result(reproduce(args.benchmark, args.dataset_path, out=out, image_root=args.image_root, **options), out)
    return 0


def fetch_benchmark(name: str, dest: Path) -> Path:
    """Download benchmark `name` from its Hugging Face hub repository into `dest`; OSError with
    a sentence when the hub cannot be reached."""
    from .reproduce import benchmark

    spec = benchmark(name)
    if not spec.hub:
        raise LookupError(f"{name} has no copy on the Hugging Face hub; download it from its publisher")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise OSError("fetching needs huggingface_hub: pip install huggingface_hub") from None
    try:
        folder = snapshot_download(repo_id=spec.hub, repo_type="dataset", local_dir=str(dest),
                                   allow_patterns=list(spec.hub_patterns) if spec.hub_patterns else None)
    except Exception as exc:  # the hub client raises many kinds (offline mode, HTTP, DNS, timeouts)
        offline = os.environ.get("HF_HUB_OFFLINE") not in (None, "", "0")
        reason = "HF_HUB_OFFLINE is set" if offline else type(exc).__name__
        raise OSError(f"cannot download {name} from the Hugging Face hub ({spec.hub}): no network or hub access "
                      f"({reason}). Download it where the hub is reachable and give its folder with "
                      f"--dataset-path.") from None
    return Path(folder)


def run_fetch(args: argparse.Namespace) -> int:
    from scoring.paths import data_dir

    dest = args.dest or data_dir() / "benchmarks" / args.name
    folder = fetch_benchmark(args.name, dest)
    print(f"downloaded {args.name} into {folder}", file=sys.stdout)
    print(f"next: caplens analyze reproduce {args.name} --dataset-path {folder}")
    return 0
