"""Reproduce the field's tables: load a benchmark as published, score it with a profile through
the corpus runner (streaming, resumable), compute the benchmark's own protocol and set each
value beside the published one (`published_values.toml`).

Protocols (values x 100, as the papers print them, with a seeded 95 % percentile bootstrap):

- rating sets (Flickr8k-Expert, Flickr8k-CF, Composite, Polaris, Nebula, LongCap-Arena):
  Kendall tau_b and tau_c of the metric against the human score, each published row an item;
- Pascal-50S: pairwise accuracy per category (HC, HI, HM, MM) and their mean, human label the
  majority vote with ties broken by a seeded coin, a metric tie counting half; 5 of the 48
  references sampled per pair;
- FOIL: accuracy (correct caption above its foil, a tie half) with 1 and with 4 references.

A value is marked ✓ (within ±0.1 point of the paper) or ✗ only when the metric's checkpoints
are the published ones: every backbone the metric uses carries `published = "<source>"` in
the profile's registry and is loaded from exactly that source (`published_checkpoints`).
Metrics without checkpoints (the n-gram metrics) qualify under any profile; the world and tiny
profiles mark no backbone, so their neural metrics are never compared.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from scoring.csv_safe import frame_to_csv

from .benchmark_names import (
    HUB_REPOS, LONGCAP_ARENA_ASPECTS, LONGCAP_ARENA_SPLITS, PUBLISHED_BENCHMARKS, WORLD_BENCHMARKS,
)
from .correlation import bootstrap_estimates, cluster_bootstrap_estimates, mean_estimate
from .datasets import PASCAL_REFERENCE_DRAWS
from .pairwise import PASCAL_CATEGORIES, pairwise_correct, pascal_correct
from .published import published_value

TOLERANCE = 0.1  # points (x 100): the papers print one decimal
PASCAL_COEFFICIENTS = tuple(f"pascal_{c.lower()}" for c in PASCAL_CATEGORIES) + ("pascal_mean",)
FOIL_COEFFICIENTS = ("foil_1ref", "foil_4ref")
DEFAULT_METRICS = ("CLIP-S", "RefCLIP-S", "PAC-S", "RefPAC-S", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr", "SPICE")
RESULT_COLUMNS = ["benchmark", "metric", "coefficient", "ours", "low", "high", "n", "paper", "difference", "verdict",
                  "source", "note"]


@dataclass(frozen=True)
class Benchmark:
    """A benchmark: its protocol, loader, the files that identify it in a folder, and its hub copy."""

    name: str
    kind: str  # "ratings", "pascal" or "foil"
    coefficients: tuple[str, ...]
    files: tuple[str, ...]
    load: Callable[[Path], pd.DataFrame]
    description: str = ""

    @property
    def hub(self) -> str | None:
        return HUB_REPOS.get(self.name, (None, None))[0]

    @property
    def hub_patterns(self) -> tuple[str, ...] | None:
        return HUB_REPOS.get(self.name, (None, None))[1]


def _ratings_loader(name: str):
    def load(path: Path) -> pd.DataFrame:
        from .pipeline import load_rating_set

        return load_rating_set(name, path)
    return load


def _load_composite(path: Path) -> pd.DataFrame:
    """Composite in the Polos layout (en_test_composite_da.csv, with references) when given or
    found, else the AMT result files (which carry no references)."""
    from .datasets import load_composite, load_composite_da

    path = Path(path)
    names = ("en_test_composite_da2.csv", "en_test_composite_da.csv")
    if path.name in names or (path.is_dir() and any((path / n).is_file() for n in names)):
        return load_composite_da(path)
    return load_composite(path)


def _load_nebula(path: Path) -> pd.DataFrame:
    """Nebula, with Spica's corrected labels when `spica_*.csv` sit beside the data."""
    from .datasets import load_nebula

    path = Path(path)
    folder = path if path.is_dir() else path.parent
    spica = next((p for p in (folder, folder / "spica", folder.parent / "spica") if list(p.glob("spica_*.csv"))), None)
    return load_nebula(path, corrections=spica)


def _load_polos_world(path: Path) -> pd.DataFrame:
    from .datasets import load_polos_csv

    path = Path(path)
    return load_polos_csv(path / "world_test.csv" if path.is_dir() else path, "World")


