"""What a world CLIP's towers see: shape, colour and size of single objects, and each kind of
content error in short and long captions (the limit every world metric built on world-CLIP shares).

    python benchmarks/bench_world_vision.py --choose --first-seed 500100 --scenes 300 \
        [--model shipped=scoring/world/checkpoints/world-clip --model candidate=RUN/world-clip]

Reported per model (the first is the reference; each other one's differences are paired on the
same scene resamples, 95 % intervals):
- zero-shot attribute choice on one-object scenes: every shape x colour x size x grid cell drawn
  alone on the range's first one-object scene's background, the right caption among those that
  differ from it in that attribute only (chance 1/6 for shape, 1/8 colour, 1/2 size);
- a linear probe of the image embedding for shape on the same images (5-fold, softmax regression):
  what the embedding holds, whether or not the text tower reads it;
- pairwise accuracy on the range's English captions: the right caption above the same caption
  with one content error, per caption style and error kind (ties count half);
- counterfactual twins ("twin" rows): a short caption's own image above the same scene with one
  stated shape, or the two named objects' places, changed (three captions a scene): the image
  tower's side of the same facts.
"""
from __future__ import annotations

import itertools
import random
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from world_protocol import protocol_parser, run_and_write  # noqa: E402  (beside this script)

SHIPPED = "shipped=scoring/world/checkpoints/world-clip"


def _load(folder: str, device):
    from scoring.training.models import PixelCache, load_trainable

    clip = load_trainable(folder, device, ("clip",))
    clip.model.eval()
    return clip, PixelCache(clip.image_processor)


def _embed(clip, pixels, images, keys, texts, device):
    """Unit image embeddings of `images` and unit text embeddings of `texts`."""
    import torch

    from scoring.training.models import clip_image_features, clip_text_features

    with torch.no_grad():
        image = clip_image_features(clip, pixels(images, keys, device)).float() if images else None
        text = clip_text_features(clip, texts, device).float() if texts else None
    pixels.cache.clear()
    norm = torch.nn.functional.normalize
    return (norm(image, dim=-1) if image is not None else None), (norm(text, dim=-1) if text is not None else None)


def one_object_scenes(scenes):
    """Every shape x colour x size x cell alone, on the first one-object scene's background, with
    a seeded jitter (the template's own seed)."""
    from scoring.world.scene import COLOURS, SHAPES, SIZES

    template = next((s for s in scenes if len(s.objects) == 1), None)
    if template is None:
        raise ValueError("the range has no one-object scene to draw the single objects on: give more scenes")
    rng = random.Random(template.seed)
    obj = template.objects[0]
    out = []
    for shape, colour, size, cell in itertools.product(SHAPES, COLOURS, SIZES, [(r, c) for r in range(3) for c in range(3)]):
        jitter = (rng.uniform(-0.12, 0.12), rng.uniform(-0.12, 0.12))
        out.append(replace(template, objects=(replace(obj, shape=shape, colour=colour, size=size, cell=cell,
                                                      jitter=jitter),)))
    return template, out


def linear_probe(features: np.ndarray, labels: list[str], folds: int = 5) -> float:
    """Held-out accuracy of a softmax regression (standardised features, L2 1e-3, LBFGS) over `folds` folds."""
    import torch

    names = sorted(set(labels))
    target = torch.tensor([names.index(v) for v in labels])
    x = torch.tensor(features, dtype=torch.float32)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    right = 0
    for f in range(folds):
        test = order[f::folds]
        train = order[torch.isin(order, test, invert=True)]
        mu, sd = x[train].mean(0), x[train].std(0) + 1e-6
        w = torch.zeros(x.shape[1], len(names), requires_grad=True)
        b = torch.zeros(len(names), requires_grad=True)
        opt = torch.optim.LBFGS([w, b], max_iter=300)

        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(((x[train] - mu) / sd) @ w + b, target[train]) + 1e-3 * (w ** 2).sum()
            loss.backward()
            return loss

        opt.step(closure)
        right += int(((((x[test] - mu) / sd) @ w + b).argmax(1) == target[test]).sum())
    return right / len(labels)


