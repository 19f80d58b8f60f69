"""The recipes: what each one loads, which loss it minimises, how it is evaluated and saved.

A recipe is data plus four hooks for the one trainer (`scoring.training.trainer`):
`setup` loads the models (only `state.trainable` is optimised), `batch_loss` computes the
loss of a batch of rows, `evaluate` measures held-out rows with the `scoring.analysis`
functions, `save` writes the folder the normal loader reads.  Losses: `losses.py`.
"""
from __future__ import annotations

import hashlib
import json
import random
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from torch import nn

from scoring.paths import write_atomically
from scoring.training import losses
from scoring.training.config import TrainConfig, _is_registry_ref
from scoring.training.data import image_key, load_set, world_set
from scoring.training.models import (
    PixelCache, add_grid_positions, clip_image_features, clip_text_features, itm_cls, load_trainable,
    save_backbone, save_st_encoder, st_text_features,
)

CLIP_PREFIX = "A photo depicts "


def _cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(a.float(), b.float(), dim=-1)


def frozen_teacher(config: TrainConfig, device, needed_by: str):
    """The frozen CLIP `teacher` of a loss term that reads one (`needed_by` says which and why)."""
    if config.teacher is None:
        raise ValueError(f"{needed_by}: set `teacher` (a CLIP folder or PROFILE:BACKBONE, e.g. world:clip)")
    teacher = load_trainable(config.teacher, device, ("clip",))
    teacher.model.requires_grad_(False).eval()
    return teacher


@torch.no_grad()
def clip_image_embeddings(clip, rows: list[dict], device) -> dict[str, torch.Tensor]:
    """`clip`'s embedding of every distinct image of `rows`, by image key, through its own image
    processor (a teacher's pixels are not its student's), once, in sorted-key chunks: the same
    values in a resumed run (a cache filled batch by batch would differ in the last bits). Only
    the embeddings are kept, not every image's pixels (221 MB for 2,000 world images at 96 px)."""
    images = {image_key(r): r["image"] for r in rows}
    keys = sorted(images)
    pixels, embeddings = PixelCache(clip.image_processor), {}
    for i in range(0, len(keys), 64):
        chunk = keys[i:i + 64]
        embeddings.update(zip(chunk, clip_image_features(clip, pixels([images[k] for k in chunk], chunk, device)).float()))
        pixels.cache.clear()  # the pixels are not needed again
    return embeddings


def _language(row: dict) -> str | None:
    return row.get("language") or row.get("lang")


SWAP_BY = ("context", "part_of_speech")


def keyword_swaps(texts: list[str], languages: list[str], config: TrainConfig) -> list[str]:
    """Each text with exactly one keyword swapped for another word of the texts in its language
    ("" where none can be), seeded by the text and `seed`: the hard negatives of `loss.swap`.
    `options.swap_by` picks the replacements: "context" (the default) takes a word seen between
    the same two neighbours, so a colour swaps for a colour and a side for a side;
    "part_of_speech" any word of the keyword's tag, which also gives odd texts such as "a red
    red triangle" (`scoring.perturb.ops.PosVocabulary`)."""
    from scoring.perturb.ops import PosVocabulary, perturb

    swap_by = config.options.get("swap_by", "context")
    if swap_by not in SWAP_BY:
        raise ValueError(f"options.swap_by is {swap_by!r}; expected one of {', '.join(SWAP_BY)}")
    # each distinct text once: a set repeats its short captions and detail units many times over
    distinct = sorted({(text, language) for text, language in zip(texts, languages) if text.strip()})
    by_language: dict[str, list[str]] = defaultdict(list)
    for text, language in distinct:
        by_language[language].append(text)
    vocabularies = {language: PosVocabulary(words, language, by_context=swap_by == "context")
                    for language, words in by_language.items()}
    swaps = {}
    for text, language in distinct:
        # p below 1 / keywords: exactly one keyword (the operation swaps at least one)
        swapped = perturb(text, "keyword-substitution", p=1e-6, lang=language, corpus=vocabularies[language],
                          seed=config.seed + zlib.crc32(text.encode()))
        swaps[text, language] = "" if swapped.noop else swapped.text
    return [swaps.get((text, language), "") for text, language in zip(texts, languages)]


@dataclass(frozen=True)
class Recipe:
    """What a recipe trains and produces (the hooks are its methods)."""

    name: str
    metric: str  # the registry metric the result backs
    backbone_kind: str  # "clip" | "st-text" | "blip-itm" | "caplens-r"
    set_kind: str  # world set / exported set kind the rows come from
    summary: str
    default_loss: dict[str, float] = field(default_factory=dict)

    # -- data ------------------------------------------------------------------------------------
    def check(self, config: TrainConfig) -> None:
        """Refuse options the recipe cannot honour, before any set is loaded or written."""

    def load_rows(self, config: TrainConfig) -> tuple[list[dict], str, dict]:
        if isinstance(config.data, dict):
            if "world" not in config.data:
                raise ValueError("`data` is a path to a set, or a table {world = {...}}")
            return self.world_rows(dict(config.data["world"]))
        return load_set(config.data)

    def world_rows(self, spec: dict) -> tuple[list[dict], str, dict]:
        return world_set(self.set_kind, spec)

    def prepare_rows(self, rows: list[dict], config: TrainConfig) -> list[dict]:
        """Keep the languages the config asks for (`options.languages`)."""
        wanted = config.options.get("languages")
        return [r for r in rows if not wanted or _language(r) in wanted]

    def training_rows(self, rows: list[dict], config: TrainConfig) -> list[dict]:
        """The rows a run trains on, of those it could use (all by default; the held-out rows are
        never narrowed by this)."""
        return rows

    def warnings(self, train_rows: list[dict], config: TrainConfig) -> list[str]:
        """What a user of the result must know about how it was trained (none by default)."""
        return []

    def fit_on(self, state, train_rows: list[dict]) -> None:
        """Anything fitted on the training rows alone before training (nothing by default)."""

    def result_kind(self, config: TrainConfig) -> str:
        """The backbone kind of the folder `save` writes (the loader that reads it)."""
        return self.backbone_kind

    budget_unit = "rows"  # what a learning curve counts (`budget`)

    def budget(self, rows: list[dict]) -> int:
        """How much supervision `rows` hold, in `budget_unit`."""
        return len(rows)

    def limit_training(self, rows: list[dict], budget: int, seed: int) -> list[dict]:
        """The training rows of a smaller budget: whole images in a seeded order until `budget`
        units are reached (`options.budget`; the learning curve trains one run per budget)."""
        keys = sorted({image_key(r) for r in rows})
        random.Random(seed).shuffle(keys)
        by_key: dict[str, list[dict]] = defaultdict(list)
        for r in rows:
            by_key[image_key(r)].append(r)
        kept, used = [], 0
        for key in keys:
            if used >= budget:
                break
            kept += by_key[key]
            used += self.budget(by_key[key])
        return kept

    def weights(self, config: TrainConfig) -> dict[str, float]:
        unknown = set(config.loss) - set(self.default_loss)
        if unknown:
            raise ValueError(f"recipe {self.name} has no loss weight(s) {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(self.default_loss) or 'none'}")
        return self.default_loss | config.loss

    # -- hooks -------------------------------------------------------------------------------------
    def setup(self, config: TrainConfig, device: torch.device, scratch: Path) -> SimpleNamespace:
        raise NotImplementedError

    def prepare(self, state, rows: list[dict], device) -> None:
        """Work done once on every row (train and held-out) before training; none by default."""

    def batch_loss(self, state, rows: list[dict], rng: random.Random, device) -> tuple[torch.Tensor, dict]:
        raise NotImplementedError

    def evaluate(self, state, rows: list[dict], device) -> dict[str, float]:
        raise NotImplementedError

    def save(self, state, out: Path) -> None:
        raise NotImplementedError


# -- CLIP-based: world-CLIP, PAC-S, SPECS ---------------------------------------------------------
def twin_edits(spec: dict) -> tuple[str, ...] | None:
    """A world spec's `twin_edits`: the kinds of counterfactual twin kept (None: every kind)."""
    if not spec.get("twin_edits"):
        return None
    edits = tuple(spec["twin_edits"])
    unknown = set(edits) - {"places", "shape"}
    if unknown:
        raise ValueError(f"twin_edits names {', '.join(sorted(unknown))}; known: places, shape")
    return edits


