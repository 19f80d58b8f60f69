"""Score a whole corpus in batches: streaming, resumable, the same scoring core in every engine.

A run has three steps:

1. plan (in the driver, streaming over the manifest): CIDEr-D document frequencies over
   the whole reference corpus when CIDEr-D is asked for, then the rows still to score
   (row × metric version not yet in the output) written as one work shard per batch;
2. score: `ShardScorer` (the Scorer API) turns each shard into result records, in this
   process (`local`) or in a pool of Ray actors (`ray`, see `scoring.corpus.ray_engine`);
3. write (in the driver, as results arrive): one Parquet part of scores and one JSONL part of
   errors per batch, each written atomically, then the errors file and the summary.

Batch k always holds manifest rows k·B+1 … (k+1)·B, and a batch's parts appear whole or not
at all, so a run killed at any point and run again ends with the same files as an
uninterrupted run, with no duplicate rows.

Output folder:
  scores/part-NNNNNN.parquet  id, model, metric, score, metric_version, checkpoint_hash, input
  errors/part-NNNNNN.jsonl    rows that could not be scored: row, id, model, image, reason, input
  inputs.parquet              model, id, input of every row the latest run read
  errors.jsonl, summary.csv, summary.json   written when the run ends
  run.json                    the manifest read and the metric versions of the latest run

`input` fingerprints what a row's score depends on besides the metric: its caption, references,
language and image (path, and a local file's size and change time). A row whose input changed
since it was scored (another --seed drew other references, a file was replaced) is scored again,
and only scores and errors of the inputs the latest run read count.
  unavailable.json            metrics that could not run (with the metric version and why)
  work/                       the current run's shards (removed when it ends)
"""
from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pandas as pd

from scoring.corpus import DEFAULT_BATCH_ROWS, ENGINES
from scoring.corpus.manifest import CorpusRow, Manifest, read_manifest
from scoring.csv_safe import frame_to_csv
from scoring.fingerprint import score_fingerprint
from scoring.paths import write_atomically

SCORE_COLUMNS = ["id", "model", "metric", "score", "metric_version", "checkpoint_hash", "input"]
ERROR_COLUMNS = ["row", "id", "model", "image", "reason", "input"]
RECORD_COLUMNS = ["batch", "row", "status", "reason", "image", *SCORE_COLUMNS]
TOKENISE_ROWS = 2048  # rows per PTB tokeniser call in the document-frequency pass
URL_TIMEOUT_S = 30
RUN_FILE = "run.json"  # the manifest and the metric versions of the latest run
INPUTS_FILE = "inputs.parquet"  # (model, id, input) of every row the latest run read
UNAVAILABLE_FILE = "unavailable.json"  # metric -> {version, reason}: metrics that could not run


@dataclass(frozen=True)
class MetricPlan:
    """A metric as this run scores it; `version` changes with anything that changes its values."""

    name: str
    version: str
    checkpoint_hash: str


@dataclass
class CorpusPlan:
    """What the score step needs: the scorer settings and the shards of rows still to score."""

    profile: str
    device: str | None
    metrics: list[MetricPlan]
    cider_document_frequency: object | None  # scoring.metrics.coco.CiderDocumentFrequency
    shards: list[Path] = field(default_factory=list)
    total_rows: int = 0
    pending_rows: int = 0
    already_scored: set[tuple] = field(default_factory=set)  # (model, id, metric, version, input) in the output
    unavailable: dict[str, str] = field(default_factory=dict)  # metric -> reason, known from an earlier run

    def scorer_arguments(self, threads: int | None = None) -> dict:
        """Keyword arguments of `ShardScorer` (sent to each Ray actor)."""
        return {"profile": self.profile, "device": self.device, "metrics": self.metrics,
                "cider_document_frequency": self.cider_document_frequency, "threads": threads}