def attributes(clip, pixels, singles, device) -> tuple[dict[str, float], float]:
    """Zero-shot attribute choice (shape, colour, size) and the shape probe, on `singles`."""
    from scoring.world.captions import scene_captions
    from scoring.world.render import render_scene
    from scoring.world.scene import COLOURS, SHAPES, SIZES

    choices = {"shape": SHAPES, "colour": COLOURS, "size": SIZES}
    right = defaultdict(int)
    embeddings = []
    for k, scene in enumerate(singles):
        obj = scene.objects[0]
        texts = {attr: [scene_captions(replace(scene, objects=(replace(obj, **{attr: v}),)), ("en",))["short"]["en"].text
                        for v in values] for attr, values in choices.items()}
        flat = [t for attr in choices for t in texts[attr]]
        image, text = _embed(clip, pixels, [render_scene(scene, 128)], [f"single-{k}"], flat, device)
        scores = (text @ image.T).squeeze(-1).tolist()
        start = 0
        for attr, values in choices.items():
            chunk = scores[start:start + len(values)]
            start += len(values)
            right[attr] += values[int(np.argmax(chunk))] == getattr(obj, attr)
        embeddings.append(image[0].numpy())
    accuracy = {attr: 100.0 * right[attr] / len(singles) for attr in choices}
    return accuracy, 100.0 * linear_probe(np.stack(embeddings), [s.objects[0].shape for s in singles])


def error_pairs(clip, pixels, scenes, device) -> list[tuple[int, str, str, float]]:
    """(scene index, style, error kind, 1 / 0.5 / 0) for every English caption with one content error."""
    from scoring.world.captions import scene_captions
    from scoring.world.errors import candidates_for
    from scoring.world.render import render_scene

    out = []
    for k, scene in enumerate(scenes):
        per_style = [(style, candidates_for(scene, caps["en"].description, ("en",), damaged=False))
                     for style, caps in scene_captions(scene, ("en",)).items()]
        texts = [c.text for _, cands in per_style for c in cands]
        image, text = _embed(clip, pixels, [render_scene(scene, 128)], [scene.scene_id], texts, device)
        scores = (text @ image.T).squeeze(-1).tolist()
        start = 0
        for style, cands in per_style:
            chunk, start = scores[start:start + len(cands)], start + len(cands)
            for cand, s in zip(cands[1:], chunk[1:]):
                out.append((k, style, cand.errors[0], 1.0 if chunk[0] > s else 0.5 if chunk[0] == s else 0.0))
    return out


def twin_pairs(clip, pixels, scenes, device, per_scene: int = 3) -> list[tuple[int, str, str, float]]:
    """(scene index, "twin", edit, 1 / 0.5 / 0): whether a short caption scores its own image above
    its counterfactual twin's (`counterfactual_twin`: one stated shape, or the two objects' places,
    changed), for up to `per_scene` short descriptions of each scene: the image side of what a
    caption states, which a caption-side error pair cannot separate from the text tower."""
    from scoring.world.captions import counterfactual_twin, describe_short, realise
    from scoring.world.render import render_scene

    out = []
    for k, scene in enumerate(scenes):
        rng = random.Random(scene.seed)
        drawn = []  # (caption, edit, twin scene)
        for _ in range(per_scene):
            description = describe_short(scene, rng)
            twin = counterfactual_twin(scene, description, rng)
            if twin is not None:
                drawn.append((realise(description, "en").text, twin[0], twin[1]))
        if not drawn:
            continue
        # one pass a scene: the scene, each twin, and each caption
        image, text = _embed(clip, pixels, [render_scene(scene, 128)] + [render_scene(t, 128) for _, _, t in drawn],
                             [scene.scene_id] + [f"{scene.scene_id}~{n}~{edit}" for n, (_, edit, _) in enumerate(drawn)],
                             [caption for caption, _, _ in drawn], device)
        for n, (_, edit, _) in enumerate(drawn):
            own, other = float(image[0] @ text[n]), float(image[n + 1] @ text[n])
            out.append((k, "twin", edit.split(":")[0], 1.0 if own > other else 0.5 if own == other else 0.0))
    return out


