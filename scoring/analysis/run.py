"""The analyses from published files, end to end: read a benchmark as published, score it now
with a scorer, and compute its measure. `caplens analyze` and the app's "Analyze from files"
both call these, so a measure is orchestrated in one place.

Every measure takes (scorer, the file or folder as published, metrics, options) and returns
a `Measured`: the result table, the scored rows it came from, and {metric: reason} for
metrics that could not run. `with_images=False` drops the image columns
before scoring, so reference metrics still run and image metrics score nothing instead of
every row failing on a missing file (the app does this when no images were uploaded).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from scoring.csv_safe import read_csv_frame

from .correlation import COEFFICIENTS, correlation_table
from .datasets import PASCAL_REFERENCE_DRAWS, draw_seed, load_coco_sm, load_foil, load_pascal50s
from .pairwise import foil_table, pascal50s_table
from .pipeline import length_analysis, load_rating_set, pair_scores, retrieval_similarities, score_table, triplet_scores
from .retrieval import retrieval_table
from .specificity import specificity_table

IMAGE_COLUMNS = ("image", "image_path")


@dataclass
class Measured:
    """A measure's `table`, the scored rows behind it (`scores`), and why metrics did not run."""

    table: pd.DataFrame
    scores: pd.DataFrame
    count: str
    unavailable: dict[str, str] = field(default_factory=dict)

    def unscored(self) -> list[str]:
        """Metrics that ran but scored no row (image metrics without images)."""
        if not {"metric", "n"} <= set(self.table.columns):
            return []
        totals = self.table.groupby("metric", sort=False)["n"].sum()
        return [metric for metric, n in totals.items() if n == 0 and metric not in self.unavailable]

    def summary(self) -> str:
        """The count, each unavailable metric's reason, and the metrics that scored nothing."""
        empty = self.unscored()
        parts = [self.count, unavailable_text(self.unavailable),
                 f"No scores for {', '.join(empty)} (image metrics need the images)." if empty else ""]
        return " ".join(part for part in parts if part)


def unavailable_text(unavailable: dict[str, str]) -> str:
    return " ".join(f"{metric}: unavailable: {reason}." for metric, reason in unavailable.items())


def read_table(path: Path) -> pd.DataFrame:
    """A CSV file, or a clear error saying why it cannot be read."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if path.is_dir():
        raise ValueError(f"{path.name}: a folder, not a CSV file")
    try:
        return read_csv_frame(path)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a readable CSV ({exc})") from None


def read_captions(path: Path) -> pd.DataFrame:
    """A caption CSV: candidate (or caption) [, lang, image, image_id, references, item_id, critical]."""
    captions = read_table(path)
    if not {"candidate", "caption"} & set(captions.columns):
        raise ValueError(f"{Path(path).name}: needs a 'candidate' (or 'caption') column")
    return captions


def _chosen(metrics: Sequence[str] | None) -> list[str]:
    if not metrics:
        raise ValueError("Choose at least one metric.")
    return list(metrics)


def _images(table: pd.DataFrame, with_images: bool) -> pd.DataFrame:
    return table if with_images else table.drop(columns=[c for c in IMAGE_COLUMNS if c in table.columns])


def default_groups(table: pd.DataFrame) -> list[str]:
    """Correlations are reported per collection and language where the table has them."""
    return [c for c in ("collection", "lang") if c in table.columns]


def correlate(table: pd.DataFrame, metrics: Sequence[str], *, unavailable: dict[str, str] | None = None,
              human_col: str = "human", group_by: Sequence[str] | None = None,
              coefficients: Sequence[str] = COEFFICIENTS, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Caption-level correlation of the metrics that could run with `human_col`, grouped by
    collection and language where present (unless `group_by` says otherwise)."""
    if human_col not in table.columns:
        raise ValueError(f"no human column {human_col!r}")
    usable = [m for m in metrics if m not in (unavailable or {})]
    if not usable:
        raise ValueError(" ".join(["No chosen metric could be scored.", unavailable_text(unavailable or {})]).strip())
    group = list(group_by) if group_by is not None else default_groups(table)
    return correlation_table(table.drop(columns=["references"], errors="ignore"), usable, human_col=human_col,
                             group_by=group, coefficients=list(coefficients), n_boot=n_boot, seed=seed,
                             cluster_col="image_id" if "image_id" in table.columns else None)


def rating_correlation(scorer, path, metrics: Sequence[str], *, dataset: str, image_root=None,
                       with_images: bool = True, group_by: Sequence[str] | None = None,
                       coefficients: Sequence[str] = COEFFICIENTS, n_boot: int = 1000, seed: int = 0) -> Measured:
    """Correlation of each metric with the human scores of a public rating set, scored now."""
    chosen = _chosen(metrics)
    scored = score_table(scorer, _images(load_rating_set(dataset, path), with_images), chosen, image_root=image_root)
    unavailable = scored.attrs.get("unavailable", {})
    result = correlate(scored, chosen, unavailable=unavailable, group_by=group_by, coefficients=coefficients,
                       n_boot=n_boot, seed=seed)
    return Measured(result, scored, f"{len(scored)} rated captions of {dataset}.", unavailable)


