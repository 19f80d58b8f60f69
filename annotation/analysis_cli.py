"""`caplens analyze ...`: correlation with humans, robustness, specificity, retrieval.

Each subcommand takes its scores from a file (CSV; columns in docs/analysis.md), from a
database collection (--collection), or computes them now with the scoring engine
(--metrics); it prints the result table and, with --out, writes it as CSV. Heavy imports
happen inside the handlers so `caplens --help` stays fast.
"""
from __future__ import annotations

import argparse
import json
from contextlib import contextmanager
from pathlib import Path

from scoring.analysis import reproduce_cli
from scoring.csv_safe import frame_to_csv

DATASET_NAMES = ("flickr8k-expert", "flickr8k-cf", "composite", "capeval1k", "m-capeval1k")


def register(subparsers, parents) -> None:
    """Add `analyze` and its subcommands to the `caplens` parser."""
    analyze = subparsers.add_parser(
        "analyze", parents=parents, help="correlation with humans, robustness, specificity, retrieval",
        description="Analyze metric scores against human judgments and perturbations.",
    )
    commands = analyze.add_subparsers(dest="analysis", metavar="ANALYSIS", required=True)
    reproduce_cli.register(commands, parents)  # `reproduce` and `fetch` (scoring/analysis/reproduce_cli.py)

    def command(name: str, help_text: str, handler) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, parents=parents, help=help_text, description=help_text)
        parser.add_argument("--out", type=Path, help="write the result table to this CSV file")
        parser.set_defaults(handler=handler)
        return parser

    correlation = command("correlation", "caption-level (and system-level) correlation with human scores", _correlation)
    correlation.add_argument("--scores", type=Path,
                             help="metric scores: wide CSV (one column per metric) or long (metric, score); "
                                  "without it the --dataset captions are scored now with --metrics")
    correlation.add_argument("--dataset", choices=DATASET_NAMES,
                             help="join the scores with this public rating set (needs --dataset-path)")
    correlation.add_argument("--dataset-path", type=Path, help="file or directory of the rating set, as published")
    correlation.add_argument("--metrics", nargs="+", help="metric columns (default: every numeric score column)")
    correlation.add_argument("--human-col", default="human")
    correlation.add_argument("--group", nargs="*", default=None,
                             help="group columns (default: collection and lang where present)")
    correlation.add_argument("--coefficients", nargs="+", default=["kendall_b", "kendall_c", "pearson", "spearman"],
                             choices=["kendall_b", "kendall_c", "pearson", "spearman"])
    correlation.add_argument("--bootstrap", type=int, default=None,
                             help="bootstrap replicates (0: no intervals; default 1000, with --collection 200 as "
                                  "in the Analyze tab)")
    correlation.add_argument("--seed", type=int, default=0)
    correlation.add_argument("--compare", nargs=2, metavar=("METRIC_A", "METRIC_B"),
                             help="test whether two metrics' correlations differ on the same items")
    correlation.add_argument("--test", choices=["bootstrap", "williams"], default="bootstrap")
    correlation.add_argument("--compare-coefficient", default="kendall_c",
                             choices=["kendall_b", "kendall_c", "pearson", "spearman"])
    correlation.add_argument("--system-col", help="also report system-level correlation over this column")
    correlation.add_argument("--per-rating", action="store_true",
                             help="with --collection: each overall rating is its own row (default: one row per "
                                  "caption, its mean rating), as in the Analyze tab's option")
    _database_options(correlation)
    _scoring_options(correlation)

    robustness = command("robustness", "perturbation robustness table (PR-MCS Table 7 layout)", _robustness)
    source = robustness.add_mutually_exclusive_group(required=True)
    source.add_argument("--scores", type=Path,
                        help="long CSV: lang, metric, op ('original' or the operation), score [, item_id, noop]; "
                             "with item_id each op is compared with the originals of the captions it changed")
    source.add_argument("--captions", type=Path,
                        help="CSV of captions (candidate [, lang, image, references, item_id, critical]) "
                             "to perturb and score now with --metrics")
    source.add_argument("--collection", help="database collection with perturbed captions and cached scores")
    robustness.add_argument("--ops", nargs="+", help="operations in column order (default: PR-MCS five, then others)")
    robustness.add_argument("--p", type=float, help="per-token probability (default: each operation's own)")
    robustness.add_argument("--seed", type=int, default=0)
    robustness.add_argument("--save-scores", type=Path, help="with --captions: also write the long score table")
    robustness.add_argument("--user", help="acting account for --collection (default: local CLI admin)")
    _scoring_options(robustness)
    robustness.add_argument("--numeric", action="store_true", help="print numbers instead of 'mean (change%%)' cells")
    robustness.add_argument("--detection", action="store_true",
                            help="also print, per op, the share of perturbed captions scored below their original "
                                 "(needs item_id)")

    specificity = command("specificity", "specificity rates SR_pos / SR_neg (SPECS eq. 1-2)", _specificity)
    source = specificity.add_mutually_exclusive_group(required=True)
    source.add_argument("--scores", type=Path, help="CSV: kind (pos/neg), metric, base, extended [, lang]")
    source.add_argument("--captions", type=Path,
                        help="CSV of captions (candidate [, lang, image, image_id]) to split into SPECS "
                             "triplets and score now with --metrics")
    source.add_argument("--collection", help="database collection whose captions are split into triplets and scored")
    specificity.add_argument("--user", help="acting account for --collection (default: local CLI admin)")
    specificity.add_argument("--seed", type=int, default=0)
    specificity.add_argument("--save-scores", type=Path, help="with --captions: also write the scored triplets")
    _scoring_options(specificity)

    retrieval = command("retrieval", "COCO-SM text-to-image Recall@1/5/10 and NDCG@20 vs. English", _retrieval)
    source = retrieval.add_mutually_exclusive_group(required=True)
    source.add_argument("--similarities", type=Path,
                        help=".npz with one texts x images array per language (named by language code)")
    source.add_argument("--coco-sm", type=Path,
                        help="COCO-SM meta file (meta/google.json ...): embed its captions and images now")
    retrieval.add_argument("--metric", default="MCS", help="with --coco-sm: metric whose encoders embed (default MCS)")
    retrieval.add_argument("--langs", nargs="+", help="with --coco-sm: languages to evaluate (default all)")
    retrieval.add_argument("--save-similarities", type=Path, help="with --coco-sm: write the matrices as .npz")
    retrieval.add_argument("--profile", help="scoring profile for --coco-sm")
    retrieval.add_argument("--device", help="torch device for the scorer")
    retrieval.add_argument("--image-root", type=Path, help="folder with the COCO images (val2014/)")
    retrieval.add_argument("--text-to-image", type=Path,
                           help="COCO-SM meta file or id_mapping.json giving each text's image "
                                "(default: array 'text_to_image' inside the .npz)")
    retrieval.add_argument("--reference-lang", default="en")

    pascal = command("pascal50s", "Pascal-50S pairwise accuracy (HC, HI, HM, MM, mean)", _pascal50s)
    pascal.add_argument("--scores", type=Path,
                        help="CSV with pair_id and <metric>_a / <metric>_b columns (plus category, votes_a, "
                             "votes_b unless --pascal-dir is given); without it the pairs are scored now")
    pascal.add_argument("--pascal-dir", type=Path, help="directory with pair_pascal.mat and consensus_pascal.mat")
    pascal.add_argument("--metrics", nargs="+", help="metrics to report (or to compute when scoring now)")
    pascal.add_argument("--seed", type=int, default=0, help="seed breaking human vote ties and sampling references")
    pascal.add_argument("--references", type=int, default=5, help="references sampled per pair when scoring now")
    pascal.add_argument("--collection", help="a pairwise study's judgments (annotation.studies.pairwise): each metric's "
                                             "accuracy against their majority, as the app's Pairwise tab shows it, and "
                                             "the Bradley-Terry ranking of the caption sources")
    pascal.add_argument("--user", help="acting account for --collection (default: local CLI admin)")
    _scoring_options(pascal)

    foil = command("foil", "FOIL accuracy (correct caption vs. foil)", _foil)
    source = foil.add_mutually_exclusive_group(required=True)
    source.add_argument("--scores", type=Path, help="CSV with <metric>_correct and <metric>_foil columns")
    source.add_argument("--foil-json", type=Path, help="foilv1.0_test_2017.json, scored now with --metrics")
    foil.add_argument("--metrics", nargs="+", help="metrics to report (or to compute when scoring now)")
    foil.add_argument("--references", type=int, default=4, help="references per pair when scoring now (1 or 4)")
    foil.add_argument("--seed", type=int, default=0)
    _scoring_options(foil)

    length = command("length", "correlation per caption-length bucket (SPECS Figure 3)", _length)
    source = length.add_mutually_exclusive_group(required=True)
    source.add_argument("--scores", type=Path,
                        help="wide CSV with human, metric columns and n_tokens (or candidate, counted by words)")
    source.add_argument("--collection", help="database collection: its ratings and cached (or --profile) scores")
    length.add_argument("--metrics", nargs="+", required=True)
    length.add_argument("--user", help="acting account for --collection (default: local CLI admin)")
    length.add_argument("--profile", help="with --collection: score missing metrics with this profile")
    length.add_argument("--device", help="torch device for the scorer")
    length.add_argument("--human-col", default="human")
    length.add_argument("--edges", nargs="+", type=float, help="bucket edges (default 0 20 40 60 80 100 150 250 inf)")
    length.add_argument("--combine", nargs=2, metavar=("SHORT", "LONG"),
                        help="add SPECS' advice as a metric: SHORT under --threshold tokens, LONG above")
    length.add_argument("--threshold", type=int, default=60)

    load = command("load", "read a public rating set and write its tidy table", _load)
    load.add_argument("dataset", choices=DATASET_NAMES)
    load.add_argument("path", type=Path, help="file or directory as published")
    load.add_argument("--collection", help="also import it into this database collection (needs --image-root)")
    load.add_argument("--image-root", type=Path, help="folder holding the set's images (image_path is relative to it)")
    load.add_argument("--scale", nargs=2, type=float, metavar=("LOW", "HIGH"),
                      help="rating scale mapped to [0, 1] (default: the set's published scale)")
    load.add_argument("--user", help="acting account for the import (default: local CLI admin)")