def run(first_seed: int, scenes: int, models: dict[str, str], n_boot: int, device: str | None, choose: bool) -> dict:
    import torch

    from scoring.analysis.correlation import cluster_bootstrap
    from scoring.world.scene import generate_scenes
    from scoring.world.splits import check_range

    torch.set_num_threads(1)
    dev = torch.device(device or "cpu")
    world = generate_scenes(first_seed, scenes)
    template, singles = one_object_scenes(world)
    started = time.time()
    per_model, pairs = {}, {}
    for name, folder in models.items():
        clip, pixels = _load(folder, dev)
        choice, probe = attributes(clip, pixels, singles, dev)
        pairs[name] = error_pairs(clip, pixels, world, dev) + twin_pairs(clip, pixels, world, dev)
        per_model[name] = {"folder": folder, "choice": choice, "shape_probe": probe}
    names = list(models)
    reference = pairs[names[0]]
    clusters = np.array([k for k, _, _, _ in reference])
    base = np.array([v for *_, v in reference])
    groups = [(style, None) for style in ("short", "long", "twin")] + sorted({(s, e) for _, s, e, _ in reference})
    table = []
    for style, kind in groups:
        mask = np.array([s == style and (kind is None or e == kind) for _, s, e, _ in reference])
        row = {"style": style, "error": kind or "all", "pairs": int(mask.sum()), "accuracy": {}, "difference": {}}
        for name in names:
            values = np.array([v for *_, v in pairs[name]])
            row["accuracy"][name] = cluster_bootstrap(lambda idx, v=values: 100 * v[idx][mask[idx]].mean()
                                                      if mask[idx].any() else float("nan"), clusters, n_boot=n_boot)
            if name != names[0]:
                row["difference"][name] = cluster_bootstrap(
                    lambda idx, v=values: 100 * (v[idx][mask[idx]] - base[idx][mask[idx]]).mean()
                    if mask[idx].any() else float("nan"), clusters, n_boot=n_boot)
        table.append(row)
    return {"range": check_range(first_seed, scenes, choose), "first_seed": first_seed, "scenes": scenes, "choose": choose,
            "template": template.scene_id, "singles": len(singles), "models": per_model, "pairs": table,
            "seconds": round(time.time() - started)}


def report(r: dict) -> str:
    names = list(r["models"])
    fmt = lambda e: f"{e.value:.1f} [{e.low:.1f}, {e.high:.1f}]"  # noqa: E731
    diff = lambda e: f"{e.value:+.1f} [{e.low:+.1f}, {e.high:+.1f}]"  # noqa: E731
    lines = [
        "# What world CLIP towers see (en, 95 % scene-bootstrap intervals)", "",
        f"Seeds {r['first_seed']}..{r['first_seed'] + r['scenes'] - 1} ({r['range']}, {r['scenes']} scenes), "
        f"`python benchmarks/bench_world_vision.py {'--choose ' if r['choose'] else ''}--first-seed {r['first_seed']} "
        f"--scenes {r['scenes']} " + " ".join(f"--model {n}={m['folder']}" for n, m in r["models"].items())
        + f"` ({r['seconds']} s).", "",
        f"One object alone ({r['singles']} images on the background of {r['template']}): zero-shot choice of the "
        "right caption among those differing in one attribute, and a linear probe of the image embedding for shape (%):", "",
        "| model | shape (chance 16.7) | colour (12.5) | size (50) | shape probe (16.7) |", "|---|---|---|---|---|"]
    for name, m in r["models"].items():
        c = m["choice"]
        lines.append(f"| {name} | {c['shape']:.1f} | {c['colour']:.1f} | {c['size']:.1f} | {m['shape_probe']:.1f} |")
    lines += ["", "Right caption above the same caption with one content error, and (style \"twin\") a short caption's own "
              "image above its counterfactual twin (%):", "",
              "| style | error | pairs | " + " | ".join(names) + "".join(f" | {n} − {names[0]}" for n in names[1:]) + " |",
              "|---" * (3 + len(names) + len(names) - 1) + "|"]
    for row in r["pairs"]:
        lines.append(f"| {row['style']} | {row['error']} | {row['pairs']} | "
                     + " | ".join(fmt(row["accuracy"][n]) for n in names)
                     + "".join(f" | {diff(row['difference'][n])}" for n in names[1:]) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = protocol_parser(__doc__.splitlines()[0], langs=False)
    parser.add_argument("--model", action="append", help="NAME=FOLDER of a world CLIP (repeat; the first is the reference)")
    args = parser.parse_args(argv)
    models = dict(m.split("=", 1) for m in (args.model or [SHIPPED]))
    return run_and_write("bench_world_vision", args,
                         lambda: run(args.first_seed, args.scenes, models, args.n_boot, args.device, args.choose), report)


if __name__ == "__main__":
    raise SystemExit(main())