class ClipRecipe(Recipe):
    """CLIP fine-tuning.  A recipe with an `anchor` loss weight can hold one style of caption where a
    frozen `teacher` puts it (`anchor_field`: the row field of those captions; a CapLens addition,
    the papers have none): the mean squared difference between the batch's image x caption cosine
    matrix and the teacher's, over the rows that have such a caption."""

    anchor_field = ""  # the row field `loss.anchor` holds; "" for recipes without the term
    anchor_reason = ""  # why, for the error that asks for `teacher`
    teacher_terms = ("anchor",)  # the loss weights that read the teacher

    def setup(self, config, device, scratch):
        base = config.base or str(self.build_initial(config, scratch))
        clip = load_trainable(base, device, ("clip",))
        if config.architecture.get("grid_positions"):  # fixed 2-D positions added first (`add_grid_positions`)
            add_grid_positions(clip.model.vision_model, float(config.architecture["grid_positions"]))
        weights = self.weights(config)
        wanted = any(weights.get(term) for term in self.teacher_terms)
        teacher = frozen_teacher(config, device, self.anchor_reason) if wanted else None
        return SimpleNamespace(clip=clip, trainable=clip.model, pixels=PixelCache(clip.image_processor),
                               weights=weights, prefix=config.options.get("prefix", ""), config=config, teacher=teacher,
                               teacher_images={}, teacher_texts={})

    @torch.no_grad()
    def prepare(self, state, rows, device):
        """With a teacher term: the frozen teacher's embedding of every anchored row's image and
        captions, once, in sorted chunks (the same values in a resumed run), not again at every step."""
        state.teacher_images, state.teacher_texts = {}, {}
        if state.teacher is None:
            return
        fields = self.anchor_fields(state)
        anchored = [r for r in rows if all(r.get(f) for f in fields)]
        if not anchored:
            raise ValueError(f"loss.anchor holds the captions of the rows' {', '.join(f'`{f}`' for f in fields)} "
                             f"field; no row has one")
        state.teacher_images = clip_image_embeddings(state.teacher, anchored, device)
        texts = sorted({r[f] for r in anchored for f in (*fields, *self.teacher_fields(state))})
        # The teacher reads captions as its metric does (`options.teacher_prefix`, e.g. PAC-S's
        # "A photo depicts "), by default as the student does.
        prefix = state.config.options.get("teacher_prefix", state.prefix)
        for i in range(0, len(texts), 128):
            chunk = texts[i:i + 128]
            state.teacher_texts.update(zip(chunk, clip_text_features(state.teacher, [prefix + t for t in chunk],
                                                                     device).float()))

    def with_swaps(self, rows, config):
        """With `loss.swap`: each row's caption with one keyword swapped (`keyword_swaps`,
        `swapped_caption`; "" where no word can be swapped)."""
        if not self.weights(config).get("swap"):
            return rows
        swapped = keyword_swaps([r["caption"] for r in rows], [_language(r) or "en" for r in rows], config)
        return [r | {"swapped_caption": text} for r, text in zip(rows, swapped)]

    def swap_loss(self, state, rows, image, text, device) -> tuple[torch.Tensor | float, dict]:
        """`swap` times the hard-negative InfoNCE of the rows that have a swapped caption: each
        one's swap joins the image → text softmax as a wrong caption (NegCLIP-style)."""
        swapped = [i for i, r in enumerate(rows) if r.get("swapped_caption")] if state.weights.get("swap") else []
        if not swapped:
            return 0.0, {}
        hard = losses.hard_negative_nce(image[swapped], text[swapped],
                                        self.texts(state, [rows[i]["swapped_caption"] for i in swapped], device),
                                        self.scale(state), [image_key(rows[i]) for i in swapped])
        return state.weights["swap"] * hard, {"swap": hard.item()}

    def teacher_fields(self, state) -> tuple[str, ...]:
        """Row fields, besides the anchored ones, whose captions the teacher embeds once."""
        return ()

    def anchor_fields(self, state) -> tuple[str, ...]:
        """The row fields whose captions `loss.anchor` holds."""
        return (self.anchor_field,)

    def anchor_loss(self, state, rows, image, text, field: str | None = None) -> torch.Tensor:
        """Mean squared difference between the image x anchored-caption cosine matrix of `rows`
        (`image`, `text`: the student's embeddings of those rows and of their `field` captions) and
        the teacher's: the other images' captions in a batch stand in for wrong ones, so the
        student keeps how its base scores that kind of caption, for the right image and the wrong ones."""
        field = field or self.anchor_field
        teacher = losses.cosine_matrix(torch.stack([state.teacher_images[image_key(r)] for r in rows]),
                                       torch.stack([state.teacher_texts[r[field]] for r in rows]))
        return losses.similarity_anchor(image, text, teacher)

    def build_initial(self, config: TrainConfig, scratch: Path) -> Path:
        raise ValueError(f"recipe {self.name} needs `base` (a CLIP folder or PROFILE:BACKBONE)")

    def save(self, state, out):
        save_backbone(state.clip, out)

    @staticmethod
    def scale(state) -> torch.Tensor:
        return state.clip.model.logit_scale.exp().clamp(max=100.0)

    def images(self, state, rows, device, key="image"):
        keys = [str(r[key]) if key != "image" else image_key(r) for r in rows]
        return clip_image_features(state.clip, state.pixels([r[key] for r in rows], keys, device))

    def texts(self, state, texts, device):
        return clip_text_features(state.clip, [state.prefix + t for t in texts], device)

    @torch.no_grad()
    def retrieval(self, state, rows, device, caption_key: str) -> dict[str, float]:
        """Text -> image Recall@1/5 over the held-out images, one caption per image."""
        from scoring.analysis.retrieval import recall_at_k

        first = {}
        for r in rows:
            first.setdefault(image_key(r), r)
        picked = list(first.values())
        image = torch.cat([self.images(state, picked[i:i + 64], device) for i in range(0, len(picked), 64)])
        text = torch.cat([self.texts(state, [r[caption_key] for r in picked[i:i + 64]], device)
                          for i in range(0, len(picked), 64)])
        return recall_at_k(losses.cosine_matrix(text, image).cpu().numpy(), np.arange(len(picked)), ks=(1, 5))


def cell_means(patches: torch.Tensor) -> torch.Tensor:
    """(images, 9, width): the mean patch state of each cell of the world's 3 x 3 grid (row-major),
    a patch counting for the cell that holds its centre, from (images, patches, width) states of
    a square patch grid."""
    grid = int(round(patches.shape[1] ** 0.5))
    if grid * grid != patches.shape[1] or grid < 3:
        raise ValueError(f"the world's 3 x 3 cells need a square grid of at least 3 x 3 patches, "
                         f"not {patches.shape[1]} patches")
    band = ((torch.arange(grid) + 0.5) * 3 / grid).long()  # the cell row (or column) of each patch row
    cell = (band[:, None] * 3 + band[None, :]).reshape(-1)
    member = torch.nn.functional.one_hot(cell, 9).T.to(patches.dtype).to(patches.device)
    return member @ patches / member.sum(1, keepdim=True)


