"""Producing the score tables the measures consume, with the real scorer and perturbations.

The measures in this package are pure; these functions are the glue that scores captions
with `scoring.api.Scorer` (any object with the same `score(items, metrics)` method) and
perturbs them with `scoring.perturb.ops`, returning tables in the documented layouts.
Metrics that cannot run come back as all-NaN columns, with the reason in
`table.attrs["unavailable"]` ({metric: reason}).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .robustness import ORIGINAL, PRMCS_OPS


def _references(value) -> list[str]:
    """A references cell: a list, a JSON list, '|'-separated text, or empty."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    if isinstance(value, (list, tuple, np.ndarray)):
        return [str(v) for v in value]
    text = str(value).strip()
    if not text:
        return []
    if text.startswith("["):
        try:
            return [str(v) for v in json.loads(text)]
        except json.JSONDecodeError:
            raise ValueError(f"references cell is not a JSON list: {text[:80]!r}") from None
    return [part.strip() for part in text.split("|") if part.strip()]


def _image(row: pd.Series, image_root: Path | None):
    for column in ("image", "image_path"):
        value = row.get(column)
        if isinstance(value, str) and value.strip():
            path = Path(value)
            if image_root is not None and not path.is_absolute():
                path = image_root / path
            if not path.exists():  # named as the file names it: the folder it was looked for in is the server's
                raise FileNotFoundError(f"image not found: {value.strip()}")
            return str(path)
        if value is not None and not isinstance(value, (str, float)):
            return value  # PIL image or bytes
    return _image_named_by_id(row.get("image_id"), image_root)


def _image_named_by_id(image_id, image_root: Path | None) -> str | None:
    """A row without an image path whose `image_id` is a file's name among the images given
    (CapEval1k's `imgid` is one): that file, never one outside `image_root`."""
    if image_root is None or image_id is None or not str(image_id).strip():
        return None
    root = image_root.resolve()
    path = (root / str(image_id).strip()).resolve()
    return str(path) if path.is_relative_to(root) and path.is_file() else None


