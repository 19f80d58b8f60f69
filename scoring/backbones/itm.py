"""Image-text matching cross-encoder (transformers BLIP ITM) for UMIC-C and UMIC.

UMIC scores with UNITER's ITM head, which needs detector region features; uploaded images
have none, so CapLens uses BLIP's ITM cross-encoder (``BlipForImageTextRetrieval``).
Two heads read its [CLS] state:

* the ITM pair head (UMIC-C): P(match) = softmax(itm_logits)[1];
* UMIC's one-logit head: S(I, X) = sigmoid(W·i_CLS + b), W of shape 1×hidden.  It is read
  from the backbone's ``head_file`` (e.g. the released UMIC checkpoint, whose ``rank_output``
  is such a head) or ``umic_head.safetensors`` in the folder; a folder with neither uses
  W = W_match − W_no-match, b = b_match − b_no-match of the pair head.  The UMIC recipe stores
  its head that way, as the pair head [0; W], [0; b], so its one logit is exactly W·i_CLS + b.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from scoring import stages
from scoring.backbones import Placement, fingerprint, inference
from scoring.backbones.clip import vision_bytes_per_item
from scoring.backbones.graphs import GraphedForward, pad_rows, padded_batch
from scoring.backbones.text import TextModelBackbone, attention_bias, pad_token_id, padded_for_graph, tokenize_truncating
from scoring.batching import map_halving, memory_batch_size
from scoring.cache import LRUCache
from scoring.conversion import load_state_dict
from scoring.images import ImageInput, image_key
from scoring.registry import BackboneSpec
from scoring.transfer import to_device, to_host

ONE_LOGIT_HEAD_FILE = "umic_head.safetensors"
HEADS = ("pair", "one-logit")


def read_one_logit_head(path: Path, hidden: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(weight 1×hidden, bias 1) of a one-output head in a safetensors or PyTorch file.

    The file may hold only the head (``weight``/``bias``) or a whole model: the head is the
    one weight of shape 1×hidden with a bias of shape 1 beside it (``rank_output`` wins when
    a UNITER checkpoint has several).
    """
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        tensors = load_file(str(path))
    else:
        tensors = load_state_dict(path)
    found = [
        key.removesuffix("weight") for key, value in tensors.items()
        if key.endswith("weight") and tuple(value.shape) == (1, hidden)
        and tuple(getattr(tensors.get(key.removesuffix("weight") + "bias"), "shape", ())) == (1,)
    ]
    if len(found) > 1:
        found = [prefix for prefix in found if "rank_output" in prefix] or found
    if len(found) != 1:
        what = "no" if not found else f"{len(found)} candidate"
        raise ValueError(f"{path.name}: {what} one-output head (a 1×{hidden} weight with a bias of 1) found")
    return tensors[found[0] + "weight"].float(), tensors[found[0] + "bias"].float()