class WorldClipRecipe(ClipRecipe):
    """world-CLIP from scratch: tokenizer trained on world text, CLIP's symmetric InfoNCE.

    With `data.world.twins = true` each short caption's row also carries a counterfactual twin
    (`scoring.world.captions.counterfactual_twin`: the scene with one stated shape or the two
    objects' places changed, and its caption; `twin_places`: how often the places edit is drawn
    where it can be; `twin_edits`: the kinds kept), and each batch holds the twins beside their rows:
    two images that differ in one shape or relation, which a batch of random scenes almost never
    asks the vision tower to tell apart (a CapLens addition)."""

    def world_rows(self, spec):
        from scoring.world.captions import describe_long, mention_of, realise
        from scoring.world.grammar import Description
        from scoring.world.render import render_scene
        from scoring.world.sets import split_scenes
        from scoring.world.train import caption_twins, short_descriptions

        size = int(spec.get("image_size", 96))
        scenes = split_scenes(spec.get("split", "train"), int(spec.get("scenes", 8000)))
        rows = []
        for scene in scenes:
            image = render_scene(scene, size)
            shorts = short_descriptions(scene)
            # each object's own caption and its grid cell (row-major), for `loss.regions`
            regions = [(o.cell[0] * 3 + o.cell[1], realise(Description("short", (mention_of(scene, o.oid),)), "en").text)
                       for o in scene.objects] if spec.get("regions") else None
            twins = caption_twins(scene, shorts, size, spec.get("twin_places"), twin_edits(spec)) \
                if spec.get("twins") else {}
            for text in sorted(shorts):
                row = {"image": image, "image_id": scene.scene_id, "caption": text, "language": "en"}
                if regions:
                    row["regions"] = regions
                rows.append(row | twins.get(text, {}))
            if len(scene.objects) >= 3:
                rows.append({"image": image, "image_id": scene.scene_id,
                             "caption": realise(describe_long(scene), "en").text, "language": "en"}
                            | ({"regions": regions} if regions else {}))
        digest = f"world-clip:{sorted(spec.items())}"
        return rows, digest, {"source": "world generator", "world": spec, "rows": len(rows),
                              "twins": sum("twin_id" in r for r in rows)}

    def build_initial(self, config, scratch):
        from scoring.world.tokenizer import train_tokenizer, world_corpus
        from scoring.world.train import build_clip, clip_processor, model_config

        shapes = model_config(config.architecture.get("config", "world-clip"))
        tokenizer = train_tokenizer(world_corpus(int(config.architecture.get("tokenizer_scenes", 1500))), scratch,
                                    vocab_size=shapes["vocab_size"], model_max_length=shapes["text_positions"])
        torch.manual_seed(config.seed)
        build_clip(config.architecture.get("config", "world-clip"), tokenizer).save_pretrained(scratch)
        clip_processor(tokenizer, shapes["image_size"]).save_pretrained(scratch)
        return scratch

    def prepare_rows(self, rows, config):
        return self.with_swaps(super().prepare_rows(rows, config), config)

    def batch_loss(self, state, rows, rng, device):
        prefixes = [CLIP_PREFIX if rng.random() < 0.5 else "" for _ in rows]
        if state.weights.get("regions"):
            image, region_loss = self.images_and_regions(state, rows, device)
        else:
            image, region_loss = self.images(state, rows, device), None
        text = clip_text_features(state.clip, [p + r["caption"] for p, r in zip(prefixes, rows)], device)
        twins = [(p, r) for p, r in zip(prefixes, rows) if r.get("twin_id")]
        keys = [image_key(r) for r in rows] + [r["twin_id"] for _, r in twins]
        if twins:
            twin_image = self.images(state, [{"image": r["twin_image"], "image_id": r["twin_id"]} for _, r in twins],
                                     device)
            twin_text = clip_text_features(state.clip, [p + r["twin_caption"] for p, r in twins], device)
            loss = losses.info_nce(torch.cat([image, twin_image]), torch.cat([text, twin_text]), self.scale(state), keys)
        else:
            loss = losses.info_nce(image, text, self.scale(state), keys)
        # a swapped caption reads with its own caption's prefix: the prefix is not what differs
        swap, parts = self.swap_loss(state, [r | {"swapped_caption": p + r["swapped_caption"] if r.get("swapped_caption")
                                                  else ""} for p, r in zip(prefixes, rows)], image, text, device)
        if region_loss is not None:
            loss, parts = loss + state.weights["regions"] * region_loss, parts | {"regions": region_loss.item()}
        return loss + swap, parts

    def images_and_regions(self, state, rows, device) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows' image embeddings and `loss.regions`' InfoNCE between each object's grid cell and
        its own caption over the batch's distinct images, from one pass of the vision tower: a
        cell's patch states, averaged and projected as the [CLS] state is, against the text
        embedding of "a small red circle". Identical object captions are positives of each other.
        Grounded region-caption pairs, as region-level CLIP pretraining uses; a CapLens addition."""
        vision = state.clip.model.vision_model
        out = vision(pixel_values=state.pixels([r["image"] for r in rows], [image_key(r) for r in rows], device))
        image = state.clip.model.visual_projection(out.pooler_output)
        first = {}
        for i, r in enumerate(rows):
            if r.get("regions"):
                first.setdefault(image_key(r), i)
        if not first:
            raise ValueError("loss.regions needs rows with `regions` (the world spec's `regions = true`)")
        patches = out.last_hidden_state[list(first.values()), 1:]
        cells = cell_means(patches)
        picked = [(n, cell, text) for n, i in enumerate(first.values()) for cell, text in rows[i]["regions"]]
        region = state.clip.model.visual_projection(vision.post_layernorm(
            cells[[n for n, _, _ in picked], [cell for _, cell, _ in picked]]))
        captions = clip_text_features(state.clip, [text for _, _, text in picked], device)
        return image, losses.info_nce(region, captions, self.scale(state), [text for _, _, text in picked])

    def evaluate(self, state, rows, device):
        return self.retrieval(state, rows, device, "caption")


class PacsRecipe(ClipRecipe):
    """PAC-S: real pairs plus generated images V' and generated captions T' as extra positives.

    With `loss.anchor` (and `teacher`), the rows' long captions (`long_caption`, when a row has
    one) stay where the teacher scores them: fine-tuning on short pairs otherwise pulls long
    captions' scores down towards short ones, which costs the order across caption styles.
    `loss.style_gap` holds less: only each row's gap between its image's long and short caption
    (`caption`), as the teacher has it, so short captions may still reorder across images."""

    anchor_field = "long_caption"
    anchor_reason = "loss.anchor and loss.style_gap keep PAC-S's long-caption similarities where the teacher puts them"
    teacher_terms = ("anchor", "style_gap")

    def prepare_rows(self, rows, config):
        return self.with_swaps(super().prepare_rows(rows, config), config)

    def teacher_fields(self, state):
        return ("caption",) if state.weights["style_gap"] else ()

    def batch_loss(self, state, rows, rng, device):
        ids = [image_key(r) for r in rows]
        image = self.images(state, rows, device)
        short = self.texts(state, [r["caption"] for r in rows], device)
        loss, parts = losses.pacs_loss(
            image, short, self.images(state, rows, device, key="generated_image"),
            self.texts(state, [r["generated_caption"] for r in rows], device),
            self.scale(state), state.weights["lambda_v"], state.weights["lambda_t"], ids)
        swap, swap_parts = self.swap_loss(state, rows, image, short, device)
        loss, parts = loss + swap, parts | swap_parts
        anchored = [i for i, r in enumerate(rows) if r.get(self.anchor_field)]
        if state.teacher is not None and len(anchored) > 1:
            picked = [rows[i] for i in anchored]
            text = self.texts(state, [r[self.anchor_field] for r in picked], device)
            if state.weights["anchor"]:
                anchor = self.anchor_loss(state, picked, image[anchored], text)
                loss, parts = loss + state.weights["anchor"] * anchor, parts | {"anchor": anchor.item()}
            if state.weights["style_gap"]:
                gap = self.style_gap_loss(state, picked, image[anchored], text, short[anchored])
                loss, parts = loss + state.weights["style_gap"] * gap, parts | {"style_gap": gap.item()}
        return loss, parts

    def style_gap_loss(self, state, rows, image, long_text, short_text) -> torch.Tensor:
        """`losses.style_gap` of `rows` (the student's embeddings of their images, long and short
        captions) against the teacher's cached embeddings of the same."""
        def own(a, b):  # each row's image with its own caption
            return torch.nn.functional.cosine_similarity(a.float(), b.float(), dim=-1)

        teacher_image = torch.stack([state.teacher_images[image_key(r)] for r in rows]).to(image.device)
        teacher_long = torch.stack([state.teacher_texts[r[self.anchor_field]] for r in rows]).to(image.device)
        teacher_short = torch.stack([state.teacher_texts[r["caption"]] for r in rows]).to(image.device)
        return losses.style_gap(own(image, long_text), own(image, short_text),
                                own(teacher_image, teacher_long), own(teacher_image, teacher_short))

    def evaluate(self, state, rows, device):
        return self.retrieval(state, rows, device, "caption")


class SpecsRecipe(ClipRecipe):
    """SPECS: contrastive loss plus the detail hinges on (c_j, c_j + d+, c_j + d−) triplets.

    `options.contrastive_on` names the row fields whose texts the contrastive term pairs with
    the image, averaged: `["positive"]` (c_j + d+, the default, as the shipped world runs), the
    paper's `["caption"]` (the full caption), or e.g. `["positive", "short_caption"]` to keep a
    style of caption the triplets never show aligned with the image.  With `loss.anchor` (and
    `teacher`), the short captions stay where the teacher scores them: the scene's short caption
    by default, or the mean of one anchor per field of `options.anchor_on`, e.g.
    `["short_caption", "short_with_error"]` to hold the teacher's order of wrong short captions too.
    With `loss.swap`, c_j + d+ with one word of d+ swapped (`keyword_swaps`: a colour for a
    colour, a side for a side) must score below c_j + d+, by the same hinge: the wrong detail
    the paper's foreign, mostly shuffled d− never is (a CapLens addition, 0 by default)."""

    anchor_field = "short_caption"
    anchor_reason = "loss.anchor keeps SPECS's short-caption similarities where the teacher puts them"

    @staticmethod
    def fields_in_rows(rows, option: str, fields) -> list[str]:
        """`fields` (what `options.<option>` names), each checked to hold a text in every row."""
        fields = list(fields)
        missing = sorted({f for f in fields for r in rows if not r.get(f)})
        if not fields or missing:
            raise ValueError(f"options.{option} names row fields that hold the texts it reads; "
                             f"{'none given' if not fields else 'rows without ' + ', '.join(missing)}")
        return fields

    def contrastive_fields(self, state, rows) -> list[str]:
        return self.fields_in_rows(rows, "contrastive_on", state.config.options.get("contrastive_on", ["positive"]))

    def anchor_fields(self, state):
        return tuple(state.config.options.get("anchor_on", [self.anchor_field]))

    def prepare_rows(self, rows, config):
        """With `loss.swap`: each row's c_j + d+ with one word of d+ swapped (`swapped`; "" where
        none can be, or where the positive does not extend the base)."""
        rows = super().prepare_rows(rows, config)
        if not self.weights(config)["swap"]:
            return rows
        details = [r["positive"][len(r["base"]):] if r["positive"].startswith(r["base"]) else "" for r in rows]
        swapped = keyword_swaps(details, [_language(r) or "en" for r in rows], config)
        return [r | {"swapped": r["base"] + detail if detail else ""} for r, detail in zip(rows, swapped)]

    def batch_loss(self, state, rows, rng, device):
        image = self.images(state, rows, device)
        base = self.texts(state, [r["base"] for r in rows], device)
        positive = self.texts(state, [r["positive"] for r in rows], device)
        negative = self.texts(state, [r["negative"] for r in rows], device)
        ids = [image_key(r) for r in rows]
        fields = self.contrastive_fields(state, rows)
        texts = {"positive": positive}  # each field's texts encoded once, also when the anchor reads them
        anchored = self.fields_in_rows(rows, "anchor_on", self.anchor_fields(state)) if state.teacher is not None else []
        for f in fields + anchored:
            if f not in texts:
                texts[f] = self.texts(state, [r[f] for r in rows], device)
        contrastive = sum(losses.info_nce(image, texts[f], self.scale(state), ids) for f in fields) / len(fields)
        w = state.weights
        loss, parts = losses.specs_loss(contrastive, _cos(image, base), _cos(image, positive), _cos(image, negative),
                                        (w["alpha"], w["beta"], w["gamma"]))
        swapped = [i for i, r in enumerate(rows) if r.get("swapped")] if w["swap"] else []
        if swapped:
            hard = losses.specs_hinge(_cos(image[swapped], positive[swapped]),
                                      _cos(image[swapped], self.texts(state, [rows[i]["swapped"] for i in swapped], device)))
            loss, parts = loss + w["swap"] * hard, parts | {"swap": hard.item()}
        if anchored:
            anchor = sum(self.anchor_loss(state, rows, image, texts[f], f) for f in anchored) / len(anchored)
            loss, parts = loss + w["anchor"] * anchor, parts | {"anchor": anchor.item()}
        return loss, parts

    @torch.no_grad()
    def evaluate(self, state, rows, device):
        from scoring.analysis.specificity import specificity_rate

        theta = defaultdict(list)
        for i in range(0, len(rows), 64):
            chunk = rows[i:i + 64]
            image = self.images(state, chunk, device)
            for key in ("base", "positive", "negative"):
                theta[key] += _cos(image, self.texts(state, [r[key] for r in chunk], device)).tolist()
        sr_pos = specificity_rate(theta["base"], theta["positive"], "pos")
        sr_neg = specificity_rate(theta["base"], theta["negative"], "neg")
        return {"SR_pos": sr_pos, "SR_neg": sr_neg, "specificity": (sr_pos + sr_neg) / 2,
                **self.retrieval(state, rows, device, "positive")}