def score_texts(
    scorer, rows: pd.DataFrame, texts: Sequence[str], metrics: Sequence[str], *, image_root=None
) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Score `texts[i]` against the image, references and language of `rows.iloc[i]`."""
    from scoring.api import ScoreItem

    image_root = Path(image_root) if image_root else None
    if len(texts) != len(rows):
        raise ValueError("one text per row is needed")
    items = [
        ScoreItem(
            image=_image(row, image_root), candidate=str(text),
            references=_references(row.get("references")), lang=str(row.get("lang") or "en"),
            image_id=str(row.get("image_id")) if row.get("image_id") is not None else None,
        )
        for (_, row), text in zip(rows.iterrows(), texts)
    ]
    results = scorer.score(items, list(metrics))
    values, unavailable = {}, {}
    for name, result in results.items():
        if result.unavailable:
            unavailable[name] = result.unavailable
            values[name] = [np.nan] * len(items)
        else:
            values[name] = [np.nan if v is None else float(v) for v in result.values]
    return values, unavailable


def score_table(scorer, table: pd.DataFrame, metrics: Sequence[str], *, text_col: str = "candidate",
                image_root=None) -> pd.DataFrame:
    """`table` with one score column per metric, each distinct caption scored once."""
    if text_col not in table.columns:
        raise ValueError(f"table has no {text_col!r} column")
    key = "item_id" if "item_id" in table.columns else None
    unique = table.drop_duplicates(key or text_col).reset_index(drop=True)
    values, unavailable = score_texts(scorer, unique, unique[text_col].tolist(), metrics, image_root=image_root)
    scores = pd.DataFrame(values)
    scores[key or text_col] = unique[key or text_col]
    merged = table.drop(columns=[c for c in values if c in table.columns]).merge(scores, on=key or text_col, how="left")
    merged.attrs["unavailable"] = unavailable
    return merged


def perturbation_scores(
    scorer,
    captions: pd.DataFrame,
    metrics: Sequence[str],
    ops: Sequence[str] = PRMCS_OPS,
    *,
    p: float | None = None,
    seed: int = 0,
    image_root=None,
) -> pd.DataFrame:
    """Long robustness table: every caption and each of its perturbations, scored.

    `captions` needs `candidate` (or `caption`) and may have `lang`, `image`/`image_path`,
    `references`, `item_id`, `critical` (critical objects for substitution). Each caption
    gets its own perturbation seed (seed + row number) so the draws differ between captions
    but the table is reproducible. Rows: item_id, lang, op, text, noop, metric, score.
    """
    from scoring.perturb.ops import perturb

    text_col = "candidate" if "candidate" in captions.columns else "caption"
    if text_col not in captions.columns:
        raise ValueError("captions need a 'candidate' or 'caption' column")
    captions = captions.reset_index(drop=True).copy()
    if "item_id" not in captions.columns:
        captions["item_id"] = [f"c{index}" for index in range(len(captions))]
    if "lang" not in captions.columns:
        captions["lang"] = "en"
    rows, texts, meta = [], [], []
    for index, row in captions.iterrows():
        text = str(row[text_col])
        rows.append(row)
        texts.append(text)
        meta.append((row["item_id"], row["lang"], ORIGINAL, False))
        critical = _references(row.get("critical")) or None
        for op in ops:
            result = perturb(text, op, p=p, seed=seed + index, lang=str(row["lang"]), critical=critical)
            rows.append(row)
            texts.append(result.text)
            meta.append((row["item_id"], row["lang"], op, result.noop))
    frame = pd.DataFrame(rows).reset_index(drop=True)
    values, unavailable = score_texts(scorer, frame, texts, metrics, image_root=image_root)
    long_rows = []
    for metric, scores in values.items():
        for (item_id, lang, op, noop), text, score in zip(meta, texts, scores):
            long_rows.append(dict(item_id=item_id, lang=lang, op=op, text=text, noop=noop, metric=metric, score=score))
    table = pd.DataFrame(long_rows, columns=["item_id", "lang", "op", "text", "noop", "metric", "score"])
    table.attrs["unavailable"] = unavailable
    return table


def triplet_scores(
    scorer, captions: pd.DataFrame, metrics: Sequence[str], *, seed: int = 0, image_root=None
) -> pd.DataFrame:
    """SPECS triplets of every caption (per language), scored: kind, metric, base, extended.

    Uses `scoring.perturb.detail_units.specs_triplets`: positives extend c_j with the caption's
    next unit, negatives with a (mostly token-shuffled) unit of another image's caption.
    """
    from scoring.perturb.detail_units import specs_triplets

    text_col = "candidate" if "candidate" in captions.columns else "caption"
    captions = captions.reset_index(drop=True)
    if "lang" not in captions.columns:
        captions = captions.assign(lang="en")
    records, unavailable = [], {}
    for lang, part in captions.groupby("lang", sort=True):
        part = part.reset_index(drop=True)
        image_ids = part["image_id"].astype(str).tolist() if "image_id" in part.columns else None
        triplets = specs_triplets(part[text_col].astype(str).tolist(), lang=str(lang), seed=seed, image_ids=image_ids)
        if not triplets:
            continue
        owners = part.iloc[[t.caption_index for t in triplets]]
        texts = [t.base for t in triplets] + [t.positive for t in triplets] + [t.negative for t in triplets]
        values, missing = score_texts(scorer, pd.concat([owners] * 3, ignore_index=True), texts, metrics,
                                      image_root=image_root)
        unavailable.update(missing)
        n = len(triplets)
        for metric, scores in values.items():
            for i, triplet in enumerate(triplets):
                common = dict(lang=lang, metric=metric, caption_index=triplet.caption_index,
                              unit_index=triplet.unit_index, base_text=triplet.base, base=scores[i])
                records.append({**common, "kind": "pos", "extended_text": triplet.positive, "extended": scores[n + i]})
                records.append({**common, "kind": "neg", "extended_text": triplet.negative, "extended": scores[2 * n + i]})
    if not records:
        raise ValueError("no triplets: every caption is a single detail unit (or every metric was unavailable)")
    table = pd.DataFrame(records)
    table.attrs["unavailable"] = unavailable
    return table


def pair_scores(
    scorer, pairs: pd.DataFrame, metrics: Sequence[str], columns: tuple[str, str], suffixes: tuple[str, str], *,
    n_references: int | None = None, seed: int = 0, image_root=None,
) -> pd.DataFrame:
    """Score both captions of each pair (Pascal-50S: caption_a/caption_b -> M_a/M_b; FOIL:
    correct/foil -> M_correct/M_foil) against the pair's image and references.

    `n_references` samples that many references per pair, seeded (the Pascal-50S protocol
    uses 5 of the 48; FOIL's "1 ref" and "4 refs" settings use 1 or 4).
    """
    from .datasets import sample_references

    missing = [c for c in columns if c not in pairs.columns]
    if missing:
        raise ValueError(f"pairs lack column(s) {', '.join(missing)}")
    pairs = pairs.reset_index(drop=True).copy()
    if n_references is not None and "references" in pairs.columns:
        pairs["references"] = [
            sample_references(refs, n_references, seed=seed + index) for index, refs in enumerate(pairs["references"])
        ]
    both = pd.concat([pairs, pairs], ignore_index=True)
    texts = pairs[columns[0]].astype(str).tolist() + pairs[columns[1]].astype(str).tolist()
    values, unavailable = score_texts(scorer, both, texts, metrics, image_root=image_root)
    n = len(pairs)
    for metric, scores in values.items():
        pairs[metric + suffixes[0]] = scores[:n]
        pairs[metric + suffixes[1]] = scores[n:]
    pairs.attrs["unavailable"] = unavailable
    return pairs


def retrieval_similarities(
    scorer, captions: pd.DataFrame, metric: str = "MCS", *, image_root=None, langs: Sequence[str] | None = None
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Texts x images cosine similarities per language for COCO-SM style retrieval.

    Uses the text and vision backbones of `metric` in the scorer's registry (MCS: the
    multilingual text encoder with CLIP's vision tower; CLIP-S: CLIP for both). `captions`
    is a `datasets.load_coco_sm` table; returns ({lang: matrix}, text_to_image).
    """
    from .datasets import coco_sm_text_to_image
    from .retrieval import cosine_similarity

    spec = scorer.registry.metrics[scorer.canonical_name(metric)]
    if not spec.backbone:
        raise ValueError(f"{metric} has no embedding backbone; retrieval needs an embedding metric such as MCS or CLIP-S")
    text_backbone = spec.backbone
    image_backbone = spec.vision_backbone or spec.backbone
    langs = list(langs) if langs else list(dict.fromkeys(captions["lang"]))
    first = captions[captions["lang"] == langs[0]]
    files = first.drop_duplicates("image_index").sort_values("image_index")["filename"].tolist()
    root = Path(image_root) if image_root else Path(".")
    paths = [root / name for name in files]
    missing = [name for name, p in zip(files, paths) if not p.exists()]
    if missing:
        raise FileNotFoundError(f"{len(missing)} images not found, e.g. {missing[0]}")
    images = scorer.image_embeddings([str(p) for p in paths], image_backbone)
    similarities = {}
    text_to_image = coco_sm_text_to_image(captions, langs[0])
    for lang in langs:
        part = captions[captions["lang"] == lang].sort_values("caption_index")
        if not np.array_equal(coco_sm_text_to_image(captions, lang), text_to_image):
            raise ValueError(f"captions of {lang!r} are not aligned with those of {langs[0]!r}")
        similarities[lang] = cosine_similarity(scorer.text_embeddings(part["caption"].astype(str).tolist(), text_backbone), images)
    return similarities, text_to_image


def load_rating_set(name: str, path) -> pd.DataFrame:
    """The tidy table of the public rating set `name` (a key of `datasets.LOADERS`) at `path`."""
    from .datasets import LOADERS, rating_set_files

    if name not in LOADERS:
        raise LookupError(f"unknown rating set {name!r}; choose one of {', '.join(LOADERS)}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{name}: no such file or directory: {path}")
    try:
        return LOADERS[name](path)
    except ValueError as exc:  # the file is not the set's: say what the set reads
        raise ValueError(f"{exc}. {name} reads {rating_set_files(name)}") from None


def length_analysis(
    table: pd.DataFrame, metrics: Sequence[str], *, human_col: str = "human", edges: Sequence[float] | None = None,
    combine: tuple[str, str] | None = None, threshold: int | None = None,
) -> pd.DataFrame:
    """Correlation per caption-length bucket (SPECS Figure 3) of a wide score table.

    Lengths come from `n_tokens`, else from the `candidate` words. `combine` = (short, long)
    adds SPECS' advice as one more metric: `short` under `threshold` tokens, `long` above.
    """
    from .length import DEFAULT_EDGES, SPECS_THRESHOLD, length_bucket_table, length_switched_metric, token_counts

    missing = [m for m in metrics if m not in table.columns]
    if missing:
        raise ValueError(f"no scores for {', '.join(missing)}")
    table = table.copy()
    if "n_tokens" not in table.columns:
        if "candidate" not in table.columns:
            raise ValueError("the score table needs n_tokens or candidate")
        table["n_tokens"] = token_counts(table["candidate"].astype(str))
    metrics = list(metrics)
    if combine:
        combined = length_switched_metric(table, *combine, threshold=SPECS_THRESHOLD if threshold is None else threshold)
        table[combined.name] = combined
        metrics.append(combined.name)
    return length_bucket_table(table, metrics, human_col=human_col, edges=edges or DEFAULT_EDGES)