@dataclass
class CorpusReport:
    """What a run did, for the command's closing lines and for callers."""

    out: Path
    engine: str
    total_rows: int
    scored_rows: int  # scored or failed in this run
    skipped_rows: int  # already in the output
    errors: int  # rows in the errors file
    seconds: float
    unavailable: dict[str, str]
    summary: pd.DataFrame


# -- plan ------------------------------------------------------------------------------------
def _metric_version(scorer, name: str, frequencies) -> str:
    """The metric's score fingerprint (`scoring.fingerprint.score_fingerprint`: its checkpoints,
    every setting and, for CIDEr-D, the corpus document frequencies), so any change to what its
    values depend on scores the rows again; also the key a collection stores them under.
    CIDEr-D without frequencies (no Java) cannot score at all; its version only marks that."""
    return score_fingerprint(scorer, name, frequencies) or f"{scorer.profile}:no-document-frequencies"


def _progress_bar(total: int | None, unit: str, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, desc=desc, file=sys.stderr, disable=not enabled, dynamic_ncols=True)


def cider_document_frequency(manifest: Manifest, show_progress: bool = False):
    """CIDEr-D document frequencies over every distinct (image, references) of the manifest,
    counted as the toolkit counts them over the items it scores together: a row the run will
    not score (a problem, an empty caption, a local image that is missing or no image) counts
    for nothing, so broken rows cannot move the scores of the others. (An image given by URL is
    fetched only when scored; one that fails then still counted.)"""
    from scoring.metrics.coco import CiderDocumentFrequency, ptb_tokenize

    frequencies = CiderDocumentFrequency()
    seen: set[bytes] = set()
    chunk: list[list[str]] = []

    def count(chunk: list[list[str]]) -> None:
        tokens = iter(ptb_tokenize([r for refs in chunk for r in refs]))
        for refs in chunk:
            frequencies.add([next(tokens) for _ in refs])

    with _progress_bar(None, "row", "counting CIDEr-D document frequencies", show_progress) as bar:
        for row in read_manifest(manifest):
            bar.update(1)
            if row.problem or not row.references or caption_problem(row.candidate):
                continue
            key = hashlib.sha1("\x1f".join([row.image, *row.references]).encode("utf-8")).digest()
            if key in seen:
                continue
            seen.add(key)
            if "://" not in row.image and not _image_file_usable(row.image):
                continue
            chunk.append(row.references)
            if len(chunk) >= TOKENISE_ROWS:
                count(chunk)
                chunk = []
        if chunk:
            count(chunk)
    return frequencies


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def input_fingerprint(row: CorpusRow) -> str:
    """What a row's scores depend on besides the metric: caption, references, language and image
    (a local file by its size and change time too, so a replaced file counts as new)."""
    image: list = [row.image]
    if "://" not in row.image:
        try:
            stat = Path(row.image).stat()
            image += [stat.st_size, stat.st_mtime_ns]
        except OSError:
            image.append(None)
    text = json.dumps([row.candidate, list(row.references), row.lang, image], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def _completed(out: Path) -> tuple[set[tuple], set[tuple]]:
    """(model, id, metric, metric_version, input) of the scores written so far, and (model, id,
    row, input) of the rows written to the errors parts (input "" in parts written before it was
    recorded: such rows are scored again)."""
    import pyarrow.parquet as pq

    scored: set[tuple] = set()
    for part in sorted((out / "scores").glob("part-*.parquet")):
        wanted = ["model", "id", "metric", "metric_version"]
        table = pq.read_table(part, columns=wanted + (["input"] if "input" in pq.read_schema(part).names else []))
        columns = [table.column(c).to_pylist() for c in wanted]
        inputs = table.column("input").to_pylist() if "input" in table.column_names else [""] * table.num_rows
        scored.update(zip(*columns, inputs))
    failed: set[tuple] = set()
    for part in sorted((out / "errors").glob("part-*.jsonl")):
        for line in part.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            failed.add((record["model"], record["id"], record["row"], record.get("input", "")))
    return scored, failed


def _current_inputs(out: Path) -> set[tuple] | None:
    """(model, id, input) of the rows the latest run read; None for an output written before
    inputs were recorded."""
    path = Path(out) / INPUTS_FILE
    if not path.is_file():
        return None
    frame = pd.read_parquet(path)
    return set(zip(frame["model"], frame["id"], frame["input"]))


class _ShardWriter:
    """Writes the pending rows of each batch to work/shard-NNNNNN.parquet as the plan streams."""

    def __init__(self, folder: Path, batch_rows: int):
        self.folder, self.batch_rows = folder, batch_rows
        self.rows: list[dict] = []
        self.batch = -1
        self.shards: list[Path] = []

    def add(self, row: CorpusRow, metrics: list[str], fingerprint: str) -> None:
        """Queue `row`, to be scored with `metrics` (the ones its output lacks for its input)."""
        batch = (row.row - 1) // self.batch_rows
        if batch != self.batch:
            self.flush()
            self.batch = batch
        self.rows.append({**asdict(row), "metrics": metrics, "input": fingerprint})

    def flush(self) -> None:
        if not self.rows:
            return
        frame = pd.DataFrame(self.rows)
        frame.insert(0, "batch", self.batch)
        path = self.folder / f"shard-{self.batch:06d}.parquet"
        frame.to_parquet(path, index=False)
        self.shards.append(path)
        self.rows = []


def plan_corpus(manifest: Manifest, out: Path, *, profile: str | None = None, metrics: Sequence[str] | None = None,
                device: str | None = None, batch_rows: int = DEFAULT_BATCH_ROWS,
                show_progress: bool = False) -> CorpusPlan:
    """Resolve the metrics and their versions, count CIDEr-D document frequencies when asked,
    and write the work shards of the rows the output lacks."""
    from scoring.api import Scorer

    if batch_rows < 1:
        raise ValueError("batch size must be at least 1")
    scorer = Scorer(profile, device="cpu")  # registry and fingerprints only; nothing loads here
    names = scorer.metric_names() if not metrics else [scorer.canonical_name(m) for m in metrics]
    names = [n for n in scorer.metric_names() if n in set(names)]
    if not names:
        raise ValueError("no metric to score")
    frequencies = None
    if any(scorer.registry.metrics[n].family == "cider" for n in names) and shutil.which("java"):
        frequencies = cider_document_frequency(manifest, show_progress)
    plans = []
    for name in names:
        version = _metric_version(scorer, name, frequencies)
        plans.append(MetricPlan(name, version, version))

    out.mkdir(parents=True, exist_ok=True)
    for folder in ("scores", "errors"):
        (out / folder).mkdir(exist_ok=True)
        for leftover in (out / folder).glob("*.tmp"):  # a part being written when a run was killed
            leftover.unlink()
    work = out / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    run = {"manifest": manifest.describe(), "profile": scorer.profile, "metrics": [asdict(m) for m in plans]}
    write_atomically(out / RUN_FILE, lambda p: p.write_text(json.dumps(run, indent=1), encoding="utf-8"))
    scored, failed = _completed(out)
    # A metric an earlier run found unavailable at this version does not keep rows pending.
    known = _read_json(out / UNAVAILABLE_FILE)
    unavailable = {m.name: known[m.name]["reason"] for m in plans if known.get(m.name, {}).get("version") == m.version}
    counted = [m for m in plans if m.name not in unavailable]
    plan = CorpusPlan(scorer.profile, device, plans, frequencies, already_scored=scored, unavailable=unavailable)
    writer = _ShardWriter(work, batch_rows)
    seen: set[tuple[str, str]] = set()
    inputs: dict[str, list[str]] = {"model": [], "id": [], "input": []}
    with _progress_bar(None, "row", "planning", show_progress) as bar:
        for row in read_manifest(manifest):
            bar.update(1)
            plan.total_rows += 1
            fingerprint = input_fingerprint(row)
            for key, value in (("model", row.model), ("id", row.id), ("input", fingerprint)):
                inputs[key].append(value)
            if (row.model, row.id, row.row, fingerprint) in failed:
                continue
            if (row.model, row.id) in seen and not row.problem:
                row.problem = f"duplicate id {row.id!r}" + (f" for model {row.model!r}" if row.model else "")
            seen.add((row.model, row.id))
            missing = [m.name for m in counted if (row.model, row.id, m.name, m.version, fingerprint) not in scored]
            if not row.problem and not missing:
                continue
            writer.add(row, missing, fingerprint)
            plan.pending_rows += 1
    writer.flush()
    plan.shards = writer.shards
    write_atomically(out / INPUTS_FILE, lambda p: pd.DataFrame(inputs, dtype="string").to_parquet(p, index=False))
    return plan


# -- score -----------------------------------------------------------------------------------
def caption_problem(candidate) -> str | None:
    """Why a row's caption cannot be scored (the scoring and the document frequencies share it)."""
    return None if str(candidate or "").strip() else "empty caption"


def _image_bytes(image: str) -> bytes:
    if "://" in image:
        with urllib.request.urlopen(image, timeout=URL_TIMEOUT_S) as response:  # noqa: S310 (the user's own corpus)
            return response.read()
    return Path(image).read_bytes()


def _image_data(image: str) -> tuple[bytes | None, str | None]:
    """(bytes, None) for a file or URL whose image header reads (no pixel is decoded here: the
    scorer decodes once), else (None, reason)."""
    from scoring.images import ImageDecodeError, open_checked

    try:
        data = _image_bytes(image)
    except FileNotFoundError:
        return None, "image not found"
    except OSError as exc:  # URLError, HTTPError, permissions, a folder
        return None, f"cannot read image: {getattr(exc, 'reason', None) or exc.strerror or type(exc).__name__}"
    except ValueError as exc:  # a malformed URL
        return None, f"cannot read image: {exc}"
    try:
        open_checked(data, _image_name(image))
    except ImageDecodeError as exc:
        return None, str(exc)
    return data, None


def _image_file_usable(path: str) -> bool:
    """Whether a local image would pass `_image_data`'s checks; its header alone is read."""
    from scoring.images import ImageDecodeError, check_image_file

    try:
        check_image_file(path, _image_name(path))
    except (OSError, ImageDecodeError):  # ImageDecodeError is an OSError; named for the reader
        return False
    return True


def _image_name(image: str) -> str:
    return image.rstrip("/").rsplit("/", 1)[-1] or image


class ShardScorer:
    """Scores work shards with the Scorer API. The same class runs in this process and, as a
    callable class of `Dataset.map_batches`, in every Ray actor."""

    def __init__(self, profile: str, device: str | None, metrics: list[MetricPlan],
                 cider_document_frequency=None, threads: int | None = None):
        from scoring.api import Scorer

        self.scorer = Scorer(profile, device, threads=threads)
        self.metrics = metrics
        self.cider_document_frequency = cider_document_frequency

    def __call__(self, batch: dict) -> pd.DataFrame:
        """Ray Data entry: a batch of shard paths in, their result records out."""
        return pd.concat([self.score_shard(Path(p)) for p in batch["shard"]], ignore_index=True)

    def score_shard(self, path: Path) -> pd.DataFrame:
        """Result records of one shard: status ok (a score), error (a row, with its reason) or
        unavailable (a metric that cannot run here, with its reason)."""
        from scoring.api import ScoreItem

        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
        records: list[dict] = []
        items, scored_rows = [], []
        for row in rows:
            reason, data = row["problem"], None
            reason = reason or caption_problem(row["candidate"])
            if not reason:
                data, reason = _image_data(row["image"])
            if reason:
                records.append({**_record(row, "error"), "reason": reason})
                continue
            items.append(ScoreItem(image=data, candidate=row["candidate"], references=list(row["references"]),
                                   lang=row["lang"], image_id=row["id"]))
            scored_rows.append(row)
        if items:
            # Cached embeddings were computed within other batches; batched inference is not
            # bit-exact across batch compositions, and every engine must give the same scores.
            self.scorer.clear_caches()
            # The metrics some row of the shard lacks: all of them, unless one was added since a
            # run that wrote the others (or an earlier run found one unavailable).
            wanted = {name for row in scored_rows for name in row["metrics"]}
            versions = {m.name: m for m in self.metrics if m.name in wanted}
            results, items, scored_rows = self._score(items, scored_rows, list(versions), records)
            for name, result in results.items():
                plan = versions[name]
                if result.unavailable:
                    records.append({"batch": rows[0]["batch"], "row": -1, "status": "unavailable",
                                    "reason": result.unavailable, "metric": name})
                    continue
                for row, value in zip(scored_rows, result.values):
                    records.append({**_record(row, "ok"), "metric": name, "score": value,
                                    "metric_version": plan.version, "checkpoint_hash": plan.checkpoint_hash})
        frame = pd.DataFrame(records, columns=RECORD_COLUMNS)
        frame["score"] = frame["score"].astype("float64")
        return frame

    def _score(self, items: list, rows: list[dict], metrics: list[str], records: list[dict]):
        """Scorer results for `items`; when an image's pixels turn out damaged (its header
        read), each image is decoded alone to find the bad rows, which become error records,
        and the others are scored without them."""
        from scoring.images import ImageDecodeError, decode_image

        try:
            return self.scorer.score(items, metrics, cider_document_frequency=self.cider_document_frequency), items, rows
        except ImageDecodeError:
            kept_items, kept_rows = [], []
            for item, row in zip(items, rows):
                try:
                    decode_image(item.image, _image_name(row["image"]))
                except ImageDecodeError as exc:
                    records.append({**_record(row, "error"), "reason": str(exc)})
                    continue
                kept_items.append(item)
                kept_rows.append(row)
            if not kept_items:
                return {}, kept_items, kept_rows
            self.scorer.clear_caches()
            results = self.scorer.score(kept_items, metrics, cider_document_frequency=self.cider_document_frequency)
            return results, kept_items, kept_rows


def _record(row: dict, status: str) -> dict:
    return {"batch": row["batch"], "row": row["row"], "status": status, "image": row["image"],
            "id": row["id"], "model": row["model"], "input": row["input"]}


# -- write -----------------------------------------------------------------------------------
def _part_path(folder: Path, batch: int, suffix: str) -> Path:
    """part-NNNNNN for batch N; a second part of one batch (the manifest or the metrics
    changed since the first) gets -1, -2, ..."""
    path, again = folder / f"part-{batch:06d}{suffix}", 0
    while path.exists():
        again += 1
        path = folder / f"part-{batch:06d}-{again}{suffix}"
    return path


def _scores_table(scores: pd.DataFrame):
    """The records as an Arrow table of one fixed schema, whatever frame types an engine
    returned, so every engine writes byte-identical parts."""
    import pyarrow as pa

    columns = {c: scores[c].tolist() for c in SCORE_COLUMNS}
    columns["score"] = [None if pd.isna(v) else float(v) for v in columns["score"]]  # None, NaN or pd.NA (Ray)
    return pa.Table.from_pydict(columns, schema=_scores_schema())


def _scores_schema():
    import pyarrow as pa

    return pa.schema([(c, pa.float64() if c == "score" else pa.string()) for c in SCORE_COLUMNS])


class ResultWriter:
    """Writes result records as they arrive: one scores part and one errors part per batch."""

    def __init__(self, out: Path, already_scored: set[tuple], unavailable: dict[str, str]):
        self.out = out
        self.already_scored = already_scored
        self.unavailable = dict(unavailable)

    def write(self, records: pd.DataFrame) -> int:
        """Write the records of one or more batches; returns how many rows they covered."""
        import pyarrow.parquet as pq

        rows = 0
        for batch, group in records.groupby("batch", sort=True):
            self.unavailable.update(zip(group.loc[group["status"] == "unavailable", "metric"],
                                        group.loc[group["status"] == "unavailable", "reason"]))
            errors = group[group["status"] == "error"].sort_values("row")
            scores = group[group["status"] == "ok"]
            fresh = [key not in self.already_scored for key in
                     zip(scores["model"], scores["id"], scores["metric"], scores["metric_version"], scores["input"])]
            scores = scores[fresh]
            if len(errors):
                lines = "".join(
                    json.dumps({"row": int(r), "id": str(i), "model": str(m), "image": str(p), "reason": str(why),
                                "input": str(f)}, ensure_ascii=False) + "\n"
                    for r, i, m, p, why, f in zip(*(errors[c] for c in ERROR_COLUMNS)))
                write_atomically(_part_path(self.out / "errors", int(batch), ".jsonl"),
                              lambda p: p.write_text(lines, encoding="utf-8"))
            if len(scores):
                table = _scores_table(scores)
                write_atomically(_part_path(self.out / "scores", int(batch), ".parquet"), lambda p: pq.write_table(table, p))
            rows += group.loc[group["status"] != "unavailable", "row"].nunique()
        return rows


def read_scores(out: Path) -> pd.DataFrame:
    """Every score written to `out` (all parts), in part order."""
    parts = sorted((Path(out) / "scores").glob("part-*.parquet"))
    if not parts:
        return pd.DataFrame(columns=SCORE_COLUMNS)
    return pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)


