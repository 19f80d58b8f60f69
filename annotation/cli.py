"""`caplens db ...` and `caplens user ...`: migrations, import, export, agreement, accounts.

The command line acts for the person who owns the data directory: without `--user` it acts
as a local administrator (that person can open the database file anyway); with `--user NAME`
(or `CAPLENS_USER`) it acts as that account and its role is checked like in the UI.
"""
from __future__ import annotations

import argparse
import getpass
import json
import os
import sys

EXPORT_KINDS = ("ratings", "captions", "critical", "finetune-prmcs", "finetune-specs", "finetune-umic",
                "finetune-pacs", "finetune-human")


def _subcommands(subparsers, name: str) -> argparse._SubParsersAction:
    """The sub-command group of an existing command (`world`), so this package can add to it."""
    parser = subparsers.choices[name]
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def register(subparsers, parents) -> None:
    """Add `db`, `user` and `world seed` to the `caplens` parser."""
    seed = _subcommands(subparsers, "world").add_parser(
        "seed", parents=parents, help="import the demo collection (world images, captions, perturbations, ratings)")
    seed.add_argument("--scenes", type=int, default=12)
    seed.add_argument("--force", action="store_true", help="import again even if the demo collection exists")
    seed.set_defaults(handler=_seed)
    study = _subcommands(subparsers, "world").add_parser(
        "study", parents=parents,
        help="a simulated rating study: world captions imported into a collection, rated by the world's simulated "
             "annotators (accounts sim-annotator-0, -1, ...) through the same queue people use, and exported as a "
             "CapLens-R training set (the finetune-human set)")
    study.add_argument("out", metavar="DIR", help="folder for the exported training set")
    study.add_argument("--collection", required=True, help="a new collection for the study's captions")
    study.add_argument("--scenes", type=int, default=20, help="world scenes to import (default 20)")
    study.add_argument("--split", default="train", choices=("train", "validation", "test"),
                       help="the seed range the scenes come from (default train: a set to learn from)")
    study.add_argument("--skip", type=int, default=0, help="scenes of the range to pass over first")
    study.add_argument("--langs", default="en", help="comma-separated world languages (default en)")
    study.add_argument("--annotators", type=int, default=3, help="simulated annotators; each caption gets this many ratings")
    study.add_argument("--size", type=int, default=128, help="image side in pixels")
    study.add_argument("--user", default=os.environ.get("CAPLENS_USER"), help="act as this account")
    study.set_defaults(handler=_world_study)

    db = subparsers.add_parser("db", parents=parents, help="database: migrations, import, export, agreement")
    db_commands = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)

    upgrade = db_commands.add_parser("upgrade", parents=parents, help="create or upgrade the schema (Alembic)")
    upgrade.add_argument("--revision", default="head")
    upgrade.set_defaults(handler=_upgrade)

    downgrade = db_commands.add_parser("downgrade", parents=parents, help="downgrade the schema to REVISION")
    downgrade.add_argument("revision", help="target revision (`base` drops every table)")
    downgrade.set_defaults(handler=_downgrade)

    current = db_commands.add_parser("current", parents=parents, help="show the database URL and schema revision")
    current.set_defaults(handler=_current)

    importer = db_commands.add_parser("import", parents=parents,
                                      help="import CSV / JSONL / zip+manifest / CLIPScore JSON (all or nothing)")
    importer.add_argument("file")
    importer.add_argument("--collection", help="collection to import into (default: the file name)")
    importer.add_argument("--format", dest="fmt", choices=("csv", "jsonl", "zip", "clipscore"),
                          help="default: from the file suffix (.json = CLIPScore / PAC-S candidates)")
    importer.add_argument("--references", help="CLIPScore / PAC-S references JSON ({image_id: [refs]})")
    importer.add_argument("--image-dir", help="the folder the rows' image paths are relative to (default: the file's "
                                              "folder); for CLIPScore / PAC-S the image folder (<image_id>.<ext>)")
    importer.add_argument("--model", help="captioning model that wrote CLIPScore / PAC-S candidates")
    importer.add_argument("--allow-reimport", action="store_true", help="import a file already imported")
    importer.add_argument("--user", default=os.environ.get("CAPLENS_USER"), help="act as this account")
    importer.set_defaults(handler=_import)

    scores = db_commands.add_parser("import-scores", parents=parents,
                                    help="store the scores of a `caplens score-corpus` run in a collection")
    scores.add_argument("out", metavar="DIR", help="output folder of a score-corpus run")
    scores.add_argument("--collection", required=True, help="collection to store the scores in (created if needed)")
    scores.add_argument("--user", default=os.environ.get("CAPLENS_USER"), help="act as this account")
    scores.set_defaults(handler=_import_scores)

    exporter = db_commands.add_parser("export", parents=parents, help="export ratings, captions or fine-tuning sets")
    exporter.add_argument("out", help="output file (ratings, captions) or folder (fine-tuning sets, hf)")
    exporter.add_argument("--format", dest="fmt", required=True, choices=("csv", "jsonl", "parquet", "hf"))
    exporter.add_argument("--what", default="ratings", choices=EXPORT_KINDS)
    exporter.add_argument("--collection")
    exporter.add_argument("--seed", type=int, default=0, help="seed for sampled negatives (fine-tuning sets)")
    exporter.add_argument("--user", default=os.environ.get("CAPLENS_USER"), help="act as this account")
    exporter.set_defaults(handler=_export)

    agreement = db_commands.add_parser("agreement", parents=parents,
                                       help="Krippendorff's alpha and pairwise correlations of a collection")
    agreement.add_argument("--collection", required=True)
    agreement.add_argument("--field", default="overall", choices=("overall", "fluency", "relevance", "descriptiveness"))
    agreement.add_argument("--user", default=os.environ.get("CAPLENS_USER"), help="act as this account")
    agreement.set_defaults(handler=_agreement)

    perturb = db_commands.add_parser("perturb", parents=parents,
                                     help="store PR-MCS perturbations of a collection's captions")
    perturb.add_argument("--collection", required=True)
    perturb.add_argument("--ops", nargs="+", help="operations (default: the five PR-MCS ones)")
    perturb.add_argument("--seed", type=int, default=0)
    perturb.add_argument("--p", type=float, help="per-token probability (default: the paper's)")
    perturb.add_argument("--user", default=os.environ.get("CAPLENS_USER"), help="act as this account")
    perturb.set_defaults(handler=_perturb)

    order = db_commands.add_parser("queue-order", parents=parents,
                                   help="set the order a collection's rating queue serves items in")
    order.add_argument("--collection", required=True)
    order.add_argument("order", help="least-rated (the default: fewest ratings first) or disagreement-first "
                                     "(then the items the stored metric scores disagree on most)")
    order.add_argument("--user", default=os.environ.get("CAPLENS_USER"), help="act as this account")
    order.set_defaults(handler=_queue_order)

    pairs = db_commands.add_parser("pairs", parents=parents,
                                   help="a pairwise study: make a collection's pairs, import a pair file, export the "
                                        "judgments as Pascal-50S files (what the app's Pairwise tab does)")
    pairs.add_argument("--collection", required=True)
    pairs.add_argument("--make", action="store_true",
                       help="pair every two captions of one image from different sources (source_model)")
    pairs.add_argument("--with-references", action="store_true", help="with --make: pair the references too")
    pairs.add_argument("--import", dest="pair_file", metavar="FILE",
                       help="a pair file (CSV or JSONL: caption_a, caption_b, optional image, category)")
    pairs.add_argument("--export", dest="export_dir", metavar="DIR",
                       help="write pair_pascal.mat and consensus_pascal.mat of the judged pairs to DIR")
    pairs.add_argument("--user", default=os.environ.get("CAPLENS_USER"), help="act as this account")
    pairs.set_defaults(handler=_pairs)

    gc = db_commands.add_parser("gc", parents=parents, help="delete stored image files no database row uses, "
                                "and the staging of imports that were killed")
    gc.add_argument("--dry-run", action="store_true")
    gc.add_argument("--staging-idle-minutes", type=float, default=60.0,
                    help="an import's staging untouched this long is abandoned, and an unreferenced "
                         "image file written this long ago is deleted (default 60)")
    gc.set_defaults(handler=_gc)

    user = subparsers.add_parser("user", parents=parents, help="annotator, researcher and admin accounts")
    user_commands = user.add_subparsers(dest="user_command", metavar="ACTION", required=True)
    add = user_commands.add_parser("add", parents=parents, help="add an account")
    add.add_argument("name")
    add.add_argument("--role", required=True, choices=("annotator", "researcher", "admin"))
    add.add_argument("--password-stdin", action="store_true",
                     help="read the password from standard input (else $CAPLENS_PASSWORD, else a prompt)")
    add.add_argument("--no-login", action="store_true", help="account without a password (cannot log in)")
    add.set_defaults(handler=_user_add)
    passwd = user_commands.add_parser("passwd", parents=parents, help="set an account's password")
    passwd.add_argument("name")
    passwd.add_argument("--password-stdin", action="store_true")
    passwd.set_defaults(handler=_user_passwd)
    role = user_commands.add_parser("set-role", parents=parents, help="change an account's role")
    role.add_argument("name")
    role.add_argument("role", choices=("annotator", "researcher", "admin"))
    role.set_defaults(handler=_user_set_role)
    listing = user_commands.add_parser("list", parents=parents, help="list accounts")
    listing.set_defaults(handler=_user_list)
    sessions = user_commands.add_parser("sessions", parents=parents,
                                        help="list an account's logins (when, from where, until when)")
    sessions.add_argument("name")
    sessions.add_argument("--revoke", action="store_true", help="end every one of them now")
    sessions.set_defaults(handler=_user_sessions)