def _database_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("reading a database collection")
    group.add_argument("--collection", help="correlate this collection's rated captions exactly as the app's Analyze "
                                            "tab does (cached scores of --profile's checkpoints; --metrics missing "
                                            "from the cache are scored now and cached)")
    group.add_argument("--user", help="acting account (default: local CLI admin)")


def _scoring_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("scoring now (instead of reading --scores)")
    if not any(action.dest == "metrics" for action in parser._actions):
        group.add_argument("--metrics", nargs="+", help="metrics to compute (registry names, e.g. CLIP-S BLEU-4)")
    group.add_argument("--profile", help="scoring profile (default: $CAPLENS_PROFILE or the registry default)")
    group.add_argument("--device", help="torch device for the scorer")
    group.add_argument("--image-root", type=Path, help="folder that relative image paths are resolved against")


# --- helpers ---------------------------------------------------------------------------------


def _read_csv(path: Path):
    from scoring.analysis.run import read_table

    return read_table(path)


def _emit(table, args, formatted=None) -> None:
    import pandas as pd

    with pd.option_context("display.max_rows", 500, "display.max_columns", 50, "display.width", 200,
                           "display.float_format", "{:.4f}".format):
        print((formatted if formatted is not None else table).to_string(index=False))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        frame_to_csv(table, args.out)
        print(f"wrote {args.out}")