# -- multilingual text encoders: MCS teacher learning, PR-MCS ---------------------------------------
class TextEncoderRecipe(Recipe):
    def setup(self, config, device, scratch):
        if config.teacher is None:
            raise ValueError(f"recipe {self.name} needs `teacher` (the CLIP whose text space the encoder lives in)")
        base = config.base or str(self.build_initial(config, scratch))
        encoder = load_trainable(base, device, ("st-text",))
        clip = load_trainable(config.teacher, device, ("clip",))
        clip.model.requires_grad_(False)
        trainable = nn.ModuleDict({"transformer": encoder.model, "dense": encoder.dense})
        return SimpleNamespace(encoder=encoder, clip=clip, trainable=trainable, weights=self.weights(config),
                               config=config)

    def build_initial(self, config, scratch):
        raise ValueError(f"recipe {self.name} needs `base` (a sentence-transformers folder or PROFILE:BACKBONE)")

    def save(self, state, out):
        save_st_encoder(state.encoder, out)


class McsTeacherRecipe(TextEncoderRecipe):
    """MCS teacher learning: the student's embedding of a caption in any language regresses
    onto the CLIP text embedding of its English source (MSE)."""

    def world_rows(self, spec):
        from scoring.world.captions import realise
        from scoring.world.grammar import LANGUAGES
        from scoring.world.sets import split_scenes
        from scoring.world.train import distillation_descriptions

        langs = spec.get("languages", list(LANGUAGES))
        rows = []
        for scene in split_scenes(spec.get("split", "train"), int(spec.get("scenes", 1200))):
            for d in distillation_descriptions(scene):
                english = realise(d, "en").text
                rows += [{"image_id": scene.scene_id, "caption": realise(d, lang).text, "english": english,
                          "language": lang, "style": d.style} for lang in langs]
        return rows, f"world-mcs:{sorted((k, str(v)) for k, v in spec.items())}", {
            "source": "world generator", "world": spec, "rows": len(rows)}

    def prepare_rows(self, rows, config):
        return [r for r in super().prepare_rows(rows, config) if r.get("english")]

    def build_initial(self, config, scratch):
        from scoring.world.tokenizer import train_wordpiece, world_corpus
        from scoring.world.train import build_student, model_config
        from scoring.training.models import save_st_text

        name = config.architecture.get("config", "world-mcs")
        shapes = model_config(name)
        tokenizer = train_wordpiece(world_corpus(int(config.architecture.get("tokenizer_scenes", 1500))), scratch,
                                    vocab_size=shapes["vocab_size"], model_max_length=shapes["positions"])
        clip_config = Path(resolve_folder(config.teacher)) / "config.json"
        out_features = json.loads(clip_config.read_text(encoding="utf-8"))["projection_dim"]
        torch.manual_seed(config.seed)
        student = build_student(name, tokenizer, out_features)
        save_st_text(student.bert, tokenizer, student.dense, scratch, shapes["positions"])
        return scratch

    @torch.no_grad()
    def targets(self, state, english: list[str], device) -> torch.Tensor:
        return clip_text_features(state.clip, english, device).float()

    def batch_loss(self, state, rows, rng, device):
        student = st_text_features(state.encoder, [r["caption"] for r in rows], device).float()
        return losses.teacher_mse(student, self.targets(state, [r["english"] for r in rows], device)), {}

    @torch.no_grad()
    def evaluate(self, state, rows, device):
        mse, cos = [], []
        for i in range(0, len(rows), 128):
            chunk = rows[i:i + 128]
            student = st_text_features(state.encoder, [r["caption"] for r in chunk], device).float()
            target = self.targets(state, [r["english"] for r in chunk], device)
            mse.append(((student - target) ** 2).mean(-1))
            cos.append(_cos(student, target))
        return {"mse": float(torch.cat(mse).mean()), "cos_to_teacher": float(torch.cat(cos).mean())}


class PrMcsRecipe(TextEncoderRecipe):
    """PR-MCS: only the multilingual text encoder trains; the CLIP vision tower is frozen."""

    def training_rows(self, rows, config):
        """`options.train_operations`: train on these perturbations only (evaluation keeps all five)."""
        from scoring.perturb.ops import PRMCS_OPS

        wanted = config.options.get("train_operations")
        if wanted is None:
            return rows
        unknown = sorted(set(wanted) - set(PRMCS_OPS))
        if unknown or not wanted:
            raise ValueError(f"options.train_operations must name some of {', '.join(PRMCS_OPS)}; "
                             f"unknown: {', '.join(unknown) or 'none given'}")
        return [r for r in rows if r["operation"] in wanted]

    @staticmethod
    def anchor_fields(config) -> tuple[str, ...]:
        """`options.anchor_on`: the row fields whose captions `loss.anchor` holds, one term each,
        averaged: `["original"]` by default, or `["original", "with_error"]` (world rows carry a
        caption of the original's style with one content error) to hold how the base encoder
        places wrong captions too, which the annotators rate and the perturbation terms never show."""
        fields = config.options.get("anchor_on", ["original"])
        if not isinstance(fields, list) or not fields or not all(isinstance(f, str) and f for f in fields):
            raise ValueError('options.anchor_on names the row fields whose captions loss.anchor holds, '
                             'e.g. ["original", "with_error"]')
        return tuple(dict.fromkeys(fields))

    @torch.no_grad()
    def prepare(self, state, rows, device):
        """The frozen CLIP embedding of every image, once (`clip_image_embeddings`); the vision
        pass per batch it replaces was small (0.07 s of a 2 s CPU step)."""
        state.image_embeddings = clip_image_embeddings(state.clip, rows, device)
        state.anchors = {}
        if state.weights["anchor"]:  # the base encoder's embedding of every anchored caption, before any step
            fields = self.anchor_fields(state.config)
            missing = [f for f in fields if not any(r.get(f) for r in rows)]
            if missing:
                raise ValueError(f"options.anchor_on names {', '.join(f'`{f}`' for f in missing)}, "
                                 f"which no training row has")
            texts = sorted({r[f] for r in rows for f in fields if r.get(f)})
            for i in range(0, len(texts), 128):
                chunk = texts[i:i + 128]
                state.anchors.update(zip(chunk, st_text_features(state.encoder, chunk, device).float()))

    def frozen_images(self, state, rows, device) -> torch.Tensor:
        return torch.stack([state.image_embeddings[image_key(r)] for r in rows]).to(device)

    def batch_loss(self, state, rows, rng, device):
        image = self.frozen_images(state, rows, device)
        original = st_text_features(state.encoder, [r["original"] for r in rows], device)
        perturbed = st_text_features(state.encoder, [r["perturbed"] for r in rows], device)
        w = state.weights
        fields = self.anchor_fields(state.config) if w["anchor"] else ()
        # One share of loss.anchor per anchored field: the term is the mean of the fields' terms.
        share = self.anchor_weights(state.config, rows, w["anchor"], device) / len(fields) if fields else 0.0
        on_original = "original" in fields
        anchor = torch.stack([state.anchors[r["original"]] for r in rows]).to(device) if on_original else None
        loss, parts = losses.prmcs_loss(image, original.float(), perturbed.float(),
                                        state.clip.model.logit_scale.exp().clamp(max=100.0), w["margin"],
                                        (w["lambda1"], w["lambda2"], w["lambda3"]), [image_key(r) for r in rows],
                                        anchor, share if on_original else 0.0)
        for name in fields:
            held = [i for i, r in enumerate(rows) if r.get(name)]
            if name == "original" or not held:
                continue
            texts = [rows[i][name] for i in held]
            term, parts[f"anchor_{name}"] = losses.embedding_anchor(
                st_text_features(state.encoder, texts, device).float(),
                torch.stack([state.anchors[t] for t in texts]).to(device),
                share[held] if torch.is_tensor(share) else share)
            loss = loss + term
        return loss, parts

    @staticmethod
    def anchor_weights(config, rows, weight: float, device) -> float | torch.Tensor:
        """`loss.anchor`, or with `options.anchor_languages` ({language: factor}) one weight per
        row: the languages whose captions the perturbation terms pull further (Japanese, whose
        drop runs 10 points above the others) can be held more firmly than the rest."""
        factors = config.options.get("anchor_languages")
        if not factors or not weight:
            return weight
        if not isinstance(factors, dict) or not all(isinstance(f, (int, float)) and f >= 0 for f in factors.values()):
            raise ValueError("options.anchor_languages maps a language to a factor of loss.anchor (a number >= 0), "
                             "e.g. {ja = 2.0}")
        return torch.tensor([weight * factors.get(_language(r), 1.0) for r in rows], device=device)

    @torch.no_grad()
    def evaluate(self, state, rows, device):
        """Mean drop (%) of MCS = 2.5·max(cos, 0) from original to perturbed caption, per language
        (mean over operations, percent_change as in PR-MCS Table 7)."""
        from scoring.analysis.robustness import percent_change

        scores = defaultdict(lambda: ([], []))
        for i in range(0, len(rows), 128):
            chunk = rows[i:i + 128]
            image = self.frozen_images(state, chunk, device)
            for key, slot in (("original", 0), ("perturbed", 1)):
                values = 2.5 * _cos(image, st_text_features(state.encoder, [r[key] for r in chunk], device)).clamp(min=0)
                for r, v in zip(chunk, values.tolist()):
                    scores[(_language(r), r["operation"])][slot].append(v)
        drops = defaultdict(list)
        for (lang, op), (orig, pert) in scores.items():
            drops[lang].append(-percent_change(float(np.mean(orig)), float(np.mean(pert))))
        out = {f"drop_{lang}": float(np.mean(v)) for lang, v in sorted(drops.items())}
        out["drop_mean"] = float(np.mean(list(out.values())))
        out["mcs_original"] = float(np.mean([v for (o, _) in scores.values() for v in o]))
        return out