def rating_length_buckets(scorer, path, metrics: Sequence[str], *, dataset: str,
                          combine: tuple[str, str] | None = None, threshold: int = 60, image_root=None,
                          with_images: bool = True) -> Measured:
    """Correlation per caption-length bucket (SPECS Figure 3) of a public rating set, with
    SPECS' combined metric (`combine` = (short, long) around `threshold` tokens)."""
    chosen = _chosen(metrics)
    needed = list(dict.fromkeys(chosen + list(combine or ())))
    scored = score_table(scorer, _images(load_rating_set(dataset, path), with_images), needed, image_root=image_root)
    unavailable = scored.attrs.get("unavailable", {})
    if combine and any(m in unavailable for m in combine):
        raise ValueError("The combined metric needs both of its metrics. " + unavailable_text(unavailable))
    usable = [m for m in chosen if m not in unavailable]
    if not usable and not combine:
        raise ValueError("No chosen metric could be scored. " + unavailable_text(unavailable))
    result = length_analysis(scored.drop(columns=["references"]), usable, combine=combine, threshold=int(threshold))
    return Measured(result, scored, f"{len(scored)} rated captions of {dataset}.", unavailable)


def pascal50s(scorer, directory, metrics: Sequence[str], *, n_references: int = 5, seed: int = 0, image_root=None,
              with_images: bool = True, draws: int = PASCAL_REFERENCE_DRAWS) -> Measured:
    """Pascal-50S pairwise accuracy (HC, HI, HM, MM, mean) from pair_pascal.mat and
    consensus_pascal.mat in `directory`, `n_references` of the 48 references sampled per pair,
    averaged over `draws` draws of them (the published protocol: 5); the scores table is the
    first draw's."""
    chosen = _chosen(metrics)
    pairs = _images(load_pascal50s(directory), with_images)
    tables, first = [], None
    for draw in range(draws):
        scores = pair_scores(scorer, pairs, chosen, ("caption_a", "caption_b"), ("_a", "_b"),
                             n_references=n_references, seed=draw_seed(seed, draw), image_root=image_root)
        first = scores if first is None else first
        tables.append(pascal50s_table(scores, chosen, seed=seed).set_index("metric"))
    table = sum(tables[1:], tables[0]) / len(tables)
    table["n"] = tables[0]["n"]
    return Measured(table.reset_index(), first, f"{len(pairs)} pairs, accuracy averaged over {draws} draw(s) of "
                    f"{n_references} references.", first.attrs["unavailable"])


def foil(scorer, path, metrics: Sequence[str], *, n_references: int = 4, seed: int = 0, image_root=None,
         with_images: bool = True) -> Measured:
    """FOIL accuracy: share of (correct, foil) caption pairs where the correct one scores higher."""
    chosen = _chosen(metrics)
    pairs = _images(load_foil(path), with_images)
    scores = pair_scores(scorer, pairs, chosen, ("correct", "foil"), ("_correct", "_foil"),
                         n_references=n_references, seed=seed, image_root=image_root)
    return Measured(foil_table(scores, chosen), scores, f"{len(pairs)} pairs.", scores.attrs["unavailable"])


def specificity_rates(triplets: pd.DataFrame) -> pd.DataFrame:
    """`specificity_table` per language and metric (where the triplet table has them)."""
    return specificity_table(triplets, group_by=[c for c in ("lang", "metric") if c in triplets.columns])


def specificity(scorer, captions: pd.DataFrame | Path, metrics: Sequence[str], *, seed: int = 0, image_root=None,
                with_images: bool = True) -> Measured:
    """Specificity rates SR_pos / SR_neg (SPECS eq. 1-2) of captions (a table, or a caption
    CSV file) split into triplets."""
    chosen = _chosen(metrics)
    captions = captions if isinstance(captions, pd.DataFrame) else read_captions(captions)
    triplets = triplet_scores(scorer, _images(captions, with_images), chosen, seed=seed, image_root=image_root)
    return Measured(specificity_rates(triplets), triplets,
                    f"{len(triplets) // 2 // len(chosen)} triplets.", triplets.attrs["unavailable"])


@dataclass
class Retrieval(Measured):
    """A retrieval result with the texts × images similarity matrices it came from."""

    similarities: dict[str, np.ndarray] = field(default_factory=dict)
    text_to_image: np.ndarray | None = None


def coco_sm_retrieval(scorer, meta_path, metric: str, *, langs: Sequence[str] | None = None, image_root=None,
                      reference_lang: str = "en") -> Retrieval:
    """COCO-SM text-to-image Recall@1/5/10 per language and NDCG@20 against `reference_lang`,
    embedding the meta file's captions and images with `metric`'s encoders."""
    captions = load_coco_sm(meta_path, list(langs) if langs else None)
    similarities, text_to_image = retrieval_similarities(scorer, captions, metric, image_root=image_root,
                                                         langs=list(langs) if langs else None)
    table = retrieval_table(similarities, text_to_image, reference_lang=reference_lang)
    count = (f"{len(text_to_image)} texts, {int(text_to_image.max()) + 1} images, "
             f"{len(similarities)} languages.")
    return Retrieval(table, captions, count, similarities=similarities, text_to_image=text_to_image)