def _load_pascal(path: Path) -> pd.DataFrame:
    from .datasets import load_pascal50s

    path = Path(path)
    return load_pascal50s(path if path.is_dir() else path.parent)


def _load_foil(path: Path) -> pd.DataFrame:
    from .datasets import load_foil

    path = Path(path)
    return load_foil(path / "foilv1.0_test_2017.json" if path.is_dir() else path)


def _benchmarks() -> dict[str, Benchmark]:
    tau_c_first, tau_b_first = ("kendall_c", "kendall_b"), ("kendall_b", "kendall_c")
    entries = [
        Benchmark("flickr8k-expert", "ratings", tau_c_first, ("flickr8k.json",), _ratings_loader("flickr8k-expert"),
                  description="Flickr8k-Expert (CLIPScore/PAC-S flickr8k.json)"),
        Benchmark("flickr8k-cf", "ratings", tau_b_first, ("crowdflower_flickr8k.json",),
                  _ratings_loader("flickr8k-cf"), description="Flickr8k-CF (crowdflower_flickr8k.json)"),
        Benchmark("composite", "ratings", tau_c_first, ("en_test_composite_da.csv", "8k_correctness.csv"),
                  _load_composite, description="Composite (en_test_composite_da.csv or the AMT files)"),
        Benchmark("pascal-50s", "pascal", PASCAL_COEFFICIENTS, ("pair_pascal.mat",), _load_pascal,
                  description="Pascal-50S (pair_pascal.mat, consensus_pascal.mat)"),
        Benchmark("foil", "foil", FOIL_COEFFICIENTS, ("foilv1.0_test_2017.json",), _load_foil,
                  description="FOIL-COCO test (foilv1.0_test_2017.json)"),
        Benchmark("polaris", "ratings", tau_c_first, ("polaris_test.csv",), _ratings_loader("polaris"),
                  description="Polaris test (polaris_test.csv or the hub's data/test-*.parquet)"),
        Benchmark("nebula", "ratings", tau_c_first, ("nebula_test.csv",), _load_nebula,
                  description="Nebula test (nebula_test.csv or the hub's data/test-*.parquet; Spica corrections "
                              "applied when spica_*.csv are beside it)"),
    ]
    for split, hub_split in LONGCAP_ARENA_SPLITS.items():
        for aspect in LONGCAP_ARENA_ASPECTS:
            name = f"longcap-arena-{split}-{aspect}"
            entries.append(Benchmark(name, "ratings", tau_b_first, (f"{aspect}_{hub_split}.csv",), _ratings_loader(name),
                                     description=f"LongCap-Arena {split} {LONGCAP_ARENA_ASPECTS[aspect]}"))
    entries += [
        Benchmark("world-ratings", "ratings", tau_c_first, ("world_test.csv",), _load_polos_world,
                  description="the world's simulated-annotator ratings (Polaris CSV layout)"),
        Benchmark("world-pascal", "pascal", PASCAL_COEFFICIENTS, ("pair_pascal.mat",), _load_pascal,
                  description="the world's Pascal-50S-style pairs"),
        Benchmark("world-foil", "foil", FOIL_COEFFICIENTS, ("foilv1.0_test_2017.json",), _load_foil,
                  description="the world's FOIL-style foils"),
    ]
    benchmarks = {b.name: b for b in entries}
    assert tuple(benchmarks) == (*PUBLISHED_BENCHMARKS, *WORLD_BENCHMARKS)
    return benchmarks


BENCHMARKS = _benchmarks()


def benchmark(name: str) -> Benchmark:
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise LookupError(f"unknown benchmark {name!r}; choose one of {', '.join(PUBLISHED_BENCHMARKS)}, "
                          "all or world") from None