def current_scores(out: Path) -> pd.DataFrame:
    """The scores of the latest run's metric versions and rows' inputs (scores of older versions
    or of inputs that changed since stay in the parts)."""
    run = _read_json(Path(out) / RUN_FILE)
    if not run:
        raise FileNotFoundError(f"{out} holds no score-corpus run ({RUN_FILE} missing)")
    scores = read_scores(out)
    current = {(m["name"], m["version"]) for m in run["metrics"]}
    keep = np.array([(n, v) in current for n, v in zip(scores["metric"], scores["metric_version"])], dtype=bool)
    inputs = _current_inputs(out)
    if inputs is not None:
        given = scores["input"] if "input" in scores else pd.Series([""] * len(scores))
        keep &= np.array([key in inputs for key in zip(scores["model"], scores["id"], given)], dtype=bool)
    return scores[keep].reset_index(drop=True)


def run_manifest(out: Path) -> Manifest:
    """The manifest the latest run in `out` read."""
    run = _read_json(Path(out) / RUN_FILE)
    if not run:
        raise FileNotFoundError(f"{out} holds no score-corpus run ({RUN_FILE} missing)")
    return Manifest.from_description(run["manifest"])


def read_errors(out: Path) -> list[dict]:
    """The rows that could not be scored, of the inputs the latest run read (a row fixed since,
    e.g. its image file replaced, is no longer among them)."""
    lines = []
    for part in sorted((Path(out) / "errors").glob("part-*.jsonl")):
        lines += [json.loads(line) for line in part.read_text(encoding="utf-8").splitlines()]
    inputs = _current_inputs(out)
    if inputs is not None:
        lines = [e for e in lines if (e["model"], e["id"], e.get("input", "")) in inputs]
    return lines