def _acting_user(session, name: str | None):
    from annotation.people.accounts import get_user
    from db.models import User

    if name:
        return get_user(session, name)
    return User(name="local-cli", role="admin")


def _upgrade(args) -> int:
    from annotation.database import database_url
    from db.session import current_revision, upgrade

    url = database_url()
    upgrade(url, revision=args.revision)
    print(f"{_redacted(url)}: schema at revision {current_revision(url)}")
    return 0


def _downgrade(args) -> int:
    from annotation.database import database_url
    from db.session import current_revision, downgrade

    url = database_url()
    downgrade(url, revision=args.revision)
    print(f"schema at revision {current_revision(url) or 'base (empty)'}")
    return 0


def _current(args) -> int:
    from annotation.database import database_url
    from db.session import current_revision, head_revision
    from scoring.paths import data_dir

    url = database_url()
    print(f"data directory: {data_dir()}")
    print(f"database: {_redacted(url)}")
    print(f"revision: {current_revision(url) or 'none (run caplens db upgrade)'} (code head: {head_revision()})")
    return 0


def _redacted(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def _progress(stage: str, done: int, total: int) -> None:
    print(f"{stage} {done}/{total}", file=sys.stderr, flush=True)


def _import(args) -> int:
    from annotation.database import database_session
    from annotation.transfer.importers import import_file

    with database_session(read_only=True) as session:  # it commits its own short batches
        report = import_file(session, _acting_user(session, args.user), args.file, collection=args.collection,
                             fmt=args.fmt, references=args.references, image_dir=args.image_dir,
                             source_model=args.model, allow_reimport=args.allow_reimport, progress=_progress,
                             commit_batches=True)
    print(json.dumps(report.to_dict(), indent=2))
    return 0


def _import_scores(args) -> int:
    from annotation.database import database_session
    from annotation.scores.corpus_scores import import_corpus_scores

    with database_session() as session:
        report = import_corpus_scores(session, _acting_user(session, args.user), args.out, args.collection)
    print(json.dumps(report.to_dict(), indent=2))
    return 0


def _export(args) -> int:
    from annotation.captions import get_collection
    from annotation.database import database_session
    from annotation.transfer.exporters import export_table
    from annotation.transfer.finetune_sets import build_finetune_set

    with database_session(read_only=True) as session:
        user = _acting_user(session, args.user)
        collection = get_collection(session, args.collection) if args.collection else None
        if args.what.startswith("finetune-"):
            summary = build_finetune_set(session, user, args.what.removeprefix("finetune-"), args.out,
                                         collection=collection, fmt=args.fmt, seed=args.seed)
        else:
            summary = export_table(session, user, args.what, args.out, args.fmt, collection)
    print(json.dumps(summary, indent=2, ensure_ascii=False))
    return 0


def _pairs(args) -> int:
    from annotation.studies import pairwise
    from annotation.captions import get_collection
    from annotation.database import database_session

    if not (args.make or args.pair_file or args.export_dir):
        raise ValueError("give --make, --import FILE or --export DIR")
    rows = pairwise.read_pair_file(args.pair_file) if args.pair_file else None
    report = {}
    with database_session() as session:
        user, collection = _acting_user(session, args.user), get_collection(session, args.collection)
        if args.make:
            report["made"] = pairwise.make_pairs(session, user, collection, args.with_references)
        if rows is not None:
            report["imported"] = pairwise.import_pairs(session, user, collection, rows)
        report["pairs"] = len(pairwise.collection_pairs(session, collection))
        if args.export_dir:
            report["exported"] = pairwise.export_pascal50s(session, user, collection, args.export_dir)
    print(json.dumps(report, indent=2))
    return 0


def _agreement(args) -> int:
    from dataclasses import asdict

    from annotation.studies.agreement import agreement, study_agreement
    from annotation.studies.quality import participants
    from annotation.captions import get_collection
    from annotation.database import database_session

    with database_session(read_only=True) as session:
        user, collection = _acting_user(session, args.user), get_collection(session, args.collection)
        report = agreement(session, user, collection, field=args.field).to_dict()
        # the agreement dashboard's numbers, as the app and the exports' agreement.json give them
        report["dashboard"] = study_agreement(session, user, collection, field=args.field).to_dict()
        # each annotator's qualification, checks answered, gold accuracy, flag and pause
        report["quality"] = [asdict(row) for row in participants(session, user, collection)]
    print(json.dumps(report, indent=2))
    return 0


def _perturb(args) -> int:
    from dataclasses import asdict

    from annotation.captions import get_collection
    from annotation.database import database_session
    from annotation.perturbations import perturb_collection

    with database_session() as session:
        summary = perturb_collection(session, _acting_user(session, args.user), get_collection(session, args.collection),
                                     args.ops, seed=args.seed, p=args.p)
    print(json.dumps(asdict(summary), indent=2))
    return 0


def _queue_order(args) -> int:
    from annotation.database import database_session
    from annotation.studies.queue_orders import set_queue_order

    with database_session() as session:
        collection = set_queue_order(session, _acting_user(session, args.user), args.collection, args.order)
        print(f"collection {collection.name!r}: rating queue order {collection.queue_order}")
    return 0


def _gc(args) -> int:
    from datetime import timedelta

    from annotation.database import database_session
    from annotation.image_store import orphaned_files
    from annotation.transfer.importers import gc_stagings

    with database_session() as session:  # a write lock: no import can add rows meanwhile
        idle = timedelta(minutes=args.staging_idle_minutes)
        stagings = 0 if args.dry_run else gc_stagings(session, idle)
        orphans = orphaned_files(session, idle)
        if not args.dry_run:
            for path in orphans:
                path.unlink(missing_ok=True)
    print(f"{'would delete' if args.dry_run else 'deleted'} {len(orphans)} unreferenced image files; "
          f"{stagings} abandoned import stagings deleted")
    return 0


def _read_password(from_stdin: bool) -> str:
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif os.environ.get("CAPLENS_PASSWORD"):
        password = os.environ["CAPLENS_PASSWORD"]
    elif sys.stdin.isatty():
        password = getpass.getpass("password: ")
        if getpass.getpass("again: ") != password:
            raise ValueError("the passwords differ")
    else:
        raise ValueError("no password: use --password-stdin, CAPLENS_PASSWORD or a terminal prompt")
    return password


def _user_add(args) -> int:
    from annotation.people.accounts import create_user
    from annotation.database import database_session

    password = None if args.no_login else _read_password(args.password_stdin)
    with database_session() as session:
        user = create_user(session, args.name, args.role, password)
        print(f"added {user.name} ({user.role})")
    return 0


def _user_passwd(args) -> int:
    from annotation.people.accounts import get_user, set_password
    from annotation.database import database_session

    password = _read_password(args.password_stdin)
    with database_session() as session:
        set_password(session, get_user(session, args.name), password)
    print(f"password of {args.name} changed")
    return 0


def _user_set_role(args) -> int:
    from annotation.people.accounts import get_user, set_role
    from annotation.database import database_session

    with database_session() as session:
        set_role(session, get_user(session, args.name), args.role)
    print(f"{args.name} is now {args.role}")
    return 0


def _user_list(args) -> int:
    from sqlalchemy import select

    from annotation.database import database_session
    from db.models import User

    with database_session(read_only=True) as session:
        for user in session.scalars(select(User).order_by(User.name)):
            login = "" if user.password_hash else "  (no login)"
            print(f"{user.name}\t{user.role}{login}")
    return 0


def _user_sessions(args) -> int:
    from annotation.people.accounts import get_user
    from annotation.people.auth_sessions import account_sessions
    from annotation.database import database_session

    with database_session(read_only=not args.revoke) as session:
        user = get_user(session, args.name)
        live_before = sum(info.live for info in account_sessions(session, user))
        listed = account_sessions(session, user, revoke=args.revoke)
    for info in listed:
        state = "live" if info.live else "ended"
        print(f"{info.created_at:%Y-%m-%d %H:%M} UTC\tfrom {info.client or 'unknown'}\t"
              f"until {info.expires_at:%Y-%m-%d %H:%M} UTC\t{state}")
    if args.revoke:
        print(f"ended {live_before} live session(s) of {args.name}")
    elif not listed:
        print(f"{args.name} has no session that has not expired")
    return 0


def _world_study(args: argparse.Namespace) -> int:
    import tempfile
    from pathlib import Path

    from annotation.database import database_session
    from annotation.training.world_study import export_study, run_world_study
    from scoring.world.sets import split_scenes

    langs = tuple(code.strip() for code in args.langs.split(",") if code.strip())
    scenes = split_scenes(args.split, args.scenes, skip=args.skip)
    with tempfile.TemporaryDirectory(prefix="caplens-study-") as work, database_session() as session:
        report = run_world_study(session, _acting_user(session, args.user), scenes, args.collection, Path(work),
                                 langs=langs, annotators=args.annotators, size=args.size)
    with database_session(read_only=True) as session:
        exported = export_study(session, _acting_user(session, args.user), args.collection, Path(args.out))
    print(json.dumps({"collection": report.collection, "split": args.split, "scenes": len(scenes),
                      "captions": report.captions, "ratings": report.ratings, "annotators": list(report.annotators),
                      "training_set": exported}, indent=2, ensure_ascii=False))
    return 0


def _seed(args: argparse.Namespace) -> int:
    from annotation.demo_seed import seed_demo

    print(json.dumps(seed_demo(args.scenes, force=args.force)))
    return 0