# -- image-text matching cross-encoders: the ITM base (UMIC-C) and UMIC -----------------------------
class ItmRecipe(Recipe):
    """The ITM base: two-way matching head, positives against other images' captions.

    With `data.world.twins = true` (a CapLens addition) the world rows also hold, for short
    captions of the same train-range scenes, counterfactual twins (`caption_twins`; `twin_places`
    as in world-CLIP, `twin_edits` the kinds kept): the caption matches its own image and not the
    twin's, the twin's caption the twin and not its own image, the hardest negatives an ITM
    pretraining can have (BLIP mines hard negatives; these differ in one shape or one relation).
    `twins = "only"` trains on the twin rows alone; `twin_languages` realises each twin pair in
    those languages (one row per language; English by default). `architecture.grid_positions` adds
    fixed 2-D positions of that strength to the vision tower first (`add_grid_positions`).

    `architecture.twin_head = true` scores the twin pairs with a new one-logit head on the [CLS]
    state instead of the pair head: binary cross-entropy over the four (image, caption) pairings of
    a twin row, each caption a match on its own image only. Why: through the pretrained pair head
    the places twins stayed at chance for 800 steps, through a new head they were learned in a few
    hundred (docs/training.md, "Relations need positions"). The head only shapes the [CLS] state
    that the models built on this one read; it is not saved."""

    def setup(self, config, device, scratch):
        base = config.base or str(self.build_initial(config, scratch))
        itm = load_trainable(base, device, ("blip-itm",))
        if config.architecture.get("grid_positions"):
            add_grid_positions(itm.model.vision_model, float(config.architecture["grid_positions"]))
        state = SimpleNamespace(itm=itm, trainable=itm.model, pixels=PixelCache(itm.image_processor),
                                weights=self.weights(config), config=config, twin_head=None)
        if config.architecture.get("twin_head"):
            state.twin_head = nn.Linear(itm.model.itm_head.in_features, 1).to(device)
            state.trainable = nn.ModuleDict({"itm": itm.model, "twin_head": state.twin_head})
        return state

    TWIN_KEYS = ("twins", "twin_places", "twin_edits", "twin_languages")

    def world_rows(self, spec):
        if not spec.get("twins"):
            return world_set(self.set_kind, {k: v for k, v in spec.items() if k not in self.TWIN_KEYS})
        from scoring.world.render import render_scene
        from scoring.world.sets import split_scenes
        from scoring.world.train import caption_twins, short_descriptions

        spec = {"scenes": 200, "split": "train", "size": 128} | spec  # world_set's defaults
        rows, digest, about = world_set(self.set_kind, {k: v for k, v in spec.items() if k not in self.TWIN_KEYS})
        edits = twin_edits(spec)
        size = int(spec["size"])
        # a twin row names its scene's image as the set's rows do, so that no caption of the scene
        # becomes another row's "other image" negative (`batch_loss` tells images apart by key)
        written = {Path(str(r["image"])).stem: r["image"] for r in rows}
        twins = []
        for scene in split_scenes(spec["split"], int(spec["scenes"]), int(spec.get("skip", 0))):
            image = {"image": written[scene.scene_id]} if scene.scene_id in written else \
                {"image": render_scene(scene, size), "image_id": scene.scene_id}
            for language in spec.get("twin_languages") or ["en"]:
                for fields in caption_twins(scene, short_descriptions(scene), size, spec.get("twin_places"),
                                            edits, language).values():
                    twins.append(image | {"positive": fields.pop("caption"), "negatives": [], "language": language,
                                          "style": "short"} | fields)
        if spec["twins"] == "only":  # the twins alone: relations are learned apart first, then kept beside the groups
            rows = []
        return rows + twins, f"{digest}|twins:{sorted((k, str(spec.get(k))) for k in self.TWIN_KEYS)}", \
            about | {"twins": len(twins), "groups": len(rows)}

    def build_initial(self, config, scratch):
        from scoring.world.tokenizer import train_wordpiece, world_corpus
        from scoring.world.train import build_itm, model_config

        name = config.architecture.get("config", "world-itm")
        shapes = model_config(name)
        tokenizer = train_wordpiece(world_corpus(int(config.architecture.get("tokenizer_scenes", 1500))), scratch,
                                    vocab_size=shapes["vocab_size"], model_max_length=shapes["text_positions"])
        torch.manual_seed(config.seed)
        model, processor = build_itm(name, tokenizer)
        model.save_pretrained(scratch)
        processor.save_pretrained(scratch)
        return scratch

    def pixels(self, state, rows, device):
        return state.pixels([r["image"] for r in rows], [image_key(r) for r in rows], device)

    def logits(self, state, pixels, texts, device) -> torch.Tensor:
        return state.itm.model.itm_head(itm_cls(state.itm, pixels, texts, device))

    def match(self, state, pixels, texts, device) -> torch.Tensor:
        """P(match), as the ItmBackbone reports it."""
        return torch.softmax(self.logits(state, pixels, texts, device).float(), dim=-1)[:, 1]

    def twin_logits(self, state, rows, device) -> torch.Tensor:
        """(rows, 2, 2) twin-head logits: [image (own, twin), caption (own, twin's)] of each twin row."""
        pixels = torch.cat([self.pixels(state, rows, device),
                            state.pixels([r["twin_image"] for r in rows], [r["twin_id"] for r in rows], device)])
        n = len(rows)
        index = torch.tensor([i for k in range(n) for i in (k, k, n + k, n + k)])  # one vision pass per image
        texts = [t for r in rows for _ in range(2) for t in (r["positive"], r["twin_caption"])]
        return state.twin_head(itm_cls(state.itm, pixels, texts, device, image_index=index)).float().view(-1, 2, 2)

    def batch_loss(self, state, rows, rng, device):
        if state.twin_head is not None:
            twins = [r for r in rows if r.get("twin_id")]
            groups = [r for r in rows if not r.get("twin_id")]
            loss, parts = torch.zeros((), device=device), {}
            if groups:
                loss, _ = self.pair_loss(state, groups, rng, device)
                parts["groups"] = loss.item()
            if twins:
                twin = losses.twin_match_bce(self.twin_logits(state, twins, device))
                loss, parts["twins"] = loss + twin, twin.item()
            return loss, parts
        return self.pair_loss(state, rows, rng, device)

    def pair_loss(self, state, rows, rng, device):
        """The pair head's loss: each row's positive against another image's caption, and each twin
        row's three mismatched pairings."""
        pixels = self.pixels(state, rows, device)
        keys = [image_key(r) for r in rows]
        # Each image's negative: the caption of the next row showing another image.
        negatives = []
        for k, key in enumerate(keys):
            other = next((rows[(k + j) % len(rows)] for j in range(1, len(rows)) if keys[(k + j) % len(rows)] != key), None)
            negatives.append(other["positive"] if other else rng.choice(rows[k]["negatives"]))
        texts = [r["positive"] for r in rows] + negatives
        labels = [1] * len(rows) + [0] * len(rows)
        images = [pixels, pixels]
        twins = [k for k, r in enumerate(rows) if r.get("twin_id")]
        if twins:  # own caption on the twin, the twin's caption on its own twin and on the row's image
            twin_pixels = state.pixels([rows[k]["twin_image"] for k in twins], [rows[k]["twin_id"] for k in twins],
                                       device)
            images += [twin_pixels, twin_pixels, pixels[twins]]
            texts += [rows[k]["positive"] for k in twins] + [rows[k]["twin_caption"] for k in twins] * 2
            labels += [0] * len(twins) + [1] * len(twins) + [0] * len(twins)
        logits = self.logits(state, torch.cat(images), texts, device)
        return losses.itm_cross_entropy(logits, torch.tensor(labels, device=device)), {}

    @torch.no_grad()
    def evaluate(self, state, rows, device):
        """Pairwise accuracy: the positive caption scores above each of its negatives."""
        from scoring.analysis.pairwise import pairwise_correct

        by_kind = defaultdict(list)
        for r in rows:
            if r.get("twin_id") and state.twin_head is not None:  # each caption above the other image
                z = self.twin_logits(state, [r], device)[0]
                by_kind[f"twin_{r['twin_edit']}"].extend(pairwise_correct([z[0, 0].item(), z[1, 1].item()],
                                                                          [z[1, 0].item(), z[0, 1].item()]))
                continue
            if r.get("twin_id"):  # each caption above the other image: own, then the twin's
                pixels = torch.cat([self.pixels(state, [r], device),
                                    state.pixels([r["twin_image"]], [r["twin_id"]], device)])
                p = self.match(state, pixels[[0, 1, 1, 0]], [r["positive"]] * 2 + [r["twin_caption"]] * 2, device)
                by_kind[f"twin_{r['twin_edit']}"].extend(pairwise_correct([p[0].item(), p[2].item()],
                                                                          [p[1].item(), p[3].item()]))
                continue
            pixels = self.pixels(state, [r], device).expand(1 + len(r["negatives"]), -1, -1, -1)
            scores = self.match(state, pixels, [r["positive"]] + list(r["negatives"]), device).tolist()
            kinds = r.get("negative_kinds") or ["negative"] * len(r["negatives"])
            for kind, correct in zip(kinds, pairwise_correct([scores[0]] * len(kinds), scores[1:])):
                by_kind[kind].append(correct)
        out = {f"pairwise_{k}": float(np.mean(v)) for k, v in sorted(by_kind.items())}
        groups = [c for k, v in by_kind.items() if not k.startswith("twin_") for c in v]
        if groups:  # a held-out set of twins alone has no groups
            out["pairwise_accuracy"] = float(np.mean(groups))
        return out

    def save(self, state, out):
        save_backbone(state.itm, out)