def summarize(out: Path, metrics: Sequence[MetricPlan], n_boot: int = 1000) -> pd.DataFrame:
    """Per model and metric over the whole output (the run's metric versions): rows scored,
    rows where the metric did not apply (no references), mean and its 95 % bootstrap interval."""
    from scoring.analysis.correlation import mean_estimate

    scores = current_scores(out)
    order = {m.name: i for i, m in enumerate(metrics)}
    rows = []
    for (model, metric), group in scores.groupby(["model", "metric"], sort=False):
        values = group["score"].to_numpy(dtype=np.float64)
        estimate = mean_estimate(values, n_boot=n_boot)
        rows.append({"model": model, "metric": metric, "n": estimate.n, "not_applicable": int(np.isnan(values).sum()),
                     "mean": estimate.value, "ci_low": estimate.low, "ci_high": estimate.high})
    frame = pd.DataFrame(rows, columns=["model", "metric", "n", "not_applicable", "mean", "ci_low", "ci_high"])
    frame["_order"] = frame["metric"].map(order)
    return frame.sort_values(["model", "_order"]).drop(columns="_order").reset_index(drop=True)


def _finish(out: Path, plan: CorpusPlan, writer: ResultWriter, n_boot: int) -> tuple[pd.DataFrame, int]:
    errors = read_errors(out)
    write_atomically(out / "errors.jsonl", lambda p: p.write_text(
        "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in errors), encoding="utf-8"))
    summary = summarize(out, plan.metrics, n_boot)
    write_atomically(out / "summary.csv", lambda p: frame_to_csv(summary, p))
    payload = {
        "profile": plan.profile, "rows": plan.total_rows, "errors": len(errors),
        "metrics": [asdict(m) for m in plan.metrics], "unavailable": writer.unavailable,
        "summary": json.loads(summary.to_json(orient="records")),
    }
    write_atomically(out / "summary.json", lambda p: p.write_text(json.dumps(payload, indent=1), encoding="utf-8"))
    versions = {m.name: m.version for m in plan.metrics}
    record = {**_read_json(out / UNAVAILABLE_FILE),
              **{name: {"version": versions[name], "reason": why} for name, why in writer.unavailable.items()}}
    write_atomically(out / UNAVAILABLE_FILE, lambda p: p.write_text(json.dumps(record, indent=1), encoding="utf-8"))
    shutil.rmtree(out / "work", ignore_errors=True)
    return summary, len(errors)


# -- engines ---------------------------------------------------------------------------------
def ray_available() -> bool:
    try:
        import ray.data  # noqa: F401
    except ImportError:
        return False
    return True


def _local_results(plan: CorpusPlan, threads: int | None) -> Iterator[pd.DataFrame]:
    scorer = ShardScorer(**plan.scorer_arguments(threads))
    for shard in plan.shards:
        yield scorer.score_shard(shard)


def score_corpus(manifest: Manifest, out, *, profile: str | None = None, metrics: Sequence[str] | None = None,
                 device: str | None = None, engine: str = "auto", ray_address: str | None = None,
                 actors: int | None = None, threads: int | None = None, batch_rows: int = DEFAULT_BATCH_ROWS,
                 n_boot: int = 1000, show_progress: bool = False) -> CorpusReport:
    """Score every row of `manifest` into `out`, skipping what an earlier run already wrote.

    engine: `local` scores in this process; `ray` runs a pool of `actors` Ray actors (a local
    Ray unless `ray_address` names a cluster); `auto` is `ray` when Ray is installed.
    threads: torch threads per scorer (default: torch's choice).
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
    if engine == "auto":
        engine = "ray" if ray_available() else "local"
    if engine == "ray" and not ray_available():
        raise ValueError("the ray engine needs Ray: pip install 'caplens[ray]'")
    if engine == "local" and (ray_address or actors not in (None, 1)):
        raise ValueError("--ray-address and --actors go with the ray engine")
    if actors is not None and actors < 1:
        raise ValueError("--actors must be at least 1")
    started = time.perf_counter()
    out = Path(out)
    plan = plan_corpus(manifest, out, profile=profile, metrics=metrics, device=device, batch_rows=batch_rows,
                       show_progress=show_progress)
    writer = ResultWriter(out, plan.already_scored, plan.unavailable)
    if engine == "ray":
        from scoring.corpus.ray_engine import ray_results

        results = ray_results(plan, address=ray_address, actors=actors, threads=threads)
    else:
        results = _local_results(plan, threads)
    done = 0
    with _progress_bar(plan.pending_rows, "row", "scoring", show_progress) as bar:
        for records in results:
            covered = writer.write(records)
            done += covered
            bar.update(covered)
    summary, errors = _finish(out, plan, writer, n_boot)
    return CorpusReport(out, engine, plan.total_rows, done, plan.total_rows - plan.pending_rows, errors,
                        time.perf_counter() - started, writer.unavailable, summary)