def _save(table, path: Path | None) -> None:
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        frame_to_csv(table, path)
        print(f"wrote {path}")


def _wide_scores(scores):
    """Long (metric, score) tables become wide, one column per metric."""
    if {"metric", "score"} <= set(scores.columns):
        keys = [c for c in scores.columns if c not in ("metric", "score")]
        if not keys:
            raise ValueError("long score table needs an item column (item_id or image_id + candidate)")
        return scores.pivot_table(index=keys, columns="metric", values="score", aggfunc="first").reset_index()
    return scores


@contextmanager
def _database(args):
    """A session (one transaction) and the acting user, as `caplens db` commands get them."""
    from annotation.people.accounts import get_user
    from annotation.database import database_session
    from db.models import User

    with database_session() as session:
        user = get_user(session, args.user) if args.user else User(name="local-cli", role="admin")
        yield session, user


def _fill_cache(session, user, args) -> dict[str, str]:
    """Score the collection now (and cache the values) when --metrics are asked for;
    returns {metric: reason} for those that cannot run (already printed)."""
    if not args.metrics:
        return {}
    from annotation.scores.score_store import fill_metric_cache

    unavailable = fill_metric_cache(session, user, _scorer(args), args.collection, args.metrics)
    for metric, reason in unavailable.items():
        print(f"{metric}: unavailable: {reason}")
    return unavailable