class ItmBackbone(TextModelBackbone):
    """P(match) for (image, text) pairs; vision states and pair scores (both heads) are cached."""

    def __init__(self, spec, model, tokenizer, image_processor, placement: Placement, print_: str,
                 folder: Path | None = None):
        super().__init__(spec, model, tokenizer, placement, print_)
        self.use_image_processor(image_processor)
        self.vision_cache = LRUCache(64)  # full patch states are large (~1.7 MB each for ViT-B): keep few
        self.pair_cache = LRUCache(65536)
        per_pair = vision_bytes_per_item(model.config.vision_config, placement.dtype) * 2
        self.batch_size = memory_batch_size(placement.device, per_pair, cap=256) if placement.device.type == "cuda" else 32
        self.one_logit_head, self.one_logit_source = self._one_logit_head(folder)
        self.image_graph = GraphedForward(self._image_forward, placement.device, f"{spec.name} image tower")
        self.pair_graph = GraphedForward(self._pair_forward, placement.device, f"{spec.name} cross-encoder")

    def _one_logit_head(self, folder: Path | None) -> tuple[torch.nn.Linear, str]:
        """UMIC's head: from ``head_file``, else the folder's head file, else from the pair head."""
        hidden = self.model.itm_head.in_features
        configured = self.spec.extra.get("head_file")
        source = Path(configured) if configured else (folder / ONE_LOGIT_HEAD_FILE if folder else None)
        if configured and not source.is_file():
            raise FileNotFoundError(f"head_file not found: {source}")
        if source is not None and source.is_file():
            weight, bias = read_one_logit_head(source, hidden)
            origin = str(source)
        else:
            pair = self.model.itm_head
            weight = (pair.weight[1] - pair.weight[0]).detach().unsqueeze(0)
            bias = (pair.bias[1] - pair.bias[0]).detach().unsqueeze(0)
            origin = "the ITM pair head (logit difference)"
        head = torch.nn.Linear(hidden, 1)
        with torch.no_grad():
            head.weight.copy_(weight)
            head.bias.copy_(bias)
        return head.to(device=self.placement.device, dtype=self.placement.dtype).eval(), origin

    @classmethod
    def from_folder(cls, spec: BackboneSpec, local: Path, placement: Placement, resolve: Callable[[str], Path]):
        from transformers import AutoImageProcessor, AutoTokenizer, BlipForImageTextRetrieval

        model = BlipForImageTextRetrieval.from_pretrained(local)
        tokenizer = AutoTokenizer.from_pretrained(local)
        image_processor = AutoImageProcessor.from_pretrained(local, backend="pil")
        return cls(spec, model, tokenizer, image_processor, placement, fingerprint(spec, local), local)

    def _vision_states(self, keys: list[str], images: list[ImageInput]) -> torch.Tensor:
        states = {k: self.vision_cache.get((self.fingerprint, k)) for k in keys}
        todo = {k: im for k, im in zip(keys, images) if states[k] is None}
        if todo:
            pixels = self.pipeline.pixels(self, list(todo), list(todo.values()))
            with stages.stage("vision"), inference():
                pixels = pixels.to(device=self.placement.device, dtype=self.placement.dtype)
                hidden = self.image_graph(padded_batch(self.placement.device, pixels))  # blank images pad
            for key, row in zip(todo, hidden):
                self.vision_cache.put((self.fingerprint, key), row)
                states[key] = row
        return torch.stack([states[key] for key in keys])

    def _image_forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.model.vision_model(pixel_values=pixels).last_hidden_state

    def _pair_forward(self, ids: torch.Tensor, mask: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
        """[CLS] of the text encoder cross-attending to every image state (no image mask: all
        of them count), with the text mask handed over as the additive bias."""
        encoded = self.model.text_encoder(
            input_ids=ids, attention_mask=attention_bias(mask, states.dtype), encoder_hidden_states=states,
        ).last_hidden_state
        return encoded[:, 0, :]

    def _cls_chunk(self, pairs: list[tuple[str, ImageInput, str]]) -> tuple[torch.Tensor, list[bool]]:
        """[CLS] states of the text encoder cross-attending to each pair's image."""
        states = self._vision_states([key for key, _, _ in pairs], [image for _, image, _ in pairs])
        ids, mask, flags = tokenize_truncating(self.tokenizer, [text for _, _, text in pairs], self.max_tokens)
        with stages.stage("text"), inference():
            device = self.placement.device
            ids, mask = padded_for_graph(device, to_device(ids, device), to_device(mask, device), pad_token_id(self.tokenizer),
                                         self.max_tokens)
            states = pad_rows(states, ids.shape[0])
            return self.pair_graph(ids, mask, states)[: len(pairs)], flags

    def _match_chunk(self, pairs: list[tuple[str, ImageInput, str]]) -> tuple[np.ndarray, list[bool]]:
        """(pairs, 2) P(match) from the pair head and the one-logit head: one cross-encoder pass
        serves both UMIC-C and UMIC."""
        cls_states, flags = self._cls_chunk(pairs)
        with inference():
            both = torch.stack([self._probability(cls_states, head) for head in HEADS], dim=1)
            return to_host(both), flags

    def cls_states(self, images: Sequence[ImageInput], texts: Sequence[str],
                   keys: Sequence[str] | None = None) -> np.ndarray:
        """(N, hidden) float32 [CLS] states of the pairs: what the heads read, as features for a
        head trained elsewhere (CapLens-R reading a rating-trained cross-encoder)."""
        keys = list(keys) if keys is not None else [image_key(im) for im in images]
        pairs = list(zip(keys, images, texts))
        outputs, self.batch_size = map_halving(self._cls_chunk, pairs, self.batch_size)
        hidden = self.model.itm_head.in_features
        if not outputs:
            return np.zeros((0, hidden), dtype=np.float32)
        return to_host(torch.cat([states for states, _ in outputs]).float())

    def _probability(self, cls_states: torch.Tensor, head: str) -> torch.Tensor:
        if head == "pair":
            return torch.softmax(self.model.itm_head(cls_states).float(), dim=-1)[:, 1]
        return torch.sigmoid(self.one_logit_head(cls_states).float()[:, 0])

    def match_probability(
        self, images: Sequence[ImageInput], texts: Sequence[str], keys: Sequence[str] | None = None, head: str = "pair"
    ) -> tuple[np.ndarray, np.ndarray]:
        """P(match) per (image, text) pair from ``head`` ("pair" or "one-logit") and whether
        the text was truncated."""
        if head not in HEADS:
            raise ValueError(f"unknown ITM head {head!r}; expected one of {HEADS}")
        keys = list(keys) if keys is not None else [image_key(im) for im in images]
        pair_keys = [
            hashlib.sha1(f"{self.fingerprint}|{self.max_tokens}|{k}|{t}".encode()).hexdigest()
            for k, t in zip(keys, texts)
        ]
        results: dict[str, tuple[np.ndarray, bool]] = {}
        todo = []
        for i, pk in enumerate(pair_keys):
            if pk in results:
                continue
            cached = self.pair_cache.get(pk)
            if cached is not None:
                results[pk] = cached
            else:
                results[pk] = None  # placeholder keeps duplicates from being encoded twice
                todo.append(i)
        pairs = [(keys[i], images[i], texts[i]) for i in todo]
        outputs, self.batch_size = map_halving(self._match_chunk, pairs, self.batch_size)
        probs = [row for batch_probs, _ in outputs for row in batch_probs]
        truncated = [flag for _, batch_flags in outputs for flag in batch_flags]
        for i, row, flag in zip(todo, probs, truncated):
            results[pair_keys[i]] = (row, flag)
            self.pair_cache.put(pair_keys[i], (row, flag))
        column = HEADS.index(head)
        values = np.array([float(results[pk][0][column]) for pk in pair_keys], dtype=np.float64)
        flags = np.array([results[pk][1] for pk in pair_keys], dtype=bool)
        return values, flags