class UmicRecipe(ItmRecipe):
    """UMIC: S(I, X) = sigmoid(W·[CLS] + b), ONE logit, trained with the ranking loss against
    four negatives.  Saved as the ITM pair head [0; W], [0; b], whose softmax(...)[1] is exactly
    sigmoid(W·[CLS] + b), so the ITM loader scores UMIC as the paper defines it."""

    def setup(self, config, device, scratch):
        if config.architecture.get("twin_head"):
            raise ValueError("architecture.twin_head is the itm recipe's; UMIC scores every pair with its own one-logit head")
        state = super().setup(config, device, scratch)
        head = state.itm.model.itm_head
        one = nn.Linear(head.in_features, 1).to(device)
        with torch.no_grad():  # softmax(z)[1] == sigmoid(z1 - z0): start from the same scores
            one.weight.copy_(head.weight[1:2] - head.weight[0:1])
            one.bias.copy_(head.bias[1:2] - head.bias[0:1])
        state.head = one
        state.trainable = nn.ModuleDict({"itm": state.itm.model, "head": one})
        state.teacher = frozen_teacher(config, device, "loss.teacher_rank orders captions of different images as "
                                       "the teacher does") if state.weights["teacher_rank"] else None
        return state

    def check(self, config):
        """Refuse a misspelt kind in `options.margin_by_kind`, or styles without it."""
        from scoring.perturb.negatives import NEGATIVE_KINDS

        unknown = set(config.options.get("margin_by_kind") or {}) - set(NEGATIVE_KINDS)
        if unknown:
            raise ValueError(f"options.margin_by_kind names {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(NEGATIVE_KINDS)}")
        if config.options.get("margin_by_kind_styles") and not config.options.get("margin_by_kind"):
            raise ValueError("options.margin_by_kind_styles limits options.margin_by_kind, which is not set")

    def prepare(self, state, rows, device):
        """With `loss.teacher_rank`: the teacher's embedding of every image, once, before any step
        (`clip_image_embeddings`), so a resumed run uses the very values an uninterrupted one does."""
        state.teacher_images = clip_image_embeddings(state.teacher, rows, device) if state.teacher is not None else {}

    def one_logit(self, state, pixels, texts, device):
        return state.head(itm_cls(state.itm, pixels, texts, device)).float().squeeze(-1)

    def match(self, state, pixels, texts, device):
        return torch.sigmoid(self.one_logit(state, pixels, texts, device))

    @torch.no_grad()
    def teacher_scores(self, state, rows, device) -> tuple[torch.Tensor, float]:
        """The teacher CLIP's cosine of each row's image (embedded in `prepare`) and positive
        caption (with the CLIP-S prefix, `options.prefix`), and its temperature 1 / logit scale."""
        prefix = state.config.options.get("prefix", "")
        return _cos(torch.stack([state.teacher_images[image_key(r)] for r in rows]),
                    clip_text_features(state.teacher, [prefix + r["positive"] for r in rows], device).float()), \
            float(1 / state.teacher.model.logit_scale.exp())

    def batch_loss(self, state, rows, rng, device):
        k = len(rows[0]["negatives"])
        pixels = self.pixels(state, rows, device)
        # `detail` (a CapLens addition, 0 by default): a long reference ranked above its scene's
        # short one by the same margin, so that more correct detail scores higher, as raters judge.
        detailed = [i for i, r in enumerate(rows) if r.get("style") == "long" and r.get("short_caption")] \
            if state.weights["detail"] else []
        texts = [r["positive"] for r in rows] + [n for r in rows for n in r["negatives"]] + \
            [rows[i]["short_caption"] for i in detailed]
        expanded = torch.cat([pixels, pixels.repeat_interleave(k, dim=0), pixels[detailed]])
        logits = self.one_logit(state, expanded, texts, device)
        scores = torch.sigmoid(logits)
        n = len(rows)
        positive, negatives = scores[:n], scores[n:n + n * k].view(n, k)
        loss, parts = losses.umic_ranking(positive, negatives, self.margins(state, rows, device)), {}
        if state.teacher is not None:  # a CapLens addition, 0 by default: the teacher's order across images
            teacher, temperature = self.teacher_scores(state, rows, device)
            rank = losses.teacher_rank_distillation(logits[:n], teacher, temperature, [image_key(r) for r in rows])
            loss, parts["teacher_rank"] = loss + state.weights["teacher_rank"] * rank, rank.item()
        if state.weights["cross"]:  # a CapLens addition, 0 by default: one level of "right" across images
            cross = losses.umic_cross_ranking(positive, negatives, state.weights["margin"])
            loss, parts["cross"] = loss + state.weights["cross"] * cross, cross.item()
        if detailed:
            detail = losses.umic_ranking(positive[detailed], scores[n + n * k:, None], state.weights["margin"])
            loss, parts["detail"] = loss + state.weights["detail"] * detail, detail.item()
        return loss, parts

    @staticmethod
    def margins(state, rows, device) -> float | torch.Tensor:
        """The paper's one margin, or with `options.margin_by_kind` ({kind: margin}, a CapLens
        addition) one margin per negative by its kind (`negative_kinds` of the row; kinds not named
        keep `loss.margin`). Why: raters forgive a dropped or swapped word far more than a wrong
        object, while the paper's one margin holds every kind of negative equally far below.
        `options.margin_by_kind_styles` limits it to rows of those caption styles: within long
        captions the raters do order by grammar."""
        by_kind = state.config.options.get("margin_by_kind")
        if not by_kind:
            return state.weights["margin"]
        styles = state.config.options.get("margin_by_kind_styles")  # None: rows of every style
        return torch.tensor([[float(by_kind.get(kind, state.weights["margin"]))
                              if styles is None or r.get("style") in styles else float(state.weights["margin"])
                              for kind in r["negative_kinds"]] for r in rows], device=device)

    @torch.no_grad()
    def evaluate(self, state, rows, device):
        """The paper's pairwise accuracy on its four negative kinds, and apart from it
        `pairwise_detail`: a long reference above its scene's short one."""
        out = super().evaluate(state, rows, device)
        detailed = [r for r in rows if r.get("style") == "long" and r.get("short_caption")]
        if detailed:
            from scoring.analysis.pairwise import pairwise_correct

            pairs = []
            for r in detailed:
                pixels = self.pixels(state, [r], device).expand(2, -1, -1, -1)
                pairs.append(self.match(state, pixels, [r["positive"], r["short_caption"]], device).tolist())
            out["pairwise_detail"] = float(np.mean(pairwise_correct(*zip(*pairs))))
        return out

    def prepare_rows(self, rows, config):
        rows = super().prepare_rows(rows, config)
        k = losses_negatives(rows)  # once: counted for every row, preparing a set was quadratic in its size
        rows = [r for r in rows if len(r.get("negatives") or []) == k]
        if config.options.get("margin_by_kind") and any("negative_kinds" not in r for r in rows):
            raise ValueError("options.margin_by_kind needs rows that name their negatives' kinds "
                             "(`negative_kinds`, as the world's UMIC sets do)")
        return rows

    def save(self, state, out):
        write_one_logit_head(state.itm.model.itm_head, state.head)
        save_backbone(state.itm, out)


def losses_negatives(rows: list[dict]) -> int:
    """The number of negatives per group (the most common one; UMIC uses four)."""
    counts = defaultdict(int)
    for r in rows:
        counts[len(r.get("negatives") or [])] += 1
    return max(counts, key=counts.get) if counts else 0


@torch.no_grad()
def write_one_logit_head(pair_head: nn.Linear, one_logit: nn.Linear) -> None:
    """Load a one-output head (W, b) into a two-way ITM head as [0; W], [0; b]: the ITM
    loader's softmax(logits)[1] then equals sigmoid(W·x + b).  A released one-output UMIC
    head loads the same way."""
    pair_head.weight.zero_()
    pair_head.bias.zero_()
    pair_head.weight[1].copy_(one_logit.weight[0])
    pair_head.bias[1].copy_(one_logit.bias[0])


# -- CapLens-R --------------------------------------------------------------------------------------
ASPECTS = ("overall", "fluency", "relevance", "descriptiveness")  # the rating scales, CapEval1k's