def _scorer(args):
    """The profile `caplens serve` and `caplens score` would choose, saying so in their words."""
    if not args.metrics:
        raise ValueError("scoring now needs --metrics")
    from scoring.cli import choose_profile

    return choose_profile(args.profile, args.device, "caplens analyze")


def _report_unavailable(unavailable: dict[str, str]) -> None:
    for metric, reason in unavailable.items():
        print(f"{metric}: unavailable: {reason}")


def _available(table, unavailable: dict[str, str]):
    """`table` without the metrics just reported unavailable (their rows of a long table, their
    columns of a wide one): no numbers are printed for a metric called unavailable."""
    if not unavailable:
        return table
    attrs = dict(table.attrs)
    if "metric" in table.columns:
        table = table[~table["metric"].isin(list(unavailable))]
    table = table.drop(columns=[c for c in table.columns if c in unavailable])
    if "metric" in table.columns and table.empty:
        raise ValueError("no numeric scores: every metric asked for is unavailable")
    table.attrs.update(attrs)
    return table


def _captions(path: Path):
    from scoring.analysis.run import read_captions

    return read_captions(path)


def _load_dataset(name: str, path: Path):
    from scoring.analysis.pipeline import load_rating_set

    return load_rating_set(name, path)


# --- handlers --------------------------------------------------------------------------------


def _correlation(args) -> int:
    from scoring.analysis.correlation import metric_columns

    if args.collection:
        return _collection_correlation(args)
    if args.bootstrap is None:
        args.bootstrap = 1000
    if args.per_rating:
        raise ValueError("--per-rating applies to --collection")
    if args.scores is None:
        if not (args.dataset and args.dataset_path):
            raise ValueError("give --scores, or --dataset and --dataset-path with --metrics to score now")
        from scoring.analysis.run import rating_correlation

        measured = rating_correlation(_scorer(args), args.dataset_path, args.metrics, dataset=args.dataset,
                                      image_root=args.image_root, group_by=args.group,
                                      coefficients=args.coefficients, n_boot=args.bootstrap, seed=args.seed)
        _report_unavailable(measured.unavailable)
        table = _available(measured.table, measured.unavailable)
        _emit(table, args)
        return _compare(_available(measured.scores, measured.unavailable), args, list(dict.fromkeys(table["metric"])))
    scores = _wide_scores(_read_csv(args.scores))
    if args.dataset:
        if not args.dataset_path:
            raise ValueError("--dataset needs --dataset-path")
        ratings = _load_dataset(args.dataset, args.dataset_path).drop(columns=["references"])
        keys = ["item_id"] if "item_id" in scores.columns else ["image_id", "candidate"]
        missing = [k for k in keys if k not in scores.columns]
        if missing:
            raise ValueError(f"{args.scores}: needs item_id (or image_id and candidate) to join with {args.dataset}")
        score_columns = [c for c in scores.columns if c not in ratings.columns or c in keys]
        if not args.metrics:
            args.metrics = [c for c in metric_columns(scores, args.human_col) if c in score_columns]
        table = ratings.merge(scores[score_columns], on=keys, how="inner")
        if table.empty:
            raise ValueError(f"no score row matches an item of {args.dataset}; check the item ids")
    else:
        table = scores
    return _correlate(table, args)


