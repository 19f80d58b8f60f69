"""`caplens perturb`: perturb a caption or split it into SPECS detail units (JSON out)."""
from __future__ import annotations

import argparse
import json
import sys

_OPS_HELP = (
    "repetition, removal, masking, jumble, substitution (PR-MCS), keyword-substitution, "
    "repeat-remove (UMIC; UMIC's word-order permutation is jumble, 'permutation' is accepted "
    "as its alias), or 'all' for the five PR-MCS operations"
)


def register(subparsers, parents) -> None:
    """Add this package's subcommands to the `caplens` parser."""
    parser = subparsers.add_parser(
        "perturb",
        parents=parents,
        help="perturb a caption (PR-MCS / UMIC) or split it into detail units (SPECS)",
        description=(
            "Print a seeded perturbation of TEXT as JSON ({text, op, p, seed, lang, parent, "
            "changed_spans, noop, ...}), or with --detail-units its SPECS detail units as a "
            "JSON list."
        ),
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--op", metavar="OP", help=_OPS_HELP)
    mode.add_argument(
        "--detail-units", action="store_true", help="print TEXT's detail units as a JSON list"
    )
    parser.add_argument(
        "--p", type=float, default=None,
        help=(
            "per-token probability; for keyword-substitution the fraction of keywords replaced, "
            "round(p * their number), at least one (default as in the papers: 0.4 for repetition and masking, "
            "0.6 for removal (PR-MCS Algorithm 1 keeps each word with 0.4), 0.3 for "
            "keyword-substitution and repeat-remove)"
        ),
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--lang", default="en",
                        help="language code: en, de, fr, es, ja, ... or auto to detect it (default: en)")
    parser.add_argument(
        "--critical", default=None,
        help='critical objects for substitution, separated by ";" (e.g. "white shirt;golf")',
    )
    parser.add_argument(
        "--corpus", default=None, metavar="FILE",
        help="captions (one per line) supplying replacement words for keyword-substitution",
    )
    parser.add_argument("text", metavar="TEXT", help="the caption")
    parser.set_defaults(handler=_run)


def _read_corpus(path: str) -> list[str]:
    with open(path, encoding="utf-8") as handle:
        return [line.strip() for line in handle if line.strip()]


def _json(value) -> str:
    """Indented for a person at a terminal; one line for a pipe or a program."""
    return json.dumps(value, ensure_ascii=False, indent=2 if sys.stdout.isatty() else None)


def _run(args: argparse.Namespace) -> int:
    if not args.text.strip():
        raise ValueError("caption text is empty: nothing to perturb")
    from scoring.language_id import resolve_language

    lang = resolve_language(args.lang, args.text)
    if args.detail_units:
        from scoring.perturb.detail_units import detail_units

        print(_json(detail_units(args.text, lang)))
        return 0
    from scoring.perturb.ops import PRMCS_OPS, canonical_op, perturb

    ops = PRMCS_OPS if args.op == "all" else (canonical_op(args.op),)
    corpus = _read_corpus(args.corpus) if args.corpus else None
    results = [
        perturb(
            args.text, op, p=args.p, seed=args.seed, lang=lang,
            critical=args.critical, corpus=corpus,
        ).to_dict()
        for op in ops
    ]
    print(_json(results if args.op == "all" else results[0]))
    return 0