def find_benchmarks(folder) -> dict[str, Path]:
    """{benchmark: its file} for every published benchmark whose identifying file is under `folder`."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"not a folder: {folder}")
    found = {}
    for name in PUBLISHED_BENCHMARKS:
        for file_name in BENCHMARKS[name].files:
            match = next(iter(sorted(folder.rglob(file_name))), None)
            if match is not None:
                found[name] = match
                break
    return found


# -- protocols (pure functions over score arrays) ----------------------------------------------
@dataclass(frozen=True)
class Measure:
    coefficient: str
    value: float  # x 100
    low: float
    high: float
    n: int


def _scaled(coefficient: str, estimate) -> Measure:
    return Measure(coefficient, 100 * estimate.value, 100 * estimate.low, 100 * estimate.high, estimate.n)


def rating_protocol(metric_scores, human, coefficients: Sequence[str] = ("kendall_b", "kendall_c"), *,
                    clusters=None, n_boot: int = 1000, seed: int = 0) -> list[Measure]:
    """Kendall (or any `correlation` coefficient) of the metric with the human scores, rows
    where the metric has no score left out. With `clusters` (each row's image) the interval
    resamples whole images: Flickr8k-Expert rates each caption three times, with one metric
    score, and an image's captions are not independent, so resampling rows was too narrow."""
    x, y = np.asarray(metric_scores, dtype=float), np.asarray(human, dtype=float)
    keep = ~(np.isnan(x) | np.isnan(y))
    if clusters is None:
        estimates = bootstrap_estimates(x[keep], y[keep], list(coefficients), n_boot=n_boot, seed=seed)
    else:
        estimates = cluster_bootstrap_estimates(x[keep], y[keep], np.asarray(clusters)[keep], list(coefficients),
                                                n_boot=n_boot, seed=seed)
    return [_scaled(name, estimates[name]) for name in coefficients]


def pascal_protocol(categories, votes_a, votes_b, score_a, score_b, *, n_boot: int = 1000,
                    seed: int = 0) -> list[Measure]:
    """Pascal-50S accuracy per category and their mean (the same human labels as
    `pairwise.pascal50s_accuracy` for the same seed; scores of several draws of references
    averaged as `pairwise.pascal_correct` says); the interval resamples pairs within each
    category."""
    categories, correct, valid = pascal_correct(categories, votes_a, votes_b, score_a, score_b, seed=seed)
    per_category = {c: correct[valid & (categories == c)] for c in PASCAL_CATEGORIES}
    present = [c for c in PASCAL_CATEGORIES if per_category[c].size]
    rng = np.random.default_rng(seed)
    boot = {c: (np.array([per_category[c][rng.integers(0, per_category[c].size, per_category[c].size)].mean()
                          for _ in range(n_boot)]) if n_boot > 0 else np.array([])) for c in present}
    measures = []
    for category in PASCAL_CATEGORIES:
        values = per_category[category]
        point = float(values.mean()) if values.size else math.nan
        low, high = _percentiles(boot.get(category, np.array([])))
        measures.append(Measure(f"pascal_{category.lower()}", 100 * point, 100 * low, 100 * high, int(values.size)))
    mean = float(np.mean([per_category[c].mean() for c in present])) if present else math.nan
    low, high = _percentiles(np.mean([boot[c] for c in present], axis=0) if present and n_boot > 0 else np.array([]))
    measures.append(Measure("pascal_mean", 100 * mean, 100 * low, 100 * high, int(valid.sum())))
    return measures


def _percentiles(samples: np.ndarray) -> tuple[float, float]:
    if samples.size == 0:
        return math.nan, math.nan
    low, high = np.percentile(samples, [2.5, 97.5])
    return float(low), float(high)


def foil_protocol(score_correct, score_foil, coefficient: str = "foil_4ref", *, n_boot: int = 1000,
                  seed: int = 0) -> Measure:
    """FOIL accuracy (`pairwise.foil_accuracy`: ties count half) with its interval over pairs."""
    correct, foil = np.asarray(score_correct, dtype=float), np.asarray(score_foil, dtype=float)
    keep = ~(np.isnan(correct) | np.isnan(foil))
    return _scaled(coefficient, mean_estimate(pairwise_correct(correct[keep], foil[keep]), n_boot=n_boot, seed=seed))


# -- published checkpoints --------------------------------------------------------------------
def published_checkpoints(registry, metric: str) -> tuple[bool, str]:
    """Whether `metric` scores with the checkpoints the papers used, and if not, why.

    A backbone counts when its registry entry carries `published = "<hub id or file name>"`
    and it is loaded from exactly that (the hub id with no local path, or a local file of that
    name that exists). Metrics without a backbone (n-gram metrics) have no checkpoint to match."""
    spec = registry.metrics[metric]
    for name in [b for b in (spec.backbone, spec.vision_backbone) if b]:
        backbone = registry.backbones[name]
        marker = backbone.extra.get("published")
        if not marker:
            return False, f"profile {registry.profile!r}: backbone {name!r} is not a published checkpoint"
        if backbone.path is not None:
            if backbone.path.name != marker:
                return False, f"backbone {name!r} is loaded from {backbone.path.name}, not the published {marker}"
            if not backbone.path.exists():
                return False, f"backbone {name!r}: the published {marker} is not at {backbone.path}"
        elif backbone.hub != marker:
            return False, f"backbone {name!r} is loaded from {backbone.hub}, not the published {marker}"
    return True, ""


# -- scoring through the corpus runner --------------------------------------------------------
def _image_file(row: pd.Series, image_root: Path, images_out: Path) -> str:
    data = row.get("image")
    if isinstance(data, (bytes, bytearray)):  # a hub Parquet row carries its image
        images_out.mkdir(parents=True, exist_ok=True)
        target = images_out / Path(str(row["image_id"])).name
        if not target.exists():
            target.write_bytes(data)
        return str(target)
    path = Path(str(row.get("image_path") or row.get("image_id")))
    return str(path if path.is_absolute() else image_root / path)


def score_rows(rows: list[dict], out: Path, *, profile: str | None, metrics: Sequence[str], device: str | None,
               show_progress: bool) -> tuple[pd.DataFrame, dict[str, str], int]:
    """Score manifest rows (id, image, candidate, references) with the corpus runner into
    `out` (resumed when run again); returns a wide table id -> one column per metric, the
    unavailable metrics and the number of rows that could not be scored."""
    from scoring.corpus import open_manifest, score_corpus
    from scoring.corpus.run import current_scores

    out.mkdir(parents=True, exist_ok=True)
    manifest = out / "manifest.jsonl"
    with open(manifest, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    report = score_corpus(open_manifest(manifest, image_root=out), out / "scores", profile=profile, metrics=metrics,
                          device=device, engine="local", n_boot=0, show_progress=show_progress)
    scores = current_scores(out / "scores")
    wide = scores.pivot_table(index="id", columns="metric", values="score", aggfunc="first", dropna=False)
    return wide, dict(report.unavailable), report.errors


def _manifest_rating_rows(table: pd.DataFrame, image_root: Path, images_out: Path) -> list[dict]:
    unique = table.drop_duplicates("item_id")
    return [{"id": row["item_id"], "image": _image_file(row, image_root, images_out), "candidate": row["candidate"],
             "references": list(row["references"]), "lang": row.get("lang") or "en"} for _, row in unique.iterrows()]


def _pair_rows(pairs: pd.DataFrame, columns: tuple[str, str], settings: dict[str, tuple[int | None, int]],
               image_root: Path, images_out: Path, seed: int) -> list[dict]:
    """Rows of both captions of each pair for each setting (k references, number of draws):
    draw 0 is id `pair:column:setting`, draw d `pair:column:setting-dD`."""
    from .datasets import draw_seed, sample_references

    rows = []
    for index, (_, pair) in enumerate(pairs.reset_index(drop=True).iterrows()):
        image = _image_file(pair, image_root, images_out)
        for setting, (k, draws) in settings.items():
            for draw in range(draws):
                references = list(pair["references"])
                if k is not None:
                    references = sample_references(references, k, seed=draw_seed(seed, draw) + index)
                for column in columns:
                    rows.append({"id": _draw_id(pair["pair_id"], column, setting, draw), "image": image,
                                 "candidate": pair[column], "references": references, "lang": "en"})
    return rows


def _draw_id(pair_id, column: str, setting: str, draw: int = 0) -> str:
    return f"{pair_id}:{column}:{setting}" + (f"-d{draw}" if draw else "")


_DRAW_SUFFIXES = tuple(f"-d{d}" for d in range(1, PASCAL_REFERENCE_DRAWS))


def _reference_metrics(profile: str | None, metrics: Sequence[str]) -> list[str]:
    """The metrics that read references (the ones a draw of references can change)."""
    from scoring.api import Scorer

    facts = Scorer(profile, device="cpu")  # the registry's metric facts; nothing loads
    return [m for m in metrics if facts.info(m).needs_references]


def _column(wide: pd.DataFrame, metric: str, ids) -> np.ndarray:
    if metric not in wide.columns:
        return np.full(len(ids), np.nan)
    return wide[metric].reindex([str(i) for i in ids]).to_numpy(dtype=float)


@dataclass
class Reproduction:
    """One benchmark reproduced: the result table and what the scoring step reported."""

    benchmark: str
    table: pd.DataFrame
    items: int
    unavailable: dict[str, str] = field(default_factory=dict)
    errors: int = 0
    profile: str = ""
    scores: pd.DataFrame | None = None  # the scored items, one column per metric (for checks)


def reproduce(name: str, path, *, out, metrics: Sequence[str] | None = None, profile: str | None = None,
              device: str | None = None, image_root=None, n_boot: int = 1000, seed: int = 0,
              show_progress: bool = False) -> Reproduction:
    """Load benchmark `name` from `path` (its file or folder as published), score it with
    `profile` into `out` and compute its protocol beside the published values."""
    from scoring.registry import canonical_metric_name, load_registry

    spec = benchmark(name)
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{name}: no such file or folder: {path}")
    registry = load_registry(profile)
    wanted = list(metrics) if metrics else [m for m in DEFAULT_METRICS if m in registry.metrics]
    chosen = [canonical_metric_name(registry, m) for m in wanted]
    table = spec.load(path)
    root = (Path(image_root) if image_root else (path if path.is_dir() else path.parent)).resolve()
    out = Path(out)
    images_out = out / "images"
    if spec.kind == "ratings":
        rows = _manifest_rating_rows(table, root, images_out)
    elif spec.kind == "pascal":
        rows = _pair_rows(table, ("caption_a", "caption_b"), {"5ref": (5, PASCAL_REFERENCE_DRAWS)}, root, images_out,
                          seed)
    else:
        rows = _pair_rows(table, ("correct", "foil"), {"1ref": (1, 1), "4ref": (4, 1)}, root, images_out, seed)
    # Only reference metrics see the draws of references past the first: an image metric's value
    # is the same in every draw, so it is scored once (Pascal-50S: not 5 x 8,000 image encodes).
    later = [r for r in rows if spec.kind == "pascal" and r["id"].endswith(_DRAW_SUFFIXES)]
    first = [r for r in rows if not (spec.kind == "pascal" and r["id"].endswith(_DRAW_SUFFIXES))]
    wide, unavailable, errors = score_rows(first, out, profile=profile, metrics=chosen, device=device,
                                           show_progress=show_progress)
    drawn = _reference_metrics(profile, [m for m in chosen if m not in unavailable]) if later else []
    if drawn:
        more, missing, failed = score_rows(later, out / "draws", profile=profile, metrics=drawn, device=device,
                                           show_progress=show_progress)
        wide, unavailable, errors = pd.concat([wide, more]), {**unavailable, **missing}, errors + failed
    results = []
    for metric in chosen:
        comparable, why = published_checkpoints(registry, metric)
        if metric in unavailable:
            results.append(_row(name, metric, None, unavailable[metric], comparable, why))
            continue
        for measure in _measures(spec, table, wide, metric, n_boot, seed,
                                 PASCAL_REFERENCE_DRAWS if metric in drawn else 1):
            results.append(_row(name, metric, measure, "", comparable, why))
    frame = pd.DataFrame(results, columns=RESULT_COLUMNS)
    scored = pd.DataFrame({m: _column(wide, m, [r["id"] for r in rows]) for m in chosen})
    scored.insert(0, "id", [r["id"] for r in rows])
    return Reproduction(name, frame, len(table), unavailable, errors, registry.profile, scored)


def reproduce_found(folder, *, out, **options) -> list[Reproduction]:
    """`reproduce` every published benchmark whose files are under `folder` (find_benchmarks),
    each into out/<benchmark>; `options` as for `reproduce`. The CLI's `all` and the app's
    server folder both run this."""
    found = find_benchmarks(folder)
    if not found:
        raise FileNotFoundError(f"no benchmark's files found under {folder}")
    return [reproduce(name, path, out=Path(out) / name, **options) for name, path in found.items()]


def reproduce_world(out, *, scenes: int = 12, profile: str | None = None, **options) -> tuple[dict[str, int],
                                                                                              list[Reproduction]]:
    """Write the world's ratings, pairs and foils for `scenes` held-out scenes under out/data and
    reproduce each with `profile` (default: world); returns the item counts and the results."""
    from scoring.world.benchmark import BENCHMARK_FOLDERS, write_world_benchmark

    out = Path(out)
    counts = write_world_benchmark(out / "data", scenes=scenes)
    return counts, [reproduce(name, out / "data" / folder, out=out / name, profile=profile or "world", **options)
                    for name, folder in BENCHMARK_FOLDERS.items()]


def summary_line(result: Reproduction) -> str:
    """One sentence on a reproduction, with no server path: items, profile, what could not run."""
    parts = [f"{result.benchmark}: {result.items} items scored with profile {result.profile}"]
    parts += [f"{metric} unavailable: {reason}" for metric, reason in result.unavailable.items()]
    if result.errors:
        parts.append(f"{result.errors} rows could not be scored")
    return "; ".join(parts) + "."


def _measures(spec: Benchmark, table: pd.DataFrame, wide: pd.DataFrame, metric: str, n_boot: int,
              seed: int, draws: int = 1) -> list[Measure]:
    if spec.kind == "ratings":
        return rating_protocol(_column(wide, metric, table["item_id"]), table["human"], spec.coefficients,
                               clusters=table["image_id"].astype(str).to_numpy(), n_boot=n_boot, seed=seed)
    ids = table["pair_id"].tolist()
    if spec.kind == "pascal":
        return pascal_protocol(table["category"], table["votes_a"], table["votes_b"],
                               np.array([_column(wide, metric, [_draw_id(i, "caption_a", "5ref", d) for i in ids])
                                         for d in range(draws)]),
                               np.array([_column(wide, metric, [_draw_id(i, "caption_b", "5ref", d) for i in ids])
                                         for d in range(draws)]), n_boot=n_boot, seed=seed)
    return [foil_protocol(_column(wide, metric, [f"{i}:correct:{k}" for i in ids]),
                          _column(wide, metric, [f"{i}:foil:{k}" for i in ids]), f"foil_{k}", n_boot=n_boot, seed=seed)
            for k in ("1ref", "4ref")]


def verdict(ours: float, paper: float | None, comparable: bool) -> str:
    """✓ within ±0.1 point of the paper, ✗ outside; '' when there is nothing to compare."""
    if paper is None or not comparable or ours != ours:
        return ""
    return "✓" if abs(round(ours, 1) - paper) <= TOLERANCE + 1e-9 else "✗"


def _row(name: str, metric: str, measure: Measure | None, unavailable: str, comparable: bool, why: str) -> dict:
    if measure is None:
        return dict(benchmark=name, metric=metric, coefficient="", ours=math.nan, low=math.nan, high=math.nan, n=0,
                    paper=math.nan, difference=math.nan, verdict="", source="", note=f"unavailable: {unavailable}")
    published = published_value(metric, name, measure.coefficient)
    paper = published.value if published else None
    note = "" if paper is None or comparable else f"not compared: {why}"
    return dict(benchmark=name, metric=metric, coefficient=measure.coefficient, ours=measure.value, low=measure.low,
                high=measure.high, n=measure.n, paper=math.nan if paper is None else paper,
                difference=math.nan if paper is None else measure.value - paper,
                verdict=verdict(measure.value, paper, comparable),
                source=published.source if published else "", note=note)


# -- output -----------------------------------------------------------------------------------
def format_table(table: pd.DataFrame) -> pd.DataFrame:
    """The printed table: metric, coefficient, ours [95 % interval], paper, difference, ✓/✗."""
    def number(value, digits=1):
        return "" if value != value else f"{value:.{digits}f}"

    return pd.DataFrame({
        "metric": table["metric"], "coefficient": table["coefficient"],
        "ours": [number(v) for v in table["ours"]],
        "95% interval": ["" if lo != lo else f"[{lo:.1f}, {hi:.1f}]" for lo, hi in zip(table["low"], table["high"])],
        "n": table["n"], "paper": [number(v) for v in table["paper"]],
        "difference": ["" if d != d else f"{d:+.1f}" for d in table["difference"]],
        "": table["verdict"], "note": table["note"],
    })


def markdown_table(table: pd.DataFrame) -> str:
    shown = format_table(table).rename(columns={"": "±0.1"})
    lines = ["| " + " | ".join(shown.columns) + " |", "|" + "---|" * len(shown.columns)]
    for _, row in shown.iterrows():
        lines.append("| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines) + "\n"


def write_results(result: Reproduction, out) -> tuple[Path, Path]:
    """results.csv (every number) and results.md (the printed table) in `out`."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = frame_to_csv(result.table, out / "results.csv")
    md_path = out / "results.md"
    md_path.write_text(markdown_table(result.table), encoding="utf-8")
    return csv_path, md_path