def _collection_correlation(args) -> int:
    """`annotation.scores.collection_analysis.collection_analysis`, the Analyze tab's function, with
    the profile the app would choose (unless --profile names one); without --metrics, the
    metrics this profile's checkpoints have cached scores for in the collection."""
    from annotation.scores.collection_analysis import collection_analysis
    from annotation.scores.score_store import cached_metric_names
    from scoring.analysis.report import CorrelationFilters
    from scoring.cli import choose_profile

    if args.group is not None:
        raise ValueError("--group does not apply to --collection: a collection is correlated per language")
    if args.human_col != "human":
        raise ValueError("--human-col does not apply to --collection: it uses the overall ratings")
    scorer = choose_profile(args.profile, args.device, "caplens analyze")
    if args.bootstrap is None:
        args.bootstrap = CorrelationFilters.n_boot
    filters = CorrelationFilters(per_rating=args.per_rating, n_boot=args.bootstrap, seed=args.seed,
                                 coefficients=tuple(args.coefficients))
    with _database(args) as (session, user):
        metrics = args.metrics or cached_metric_names(session, user, args.collection, scorer)
        if not metrics:
            raise ValueError(f"collection {args.collection!r} has no cached scores of profile {scorer.profile!r}: "
                             "give --metrics to score them now")
        report = collection_analysis(session, user, args.collection, scorer, metrics, filters)
    print(filters.describe())
    print(report.summary)
    _emit(report.correlations, args)
    return _compare(report.rows, args, list(dict.fromkeys(report.correlations["metric"])))


def _correlate(table, args, unavailable=None) -> int:
    """Correlation (and optional comparison / system level) of `table`; metrics reported
    unavailable are left out so the others still get their rows."""
    from scoring.analysis.correlation import metric_columns
    from scoring.analysis.run import correlate

    if args.human_col not in table.columns:
        raise ValueError(f"no human column {args.human_col!r}; give --dataset or add it to {args.scores}")
    metrics = [m for m in (args.metrics or metric_columns(table, args.human_col)) if m not in (unavailable or {})]
    _emit(correlate(table, metrics, human_col=args.human_col, group_by=args.group, coefficients=args.coefficients,
                    n_boot=args.bootstrap, seed=args.seed), args)
    return _compare(table, args, metrics)


def _compare(table, args, metrics: list[str]) -> int:
    """With --compare, whether two metrics' correlations differ; with --system-col, the
    system-level correlation."""
    from scoring.analysis.correlation import compare_metrics, system_level_correlation
    from scoring.analysis.run import default_groups

    group = args.group if args.group is not None else default_groups(table)
    if args.compare:
        missing = [m for m in args.compare if m not in metrics]
        if missing:
            raise ValueError(f"cannot compare {', '.join(missing)}: not among the scored metrics")
        print()
        for key, part in (table.groupby(group, sort=True) if group else [((), table)]):
            label = " ".join(map(str, key if isinstance(key, tuple) else (key,)))
            comparison = compare_metrics(
                part, *args.compare, human_col=args.human_col, coefficient_name=args.compare_coefficient,
                test=args.test, n_boot=args.bootstrap or 1000, seed=args.seed,
            )
            print(
                f"{label + ': ' if label else ''}{comparison.test}: {args.compare[0]} {comparison.coefficient}="
                f"{comparison.value_a:.4f} vs {args.compare[1]} {comparison.value_b:.4f}; "
                f"difference {comparison.difference:+.4f}"
                + (f" [{comparison.low:+.4f}, {comparison.high:+.4f}]" if comparison.low == comparison.low else "")
                + f", {_p_text(comparison, args.bootstrap or 1000)}, n={comparison.n}"
            )
    if args.system_col:
        print("\nsystem level:")
        print(system_level_correlation(table, metrics, human_col=args.human_col, system_col=args.system_col,
                                       group_by=group).to_string(index=False, float_format="{:.4f}".format))
    return 0


def _p_text(comparison, n_boot: int) -> str:
    """A bootstrap p of 0 only means 'below the resolution of n_boot replicates'."""
    if comparison.test == "paired bootstrap" and comparison.p_value == 0:
        return f"p<{2 / n_boot:.2g}"
    return f"p={comparison.p_value:.4g}"