def _mean_or_nan(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


FEATURE_LAYOUT = "caplens-r-features-1"  # bump when `features` or `embed_items` changes what a row's vector holds


def feature_cache_dir(config: TrainConfig) -> Path | None:
    """Where CapLens-R keeps prepared frozen features: `options.feature_cache` (a folder, or false
    for none), by default `<data dir>/cache/caplens-r-features`."""
    from scoring.paths import data_dir

    chosen = config.options.get("feature_cache", True)
    if chosen is False:
        return None
    folder = data_dir() / "cache" / "caplens-r-features" if chosen is True else Path(str(chosen)).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _image_identity(image) -> str | None:
    """The image as the cache key sees it: its path with the file's size and change time (a file
    replaced in place gets new features); None for an in-memory image, which is not cached."""
    if not isinstance(image, (str, Path)):
        return None
    path = Path(image)
    try:
        stat = path.stat()
    except OSError:
        return None
    return f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


def feature_chunk_digest(towers: str, chunk: list[dict]) -> str | None:
    """The cache name of a chunk's features, or None when one of its images is not a file."""
    digest = hashlib.sha256(f"{FEATURE_LAYOUT}|{towers}".encode())
    for r in chunk:
        identity = _image_identity(r["image"])
        if identity is None:
            return None
        digest.update(json.dumps([image_key(r), identity, r["candidate"], list(r["references"])],
                                 ensure_ascii=False).encode())
    return digest.hexdigest()[:32]


def _save_array(array: np.ndarray):
    def write(path: Path) -> None:
        with path.open("wb") as handle:  # a handle: np.save given a name would append ".npy"
            np.save(handle, array)
    return write


class CaplensRRecipe(Recipe):
    """CapLens-R: the mean human rating of a caption, learned from ratings.

    Two modes (`architecture.mode`, written into the result):
    * "frozen" (as Polos): a regression head on frozen text/vision embeddings; for users whose
      backbones already see what the ratings reward;
    * "cross": an image-text cross-encoder (a BLIP ITM checkpoint as `base`) fine-tuned end to
      end, reading image patches and caption tokens (with their order) together, trained on
      every rated aspect (overall, fluency, relevance, descriptiveness: the aspects are extra
      targets, not inputs) with squared error plus a ranking loss among the captions of one
      image.  Saved as an ITM folder whose pair head gives the predicted overall rating.
    """

    MODES = ("frozen", "cross")

    def result_kind(self, config):
        return "blip-itm" if self.mode(config) == "cross" else self.backbone_kind

    def mode(self, config: TrainConfig) -> str:
        mode = config.architecture.get("mode", "frozen")
        if mode not in self.MODES:
            raise ValueError(f"caplens-r architecture.mode must be one of {', '.join(self.MODES)}, not {mode!r}")
        return mode

    def weights(self, config):
        if self.mode(config) == "frozen":
            return super().weights(config)
        defaults = {"aspects": 0.5, "ranking": 0.5}
        unknown = set(config.loss) - set(defaults)
        if unknown:
            raise ValueError(f"caplens-r (cross) has no loss weight(s) {', '.join(sorted(unknown))}; known: aspects, ranking")
        return defaults | config.loss

    def prepare_rows(self, rows, config):
        """One row per rated caption: its mean rating (and mean of each rated aspect),
        references and rating count; in cross mode grouped further into one row per image."""
        rows = super().prepare_rows(rows, config)
        grouped: dict[Any, dict] = {}
        for r in rows:
            key = r.get("caption_id") or (str(r["image"]), r.get("candidate") or r.get("text"))
            entry = grouped.setdefault(key, {
                "image": r["image"], "image_id": r.get("image_id"), "candidate": r.get("candidate") or r["text"],
                "references": list(r.get("references") or []), "language": _language(r), "style": r.get("style"),
                "ratings": [],
                "aspects": {a: [] for a in ASPECTS[1:]}})
            if "human_score" in r:  # an exported set: one row per caption, means already taken
                entry["ratings"] += [float(r["human_score"])] * int(r.get("n_ratings") or 1)
                for aspect in ASPECTS[1:]:
                    if r.get(aspect) is not None and r.get(aspect) == r.get(aspect):
                        entry["aspects"][aspect].append(float(r[aspect]))
            else:  # one row per rating
                entry["ratings"].append(float(r["overall"]))
                for aspect in ASPECTS[1:]:
                    if r.get(aspect) is not None:
                        entry["aspects"][aspect].append(float(r[aspect]))
        out = []
        for entry in grouped.values():
            entry["target"] = float(np.mean(entry["ratings"]))
            entry["n_ratings"] = len(entry.pop("ratings"))
            aspects = entry.pop("aspects")
            entry["targets"] = [entry["target"]] + [_mean_or_nan(aspects[a]) for a in ASPECTS[1:]]
            out.append(entry)
        if self.mode(config) == "frozen":
            return out
        images: dict[str, dict] = {}
        for entry in out:
            group = images.setdefault(image_key(entry), {"image": entry["image"], "image_id": entry["image_id"],
                                                         "captions": []})
            group["captions"].append(entry)
        return list(images.values())

    RANK_FIELDS = ("language", "style")

    def rank_within(self, config: TrainConfig) -> tuple[str, ...]:
        """Caption fields that split an image's captions into ranking groups (`options.rank_within`).
        Empty: all captions of an image form one group.  With ["language", "style"] each batch row
        draws its captions from one language and one caption style of the image, so the ranking
        loss sees the pairs that the all-caption figure hides (two long captions of one image),
        not mostly short-against-long pairs that caption length already orders."""
        fields = tuple(config.options.get("rank_within", ()))
        unknown = set(fields) - set(self.RANK_FIELDS)
        if unknown:
            raise ValueError(f"caplens-r options.rank_within names {', '.join(sorted(unknown))}; known: "
                             f"{', '.join(self.RANK_FIELDS)}")
        return fields

    @staticmethod
    def rank_group(captions: list[dict], fields: tuple[str, ...], rng) -> list[dict]:
        """The captions of one randomly drawn group (same value of every field), each group equally
        likely; all captions when `fields` is empty.  A caption without the field is its own value."""
        if not fields:
            return captions
        groups: dict[tuple, list[dict]] = {}
        for c in captions:
            groups.setdefault(tuple(c.get(f) for f in fields), []).append(c)
        return groups[rng.choice(sorted(groups, key=repr))]

    @staticmethod
    def _captions(rows: list[dict]) -> list[dict]:
        return [c for r in rows for c in r["captions"]] if rows and "captions" in rows[0] else rows

    budget_unit = "ratings"  # the unit a study spends

    def budget(self, rows):
        return sum(c["n_ratings"] for c in self._captions(rows))

    def warnings(self, train_rows, config):
        captions = self._captions(train_rows)
        ratings = sum(r["n_ratings"] for r in captions)
        least = int(config.options.get("min_ratings", 1000))
        if ratings < least:
            return [f"trained on only {ratings} ratings of {len({image_key(r) for r in captions})} images "
                    f"(fewer than {least}): its agreement with humans is not reliable"]
        return []

    def setup(self, config, device, scratch):
        if self.mode(config) == "cross":
            if config.base is None:
                raise ValueError("caplens-r in cross mode needs `base`: an image-text matching (BLIP ITM) checkpoint")
            if config.options.get("fluency_threshold") is not None:
                raise ValueError("options.fluency_threshold adds features to the frozen mode's head; the cross mode "
                                 "reads word order itself and has no such input")
            itm = load_trainable(config.base, device, ("blip-itm",))
            torch.manual_seed(config.seed)
            head = nn.Linear(itm.model.itm_head.in_features, len(ASPECTS)).to(device)
            with torch.no_grad():  # overall starts as the base's P(match) (or, continuing a run, its rating)
                pair = itm.model.itm_head
                head.weight[0].copy_(pair.weight[1] - pair.weight[0])
                head.bias[0].copy_(pair.bias[1] - pair.bias[0])
            return SimpleNamespace(mode="cross", itm=itm, head=head, pixels=PixelCache(itm.image_processor),
                                   trainable=nn.ModuleDict({"itm": itm.model, "head": head}),
                                   weights=self.weights(config), config=config,
                                   per_image=int(config.options.get("captions_per_image", 8)),
                                   rank_within=self.rank_within(config))
        from scoring.metrics.caplens_r import RegressionHead, feature_size

        if config.base is None or config.teacher is None:
            raise ValueError("recipe caplens-r needs `base` (the text encoder) and `teacher` (the CLIP vision tower)")
        text = load_trainable(config.base, device, ("st-text", "clip"))
        vision = load_trainable(config.teacher, device, ("clip",))
        cross_ref = config.architecture.get("cross")  # a cross-encoder whose [CLS] states the head reads too
        cross = load_trainable(cross_ref, device, ("blip-itm",)) if cross_ref else None
        cross_dim = cross.model.itm_head.in_features if cross is not None else 0
        threshold = config.options.get("fluency_threshold")
        torch.manual_seed(config.seed)
        apart = bool(config.architecture.get("fluency_apart", False))
        if apart and threshold is None:
            raise ValueError("architecture.fluency_apart gives the fluency features their own branch: "
                             "set options.fluency_threshold so there are fluency features")
        from scoring.metrics.fluency import FEATURES

        head = RegressionHead(feature_size(vision.embedding_dim, cross_dim, fluency=threshold is not None),
                              int(config.architecture.get("hidden", 128)), FEATURES if apart else 0).to(device)
        return SimpleNamespace(mode="frozen", text=text, vision=vision, cross=cross, cross_ref=cross_ref, head=head,
                               trainable=head, cache={}, config=config, fluency=None, fluency_threshold=threshold,
                               fluency_folds=int(config.options.get("fluency_folds", 5)), fluency_train={})

    @staticmethod
    def fluent_texts(rows: list[dict], threshold: float) -> dict[str, list[str]]:
        """Per language, what the raters' data says is fluent text: every distinct reference and
        every caption whose mean fluency rating is at least `threshold`."""
        texts: dict[str, dict[str, None]] = {}
        for r in rows:
            chosen = texts.setdefault(r.get("language") or "", {})
            chosen.update(dict.fromkeys(r["references"]))
            fluency = r["targets"][ASPECTS.index("fluency")]
            if fluency == fluency and fluency >= threshold:  # nan: the caption's fluency was not rated
                chosen[r["candidate"]] = None
        return {lang: list(t) for lang, t in texts.items()}

    def fit_on(self, state, train_rows: list[dict]) -> None:
        """Frozen mode with `options.fluency_threshold`: the fluency model of the training rows.
        Each training caption's features come from a model fitted without its image's fold
        (`options.fluency_folds`), so the head learns from features distributed as those of
        captions it has never seen; held-out rows and scoring use the model of all rows."""
        if state.mode != "frozen" or state.fluency_threshold is None:
            return
        from scoring.metrics.fluency import FEATURES, FluencyModel

        threshold = float(state.fluency_threshold)
        full = self.fluent_texts(train_rows, threshold)
        fold = [zlib.crc32(image_key(r).encode("utf-8")) % state.fluency_folds for r in train_rows]
        raw = np.zeros((len(train_rows), FEATURES))
        for k in range(state.fluency_folds):
            inside = [i for i, f in enumerate(fold) if f == k]
            if not inside:
                continue
            model = FluencyModel.fit(self.fluent_texts([r for r, f in zip(train_rows, fold) if f != k], threshold))
            raw[inside] = model.raw([train_rows[i]["candidate"] for i in inside],
                                    [train_rows[i].get("language") for i in inside])
        state.fluency = FluencyModel.fit(full, about={
            "threshold": threshold, "folds": state.fluency_folds,
            "texts": {lang: len(texts) for lang, texts in full.items()}})
        state.fluency.standardise_on(raw)
        features = state.fluency.standardised(raw)
        state.fluency_train = {self.key(r): f for r, f in zip(train_rows, features)}

    FEATURE_CHUNK = 512

    @torch.no_grad()
    def prepare(self, state, rows, device):
        """Frozen mode: features of every row, once, in a fixed order (the backbones are frozen).
        Each chunk of rows is also kept on disk (`feature_cache_dir`), keyed by the backbones'
        fingerprints and the chunk's images and texts, so a second head on the same set (another
        learning rate, size or loss) and a preparation cut short skip what was computed: on 2
        cores the features of 200,000 rated captions take 40 minutes, the head a minute."""
        if state.mode == "cross":
            return
        from scoring.metrics.caplens_r import embed_items

        folder = feature_cache_dir(state.config)
        towers = "|".join(b.fingerprint if b is not None else "-" for b in (state.text, state.vision, state.cross))
        for i in range(0, len(rows), self.FEATURE_CHUNK):
            chunk = rows[i:i + self.FEATURE_CHUNK]
            name = feature_chunk_digest(towers, chunk) if folder else None
            path = folder / f"{name}.npy" if name else None
            if path is not None and path.exists():
                x = np.load(path)
            else:
                x = embed_items(state.text, state.vision, [r["image"] for r in chunk], [image_key(r) for r in chunk],
                                [r["candidate"] for r in chunk], [r["references"] for r in chunk], state.cross)
                if path is not None:
                    write_atomically(path, _save_array(x))
            if state.fluency is not None:
                x = np.concatenate([x, self.fluency_features(state, chunk)], axis=1)
            for r, row in zip(chunk, x):
                state.cache[self.key(r)] = torch.from_numpy(row)

    def fluency_features(self, state, rows: list[dict]) -> np.ndarray:
        """Training rows: their cross-fitted features; other rows: the full model's, computed as the
        metric computes them (`FluencyModel.features`)."""
        from scoring.metrics.fluency import FEATURES

        out = np.zeros((len(rows), FEATURES), dtype=np.float32)
        unseen = []
        for k, r in enumerate(rows):
            known = state.fluency_train.get(self.key(r))
            if known is None:
                unseen.append(k)
            else:
                out[k] = known
        if unseen:
            out[unseen] = state.fluency.features([rows[k]["candidate"] for k in unseen],
                                                 [rows[k].get("language") for k in unseen])
        return out

    @staticmethod
    def key(row: dict) -> tuple:
        return image_key(row), row["candidate"], tuple(row["references"])

    def features(self, state, rows, device) -> torch.Tensor:
        return torch.stack([state.cache[self.key(r)] for r in rows]).to(device)

    def aspect_scores(self, state, captions: list[dict], device) -> torch.Tensor:
        """(N, 4) predicted ratings, overall first, of captions through the cross-encoder."""
        keys = [image_key(c) for c in captions]
        images = {key: c["image"] for key, c in zip(keys, captions)}
        position = {key: k for k, key in enumerate(images)}
        pixels = state.pixels(list(images.values()), list(images), device)
        index = torch.tensor([position[k] for k in keys])
        cls = itm_cls(state.itm, pixels, [c["candidate"] for c in captions], device, image_index=index)
        return torch.sigmoid(state.head(cls).float())

    def predict(self, state, captions: list[dict], device) -> np.ndarray:
        if state.mode == "cross":
            return torch.cat([self.aspect_scores(state, captions[i:i + 128], device)[:, 0]
                              for i in range(0, len(captions), 128)]).cpu().numpy()
        return torch.cat([state.head(self.features(state, captions[i:i + 512], device)).float()
                          for i in range(0, len(captions), 512)]).cpu().numpy()

    def batch_loss(self, state, rows, rng, device):
        if state.mode == "frozen":
            target = torch.tensor([r["target"] for r in rows], device=device)
            return losses.regression_mse(state.head(self.features(state, rows, device)).float(), target), {}
        captions, groups = [], []
        for g, row in enumerate(rows):  # a few captions of each image, so the ranking loss has pairs
            pool = self.rank_group(row["captions"], state.rank_within, rng)
            chosen = rng.sample(pool, min(state.per_image, len(pool)))
            captions += chosen
            groups += [g] * len(chosen)
        predicted = self.aspect_scores(state, captions, device)
        target = torch.tensor([c["targets"] for c in captions], dtype=torch.float32, device=device)
        w = state.weights
        aspect_weights = torch.tensor([1.0] + [w["aspects"]] * (len(ASPECTS) - 1), device=device)
        regression = losses.masked_regression(predicted, target, aspect_weights)
        ranking = losses.pairwise_ranking(predicted[:, 0], target[:, 0], torch.tensor(groups, device=device))
        return regression + w["ranking"] * ranking, {"regression": regression.item(), "ranking": ranking.item()}

    @torch.no_grad()
    def evaluate(self, state, rows, device):
        """tau_c against the mean rating on held-out images: over all captions, per language and,
        where rows name their caption style (short/long), within each style, where the
        all-caption figure hides whether a metric orders captions of one style at all."""
        from scoring.analysis.correlation import kendall_tau

        captions = self._captions(rows)
        predicted = self.predict(state, captions, device)
        human = np.array([c["target"] for c in captions])
        out = {"tau_c": kendall_tau(predicted, human, variant="c"), "mse": float(np.mean((predicted - human) ** 2))}
        languages = np.array([c.get("language") or "" for c in captions])
        for lang in sorted(set(languages) - {""}):
            mask = languages == lang
            if mask.sum() >= 2:
                out[f"tau_c_{lang}"] = kendall_tau(predicted[mask], human[mask], variant="c")
        styles = np.array([c.get("style") or "" for c in captions])
        for style in sorted(set(styles) - {""}):
            mask = styles == style
            if mask.sum() >= 2:
                out[f"tau_c_{style}"] = kendall_tau(predicted[mask], human[mask], variant="c")
        return out

    def save(self, state, out):
        config = state.config
        about = {"mode": state.mode, "warnings": state.warnings}
        if state.mode == "cross":
            overall = nn.Linear(state.head.in_features, 1)
            with torch.no_grad():
                overall.weight.copy_(state.head.weight[:1])
                overall.bias.copy_(state.head.bias[:1])
            write_one_logit_head(state.itm.model.itm_head, overall)
            save_backbone(state.itm, out)
            (out / "caplens_r.json").write_text(json.dumps(
                about | {"base": config.base, "aspects": list(ASPECTS),
                         "reads": "the pair head's softmax(...)[1] is the predicted overall rating"},
                indent=1, ensure_ascii=False), encoding="utf-8")
            return
        from scoring.metrics.caplens_r import save_head

        from scoring.metrics.fluency import FILE_NAME

        cross = {"cross_backbone": _backbone_name(state.cross_ref), "cross_model": state.cross_ref} if state.cross_ref else {}
        fluency = {"fluency": state.fluency.about | {"file": FILE_NAME}} if state.fluency is not None else {}
        save_head(state.head, about | {
            "text_backbone": _backbone_name(config.base), "vision_backbone": _backbone_name(config.teacher),
            "text_model": config.base, "vision_model": config.teacher} | cross | fluency, out)
        if state.fluency is not None:
            state.fluency.save(out)


def _backbone_name(ref: str) -> str | None:
    """The registry backbone a `PROFILE:BACKBONE` reference names (None for a folder)."""
    return ref.partition(":")[2] if _is_registry_ref(ref) else None


def resolve_folder(ref: str) -> Path:
    from scoring.training.models import resolve_model

    return resolve_model(ref)[0]


RECIPES: dict[str, Recipe] = {r.name: r for r in (
    WorldClipRecipe("world-clip", "CLIP-S", "clip", "pairs",
                    "world-CLIP from scratch: CLIP's symmetric InfoNCE on rendered scenes and English captions",
                    {"swap": 0.0, "regions": 0.0}),
    McsTeacherRecipe("mcs-teacher", "MCS", "st-text", "teacher",
                     "MCS teacher learning: MSE to the CLIP text embedding of the English source (PR-MCS §3.1)"),
    PrMcsRecipe("pr-mcs", "PR-MCS", "st-text", "prmcs",
                "PR-MCS: L_CLIP + λ1·L1 + λ2·L2 + λ3·L3 on perturbation triplets; only the text encoder trains",
                {"margin": losses.PRMCS_MARGIN, "lambda1": losses.PRMCS_LAMBDAS[0],
                 "lambda2": losses.PRMCS_LAMBDAS[1], "lambda3": losses.PRMCS_LAMBDAS[2], "anchor": 0.0}),
    PacsRecipe("pac-s", "PAC-S", "clip", "pacs",
               "PAC-S: symmetric InfoNCE + λv·L(V', T) + λt·L(V, T') with generated images and captions",
               {"lambda_v": 0.05, "lambda_t": 0.05, "anchor": 0.0, "style_gap": 0.0, "swap": 0.0}),
    SpecsRecipe("specs", "SPECS", "clip", "specs",
                "SPECS: α·L_contrastive + β·L_pos + γ·L_neg, detached batch margin ε",
                {"alpha": losses.SPECS_WEIGHTS[0], "beta": losses.SPECS_WEIGHTS[1], "gamma": losses.SPECS_WEIGHTS[2],
                 "anchor": 0.0, "swap": 0.0}),
    ItmRecipe("itm", "UMIC-C", "blip-itm", "umic",
              "image-text matching base (UMIC-C): two-way ITM head, positives against other images' captions"),
    UmicRecipe("umic", "UMIC", "blip-itm", "umic",
               "UMIC: ranking loss max(0, 0.2 − (S(I,X) − S(I,X̂))), one positive and four negatives, one-logit head",
               {"margin": losses.UMIC_MARGIN, "detail": 0.0, "cross": 0.0, "teacher_rank": 0.0}),
    CaplensRRecipe("caplens-r", "CapLens-R", "caplens-r", "ratings",
                   "CapLens-R: the mean human rating learned from a collection's ratings (frozen-feature head, or an end-to-end cross-encoder)"),
)}
