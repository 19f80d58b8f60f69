"""`caplens world ...`: show scenes, write sets, train and measure the world models."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"


def register(subparsers, parents) -> None:
    """Add `caplens world` and its subcommands."""
    world = subparsers.add_parser("world", parents=parents, help="synthetic world: scenes, sets, models, demo data",
                                  description="Procedural scenes with ground truth, their data sets and small models.")
    sub = world.add_subparsers(dest="world_command", metavar="WORLD_COMMAND", required=True)

    show = sub.add_parser("show", parents=parents, help="print a scene graph and its captions in five languages")
    show.add_argument("seed", type=int)
    show.add_argument("--image", type=Path, help="also write the rendered image (PNG) here")
    show.add_argument("--size", type=int, default=224)
    show.set_defaults(handler=_show)

    sets = sub.add_parser("sets", parents=parents, help="write scoring inputs, rated collection, fine-tuning and retrieval sets")
    sets.add_argument("out", type=Path)
    sets.add_argument("--split", default="test", choices=("train", "validation", "test", "heldout"))
    sets.add_argument("--scenes", type=int, default=200)
    sets.add_argument("--size", type=int, default=128, help="image side in pixels")
    sets.set_defaults(handler=_sets)

    train = sub.add_parser("train", parents=parents, help="train world-CLIP and/or world-MCS on the CPU")
    train.add_argument("model", choices=("clip", "mcs", "all"), nargs="?", default="all")
    train.add_argument("--out", type=Path, default=None,
                       help="folder receiving world-clip/ and world-mcs/ (default: a new folder "
                            "<data dir>/world-models/<date-time>; the shipped checkpoints only with --force)")
    train.add_argument("--force", action="store_true",
                       help="allow --out to overwrite trained models (the shipped checkpoints included)")
    train.add_argument("--clip-steps", type=int, default=1000)
    train.add_argument("--clip-scenes", type=int, default=8000)
    train.add_argument("--mcs-steps", type=int, default=800)
    train.add_argument("--mcs-scenes", type=int, default=1200)
    train.add_argument("--clip-config", default="world-clip")
    train.add_argument("--clip-swap", type=float, default=0.0,
                       help="weight of each caption with one word swapped as a wrong caption (NegCLIP-style; default 0)")
    train.add_argument("--mcs-config", default="world-mcs")
    train.add_argument("--threads", type=int, default=1,
                       help="torch threads (default 1: on a shared 2-core machine two OpenMP threads thrash)")
    train.add_argument("--seed", type=int, default=0)
    train.set_defaults(handler=_train)

    measure = sub.add_parser("measure", parents=parents, help="retrieval, Kendall tau_c and perturbation drops on held-out scenes")
    measure.add_argument("--profile", default="world")
    measure.add_argument("--retrieval-scenes", type=int, default=1000)
    measure.add_argument("--rated-scenes", type=int, default=60)
    measure.add_argument("--perturb-scenes", type=int, default=60)
    measure.add_argument("--json", type=Path, help="also write the full result as JSON here")
    measure.add_argument("--device")
    measure.set_defaults(handler=_measure)


def _show(args: argparse.Namespace) -> int:
    from .captions import scene_captions
    from .render import render_scene
    from .scene import generate_scene

    scene = generate_scene(args.seed)
    print(json.dumps(scene.to_dict(), ensure_ascii=False))
    for style, per_lang in scene_captions(scene).items():
        for lang, cap in per_lang.items():
            print(f"[{style} {lang}] {cap.text}")
            print(f"    units: {list(cap.units)}")
    if args.image:
        render_scene(scene, args.size).save(args.image)
        print(f"image written to {args.image}")
    return 0


def _sets(args: argparse.Namespace) -> int:
    from .sets import write_all

    print(json.dumps(write_all(args.out, args.split, args.scenes, size=args.size)))
    return 0


def training_folder(out: Path | None, models: tuple[str, ...], force: bool) -> Path:
    """Where `caplens world train` writes: `out`, else a new folder in the data directory.
    Models already there (the shipped checkpoints above all) are overwritten only with `force`."""
    from datetime import datetime, timezone

    from scoring.paths import data_dir

    if out is None:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        out = data_dir(create=True) / "world-models" / stamp
        n = 1
        while out.exists():
            n += 1
            out = out.with_name(f"{stamp}-{n}")
        return out
    existing = [name for name in models if (out / name / "config.json").is_file()]
    if existing and not force:
        shipped = out.resolve() == CHECKPOINTS.resolve()
        raise ValueError(f"{out} already holds {', '.join(existing)}" + (" (the shipped checkpoints)" if shipped else "")
                         + ": pass --force to overwrite, or leave out --out for a new folder in the data directory")
    return out


def _train(args: argparse.Namespace) -> int:
    from .train import train_clip, train_mcs

    models = {"clip": ("world-clip",), "mcs": ("world-mcs",), "all": ("world-clip", "world-mcs")}[args.model]
    out = training_folder(args.out, models, args.force)
    clip_dir, mcs_dir = out / "world-clip", out / "world-mcs"
    print(f"training into {out}", flush=True)
    common = f"--threads {args.threads} --seed {args.seed}"
    if args.model in ("clip", "all"):
        train_clip(clip_dir, config=args.clip_config, scenes=args.clip_scenes, steps=args.clip_steps,
                   seed=args.seed, threads=args.threads, swap=args.clip_swap)
        record_command(clip_dir, f"caplens world train clip --clip-config {args.clip_config} "
                                 f"--clip-scenes {args.clip_scenes} --clip-steps {args.clip_steps} "
                                 + (f"--clip-swap {args.clip_swap} " if args.clip_swap else "") + common)
    if args.model in ("mcs", "all"):
        teacher = clip_dir if (clip_dir / "config.json").is_file() else CHECKPOINTS / "world-clip"
        if not (teacher / "config.json").is_file():
            raise FileNotFoundError(f"world-MCS distils world-CLIP, which is not at {clip_dir}: train clip first")
        train_mcs(teacher, mcs_dir, config=args.mcs_config, scenes=args.mcs_scenes, steps=args.mcs_steps,
                  seed=args.seed, threads=args.threads)
        record_command(mcs_dir, f"caplens world train mcs --mcs-config {args.mcs_config} "
                                f"--mcs-scenes {args.mcs_scenes} --mcs-steps {args.mcs_steps} {common}")
    print(f"models written to {out}", flush=True)
    return 0


def record_command(model_dir: Path, command: str) -> None:
    """Add the reproducing command (all settings spelled out; add --out for another folder) to training.json."""
    path = model_dir / "training.json"
    meta = json.loads(path.read_text(encoding="utf-8"))
    meta["command"] = command
    path.write_text(json.dumps(meta, indent=1), encoding="utf-8")


def _measure(args: argparse.Namespace) -> int:
    from .measure import measure, report

    result = measure(args.profile, args.retrieval_scenes, args.rated_scenes, args.perturb_scenes, device=args.device)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    print(report(result))
    return 0