def _robustness(args) -> int:
    from scoring.analysis.robustness import format_table7, op_name, robustness_table
    from scoring.perturb.ops import PRMCS_OPS, canonical_op

    if args.collection:
        from annotation.scores.score_store import collection_robustness_scores

        with _database(args) as (session, user):
            unavailable = _fill_cache(session, user, args)
            scores = _available(collection_robustness_scores(session, user, args.collection, args.metrics), unavailable)
    elif args.captions:
        from scoring.analysis.pipeline import perturbation_scores

        ops = [canonical_op(o) for o in args.ops] if args.ops else list(PRMCS_OPS)
        scores = perturbation_scores(_scorer(args), _captions(args.captions), args.metrics, ops, p=args.p,
                                     seed=args.seed, image_root=args.image_root)
        _report_unavailable(scores.attrs["unavailable"])
        _save(scores, args.save_scores)
        scores = _available(scores, scores.attrs["unavailable"])
    else:
        scores = _read_csv(args.scores)
    table = robustness_table(scores, args.ops)
    _emit(table, args, None if args.numeric else format_table7(table, [op_name(o) for o in args.ops] if args.ops else None))
    if args.detection:
        from scoring.analysis.robustness import detection_rates

        rates = detection_rates(scores).pivot_table(index=["lang", "metric"], columns="op", values="detected")
        print("\nshare of perturbed captions scored below their original:")
        print(rates.reset_index().to_string(index=False, float_format="{:.3f}".format))
    return 0


def _specificity(args) -> int:
    from scoring.analysis.run import specificity, specificity_rates

    if args.captions or args.collection:
        if args.collection:
            from annotation.scores.score_store import collection_captions

            with _database(args) as (session, user):
                captions = collection_captions(session, user, args.collection)
        else:
            captions = _captions(args.captions)
        measured = specificity(_scorer(args), captions, args.metrics, seed=args.seed, image_root=args.image_root)
        _report_unavailable(measured.unavailable)
        _save(measured.scores, args.save_scores)
        _emit(_available(measured.table, measured.unavailable), args)
    else:
        _emit(specificity_rates(_read_csv(args.scores)), args)
    return 0


def _retrieval(args) -> int:
    import numpy as np

    from scoring.analysis.datasets import coco_sm_text_to_image, load_coco_sm, load_coco_sm_id_mapping
    from scoring.analysis.retrieval import retrieval_table

    if args.coco_sm:
        from scoring.analysis.run import coco_sm_retrieval
        from scoring.cli import choose_profile

        measured = coco_sm_retrieval(choose_profile(args.profile, args.device, "caplens analyze"), args.coco_sm, args.metric,
                                     langs=args.langs, image_root=args.image_root, reference_lang=args.reference_lang)
        if args.save_similarities:
            args.save_similarities.parent.mkdir(parents=True, exist_ok=True)
            np.savez(args.save_similarities, text_to_image=measured.text_to_image, **measured.similarities)
            print(f"wrote {args.save_similarities}")
        _emit(measured.table, args)
        return 0
    if not args.similarities.exists():
        raise FileNotFoundError(f"no such file: {args.similarities}")
    with np.load(args.similarities) as archive:
        arrays = {name: archive[name] for name in archive.files}
    text_to_image = arrays.pop("text_to_image", None)
    if args.text_to_image:
        if not args.text_to_image.exists():
            raise FileNotFoundError(f"no such file: {args.text_to_image}")
        try:
            is_mapping = "text2image" in json.loads(args.text_to_image.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            raise ValueError(f"{args.text_to_image}: not valid JSON") from None
        if is_mapping:
            text_to_image = load_coco_sm_id_mapping(args.text_to_image)
        else:
            captions = load_coco_sm(args.text_to_image)
            text_to_image = coco_sm_text_to_image(captions, captions["lang"].iloc[0])
    if text_to_image is None:
        raise ValueError("give --text-to-image or store a 'text_to_image' array in the .npz")
    _emit(retrieval_table(arrays, text_to_image, reference_lang=args.reference_lang), args)
    return 0


def _metrics_from_suffix(columns, suffix: str) -> list[str]:
    return [c[: -len(suffix)] for c in columns if c.endswith(suffix) and c != suffix]


def _pascal50s(args) -> int:
    from scoring.analysis.datasets import load_pascal50s
    from scoring.analysis.pairwise import pascal50s_table

    if args.collection:
        return _pairwise_study(args)
    if args.scores is None:
        if not args.pascal_dir:
            raise ValueError("give --scores, or --pascal-dir with --metrics to score the pairs now")
        from scoring.analysis.run import pascal50s

        measured = pascal50s(_scorer(args), args.pascal_dir, args.metrics, n_references=args.references,
                             seed=args.seed, image_root=args.image_root)
        _report_unavailable(measured.unavailable)
        _emit(_available(measured.table, measured.unavailable), args)
        return 0
    scores = _read_csv(args.scores)
    if args.pascal_dir:
        pairs = load_pascal50s(args.pascal_dir).drop(columns=["references"])
        if "pair_id" not in scores.columns:
            raise ValueError(f"{args.scores}: needs a pair_id column to join with Pascal-50S")
        scores = pairs.merge(scores.drop(columns=[c for c in ("category", "votes_a", "votes_b") if c in scores]),
                             on="pair_id", how="inner")
    metrics = args.metrics or [m for m in _metrics_from_suffix(scores.columns, "_a")
                               if f"{m}_b" in scores.columns and m not in ("votes", "caption")]
    if not metrics:
        raise ValueError("no <metric>_a / <metric>_b score columns found")
    _emit(pascal50s_table(scores, metrics, seed=args.seed), args)
    return 0


def _pairwise_study(args) -> int:
    """`annotation.studies.pairwise.pairwise_analysis`, the Pairwise tab's function (which computes the
    accuracy with `pascal50s_table`, as above), with the profile the app would choose."""
    from annotation.studies.pairwise import pairwise_analysis
    from scoring.cli import choose_profile

    if args.scores or args.pascal_dir:
        raise ValueError("--collection reads the study's judgments: leave out --scores and --pascal-dir")
    scorer = choose_profile(args.profile, args.device, "caplens analyze")
    with _database(args) as (session, user):
        report = pairwise_analysis(session, user, args.collection, scorer,
                                   args.metrics or scorer.metric_names(), seed=args.seed)
    print(report.summary)
    _emit(report.accuracy, args)
    if report.ranking is not None:
        print("Bradley-Terry ranking of the caption sources (95% cluster-bootstrap intervals over pairs, resampled "
              "within each pair of sources):")
        if report.ranking.warning:
            print(report.ranking.warning)
        _emit(report.ranking.table, argparse.Namespace(out=None))
    return 0


def _foil(args) -> int:
    from scoring.analysis.pairwise import foil_table

    if args.foil_json:
        from scoring.analysis.run import foil

        measured = foil(_scorer(args), args.foil_json, args.metrics, n_references=args.references, seed=args.seed,
                        image_root=args.image_root)
        _report_unavailable(measured.unavailable)
        _emit(_available(measured.table, measured.unavailable), args)
        return 0
    scores = _read_csv(args.scores)
    metrics = args.metrics or [m for m in _metrics_from_suffix(scores.columns, "_correct") if f"{m}_foil" in scores]
    if not metrics:
        raise ValueError("no <metric>_correct / <metric>_foil score columns found")
    _emit(foil_table(scores, metrics), args)
    return 0


def _length(args) -> int:
    from scoring.analysis.pipeline import length_analysis

    if args.collection:
        from annotation.scores.score_store import collection_table

        with _database(args) as (session, user):
            unavailable = _fill_cache(session, user, args) if args.profile else {}
            table = collection_table(session, user, args.collection)
        args.metrics = [m for m in args.metrics if m not in unavailable]
    else:
        table = _read_csv(args.scores)
    missing = [m for m in args.metrics if m not in table.columns]
    if missing and args.collection:
        raise ValueError(f"no scores for {', '.join(missing)} (give --profile to compute them)")
    _emit(length_analysis(table, args.metrics, human_col=args.human_col, edges=args.edges,
                          combine=tuple(args.combine) if args.combine else None, threshold=args.threshold), args)
    return 0


def _load(args) -> int:
    table = _load_dataset(args.dataset, args.path)
    if args.collection:
        if not args.image_root:
            raise ValueError("--collection needs --image-root (the images are stored in the database)")
        from annotation.scores.score_store import into_collection

        with _database(args) as (session, user):
            report = into_collection(session, user, table, args.collection, args.image_root,
                                     scale=tuple(args.scale) if args.scale else None, source_name=str(args.path))
        print(json.dumps(report.to_dict(), indent=2))
    out = table.copy()
    out["references"] = out["references"].map(lambda refs: json.dumps(list(refs), ensure_ascii=False))
    summary = table.groupby(["collection", "lang"]).agg(rows=("human", "size"), items=("item_id", "nunique"),
                                                       images=("image_id", "nunique"), human_mean=("human", "mean"))
    print(summary.reset_index().to_string(index=False))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        frame_to_csv(out, args.out)
        print(f"wrote {args.out}")
    return 0
