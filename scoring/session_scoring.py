"""Scoring what a person typed or uploaded: rows of (image, candidate, references), each
image with its own candidates and references, with every chosen metric, remembering scored
pairs so that editing one caption sends only that caption to the scorer.

The memory is a plain dict the caller keeps per session (the app's `gr.State`), keyed by
(image hash, caption, references, language); the scorer's own embedding cache then encodes
only the new text. CIDEr-D values also depend on the document frequencies they were
computed with, so they are remembered per document-frequency source.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, Sequence

import pandas as pd

from scoring.api import ScoreItem
from scoring.fingerprint import content_fingerprint
from scoring.language_id import AUTO, UNKNOWN, resolve_language
from scoring.metrics.base import one_word_note
from scoring.paths import check_caption_length

MAX_CACHED_ROWS = 2000
TABLE_COLUMNS = ["image", "candidate", "references"]
REFERENCE_SEPARATOR = " | "
BATCH = "this batch"
EXAMPLES = "the examples"


class DecodedImage(Protocol):
    """An uploaded image: decoded pixels, the raw bytes (its identity) and a display name."""

    image: object
    data: bytes
    name: str


@dataclass
class ScoreRow:
    """One row of the table: the image's name ("" = every image given, or none), the
    candidate caption and that image's references."""

    image: str
    candidate: str
    references: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class DocumentFrequencies:
    """CIDEr-D document frequencies counted elsewhere (e.g. over a collection's references):
    `frequencies` is a `scoring.metrics.coco.CiderDocumentFrequency`, `label` says where from."""

    label: str
    frequencies: object


@dataclass
class ScoreRequest:
    """One scoring request as a front end receives it. `document_frequencies`: CIDEr-D's
    IDF source; None counts it over the distinct reference sets of this request's rows."""

    images: list[DecodedImage]
    rows: list[ScoreRow]
    lang: str = AUTO
    metrics: list[str] | None = None
    document_frequencies: DocumentFrequencies | None = None

    @classmethod
    def grid(cls, images: list[DecodedImage], captions: Sequence[str], references: Sequence[str], lang: str = AUTO,
             metrics: list[str] | None = None) -> "ScoreRequest":
        """Every caption for every image, one reference set for all (the /score API's form)."""
        return cls(images, [ScoreRow("", caption, list(references)) for caption in captions], lang, metrics)


@dataclass
class ScoreOutcome:
    """`frame`: one row per scored (image, caption) (#, image, caption, lang, one column per
    metric, "truncated by"); `availability`: per metric its backbone and status (with why a
    value is not meaningful where it is not); `messages`: rows that were left out and why."""

    frame: pd.DataFrame
    metric_columns: list[str]
    availability: list[dict]
    messages: list[str] = field(default_factory=list)
    scored_now: int = 0
    thumbnails: dict[str, str] = field(default_factory=dict)  # image name -> its picture (a data URI)
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)  # metric -> its attainable range


# -- the table ---------------------------------------------------------------------------------


def split_references(text) -> list[str]:
    """A references cell: a JSON list, or references separated by " | " (or new lines)."""
    if isinstance(text, (list, tuple)):
        return [str(r).strip() for r in text if str(r).strip()]
    text = "" if text is None or text != text else str(text)  # NaN from an empty Dataframe cell
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, list) and all(isinstance(r, str) for r in value):
            return [r.strip() for r in value if r.strip()]
    return [part.strip() for line in stripped.splitlines() for part in line.split("|") if part.strip()]


def table_rows(records: Sequence[Sequence] | pd.DataFrame | None) -> list[ScoreRow]:
    """Rows of the editable table (image, candidate, references); rows without a candidate
    are left out (a table being typed into has empty rows)."""
    if records is None:
        return []
    if isinstance(records, pd.DataFrame):
        records = records.iloc[:, :3].values.tolist()  # by position: the app's headers say more
    rows = []
    for record in records:
        cells = [("" if c is None or c != c else str(c)) for c in list(record)[:3]] + [""] * (3 - len(record))
        image, candidate, references = cells[:3]
        if candidate.strip():
            rows.append(ScoreRow(image.strip(), candidate.strip(), split_references(references)))
    return rows


def table_records(rows: Sequence[ScoreRow]) -> list[list[str]]:
    """The table's cells for `rows` (references joined with " | ")."""
    return [[row.image, row.candidate, REFERENCE_SEPARATOR.join(row.references)] for row in rows]


def rows_from_files(paths: Sequence[str | Path]) -> tuple[list[list[str]], list[str]]:
    """The table's cells read from uploaded rows files (CSV, JSONL, Parquet, COCO results +
    captions JSON, or the CLIPScore JSON pair) by `scoring.corpus.manifest.read_score_rows`,
    and a message per row that cannot be used. ValueError when the files cannot be read. A row
    without an image means every image, as an empty image cell of the table does."""
    from scoring.corpus.manifest import read_score_rows

    rows, messages = [], []
    for row in read_score_rows(paths, image_optional=True):
        if row.problem:
            messages.append(f"row {row.row}: {row.problem}")
        elif not row.candidate.strip():
            messages.append(f"row {row.row}: no candidate")
        else:
            rows.append(ScoreRow(row.image, row.candidate, row.references))
    return table_records(rows), messages


def image_thumbnails(images: Sequence[DecodedImage]) -> dict[str, str]:
    """Each image's picture (`scoring.images.thumbnail_data_uri`) by its name."""
    from scoring.images import thumbnail_data_uri

    return {image.name: thumbnail_data_uri(image.image) for image in images}


def row_thumbnails(records: Sequence[Sequence] | pd.DataFrame | None, images: Sequence[DecodedImage]) -> list[str]:
    """The picture of each row of the table (as `table_rows` reads it, empty rows included):
    its image's thumbnail by name; a blank image cell shows the image when exactly one is
    given; "" where there is none."""
    if records is None:
        return []
    if isinstance(records, pd.DataFrame):
        records = records.iloc[:, :1].values.tolist()
    pictures = image_thumbnails(images)
    out = []
    for record in records:
        name = list(record)[0] if len(record) else ""
        name = "" if name is None or name != name else str(name).strip()
        image = match_image(name, images) if name else (images[0] if len(images) == 1 else None)
        out.append(pictures[image.name] if image is not None else "")
    return out


def match_image(name: str, images: Sequence[DecodedImage]) -> DecodedImage | None:
    """The image called `name`: the same file name, else the same name without its extension
    (COCO and CLIPScore ids name images without one)."""
    for image in images:
        if image.name == name:
            return image
    stem = Path(name).stem if Path(name).suffix else name
    found = [image for image in images if Path(image.name).stem == stem]
    return found[0] if len(found) == 1 else None


def _resolve(request: ScoreRequest) -> tuple[list[tuple[DecodedImage | None, ScoreRow]], list[str]]:
    """Each row with its image; a blank image cell means every image (or none)."""
    pairs, messages = [], []
    for number, row in enumerate(request.rows, start=1):
        if not row.image:
            pairs.extend((image, row) for image in (list(request.images) or [None]))
            continue
        image = match_image(row.image, request.images)
        if image is None:
            names = ", ".join(i.name for i in request.images) or "none that could be read"
            messages.append(f"row {number}: no image named {row.image!r} (images: {names}); row left out.")
            continue
        pairs.append((image, row))
    return pairs, messages


# -- scoring -----------------------------------------------------------------------------------


def _image_key(image: DecodedImage | None) -> str:
    return "" if image is None else content_fingerprint(image.data)


def batch_document_frequencies(reference_sets) -> DocumentFrequencies | None:
    """CIDEr-D document frequencies counted over `reference_sets` (each image's references
    once), labelled "this batch"; None without Java (CIDEr-D then says it is unavailable)."""
    from scoring.metrics.base import MetricUnavailable
    from scoring.metrics.coco import reference_document_frequency

    try:
        return DocumentFrequencies(BATCH, reference_document_frequency([list(refs) for refs in reference_sets]))
    except MetricUnavailable:
        return None


def example_document_frequencies(examples: Sequence[Sequence[Sequence[str]]]) -> DocumentFrequencies | None:
    """CIDEr-D document frequencies for ready-made examples: counted over the reference sets of
    every image of every example (each image once), so that one example of one image still
    scores CIDEr-D against several images' references. `examples`: each example's table
    cells (image, candidate, references). Labelled EXAMPLES; None without Java."""
    sets = {}
    for records in examples:
        for row in table_rows(records):
            if row.references:
                sets.setdefault((row.image, tuple(row.references)), row.references)
    found = batch_document_frequencies(list(sets.values()))
    return None if found is None else DocumentFrequencies(f"{EXAMPLES}' references", found.frequencies)


def document_frequency_note(source: DocumentFrequencies) -> str:
    """Where CIDEr-D's document frequencies came from and, if so, why its values mean nothing
    ("not meaningful: ..."), for its status."""
    from scoring.metrics.coco import document_frequency_problem

    frequencies = source.frequencies
    problem = document_frequency_problem(frequencies)
    where = f"document frequencies from {source.label}: {frequencies.reference_sets} reference set(s)"
    return f"{problem} ({where})" if problem else where


def _frequencies(request: ScoreRequest, pairs, cider_names: list[str]) -> tuple[object | None, str, str | None]:
    """CIDEr-D's document frequencies, their cache tag and, if any, why they mean nothing."""
    if not cider_names:
        return None, "", None
    source = request.document_frequencies
    if source is None:
        sets = list(dict.fromkeys((_image_key(image), tuple(row.references)) for image, row in pairs if row.references))
        source = batch_document_frequencies([refs for _, refs in sets])
        if source is None:
            return None, "", None  # no Java: CIDEr-D says it is unavailable when it runs
    frequencies, label = source.frequencies, source.label
    tag = f"{label}:{frequencies.reference_sets}:{len(frequencies.counts)}:{hash(frozenset(frequencies.counts.items()))}"
    return frequencies, tag, document_frequency_note(source)


def score_request(scorer, request: ScoreRequest, cache: dict | None = None) -> ScoreOutcome:
    """Score every row of `request` (no image: text metrics only), reusing `cache` for pairs
    already scored. Unknown metric names raise LookupError."""
    for number, row in enumerate(request.rows, start=1):
        where = f"caption {number}" if len(request.rows) > 1 else "caption"
        check_caption_length(row.candidate, where)
        for reference in row.references:
            check_caption_length(reference, f"a reference of {where}")
    cache = cache if cache is not None else {}
    names = [scorer.canonical_name(m) for m in request.metrics] if request.metrics else scorer.metric_names()
    meta: dict[str, dict] = cache.setdefault("_metrics", {})
    rows_cache: dict = cache.setdefault("_rows", {})
    resolved, messages = _resolve(request)
    if not resolved:  # scoring nothing would show every metric "available" over an empty table
        raise ValueError("\n".join([*messages, "Nothing to score: every row names an image that is not here."]))
    cider_names = [n for n in names if scorer.registry.metrics[n].family == "cider"]
    frequencies, tag, cider_note = _frequencies(request, resolved, cider_names)
    slot = {name: f"{name}@{tag}" if name in cider_names else name for name in names}

    pairs = []
    for image, row in resolved:
        lang = resolve_language(request.lang, row.candidate)
        refs = tuple(row.references)
        pairs.append((image, row.candidate, refs, lang, (_image_key(image), row.candidate, refs, lang)))

    # Each key once, and each missing metric scored for it.
    unique: dict = {}
    for img, cap, refs, lang, key in pairs:
        if not set(slot.values()) <= set(rows_cache.get(key, {})):
            unique.setdefault(key, (img, cap, refs, lang))
    if unique:
        items = [ScoreItem(image=None if img is None else img.data, candidate=cap, references=list(refs), lang=lang,
                           image_id=None if img is None else img.name)
                 for img, cap, refs, lang in unique.values()]
        extra = {"cider_document_frequency": frequencies} if frequencies is not None else {}
        results = scorer.score(items, names, **extra)
        for position, key in enumerate(unique):
            row = rows_cache.setdefault(key, {})
            for name, result in results.items():
                row[slot[name]] = (result.values[position],
                                   bool(result.truncated[position]) if result.truncated else False)
        for name, result in results.items():
            meta[name] = metric_meta(scorer, name, result)
        for stale in list(rows_cache)[: max(0, len(rows_cache) - MAX_CACHED_ROWS)]:
            del rows_cache[stale]

    table_rows_out = []
    for number, (image, caption, refs, lang, key) in enumerate(pairs, start=1):
        scored = rows_cache.get(key, {})
        row = {"#": number, "image": "" if image is None else image.name, "caption": caption, "lang": lang}
        for name in names:
            row[name] = scored.get(slot[name], (None, False))[0]
        row["truncated by"] = ", ".join(n for n in names if scored.get(slot[n], (None, False))[1])
        row[HAS_REFERENCES] = bool(refs)  # not a column of the frame: read by the status notes
        table_rows_out.append(row)
    frame = pd.DataFrame(table_rows_out, columns=["#", "image", "caption", "lang", *names, "truncated by"])
    with_refs = any(refs for _, _, refs, _, _ in pairs)
    with_image = any(image is not None for image, *_ in pairs)
    availability = metric_availability(names, meta, table_rows_out, with_refs, with_image,
                                       {name: cider_note for name in cider_names if cider_note})
    return ScoreOutcome(frame=frame, metric_columns=names, availability=availability, messages=messages,
                        scored_now=len(unique), thumbnails=image_thumbnails(request.images),
                        ranges={name: tuple(scorer.info(name).range) for name in names})


def metric_meta(scorer, name: str, result) -> dict:
    """What `metric_availability` reads of one metric's result: its backbone, why it could not
    run, and which inputs it needs."""
    info = scorer.info(name)
    return {"backbone": result.backbone, "unavailable": result.unavailable,
            "needs_image": info.needs_image, "needs_references": info.needs_references,
            "languages": info.languages, "one_word": info.one_word_languages,
            "clips_at_zero": scorer.registry.metrics[name].family in CLIPPED_FAMILIES}


# Families whose formula is w · max(cos, 0) (RefCLIP-S: a harmonic mean with such a term): a
# value of exactly 0 there is a negative cosine, which a user should not read as "no signal".
CLIPPED_FAMILIES = ("clip-s", "refclip-s", "mcs", "specs")


HAS_REFERENCES = "_has_references"


def _rows_named(numbers: list) -> str:
    shown = ", ".join(f"#{n}" for n in numbers[:5])
    return shown + (f" and {len(numbers) - 5} more" if len(numbers) > 5 else "")


def _value_notes(name: str, info: dict, rows: list[dict]) -> list[str]:
    """What a user should know before reading a metric's values over these rows: rows it has no
    value for because they have no references (each row carries its own), captions in a language
    it was not made for, and scores clipped to 0."""
    has_value = [row.get(name) is not None and row.get(name) == row.get(name) for row in rows]  # NaN: none
    scored = [row for row, value in zip(rows, has_value) if value]
    notes = []
    if info.get("needs_references"):
        bare = [row.get("#", k + 1) for k, (row, value) in enumerate(zip(rows, has_value))
                if row.get(HAS_REFERENCES) is False and not value]
        if bare:
            notes.append(f"no value for {_rows_named(bare)}: no references in that row (each row takes its own)")
    made_for = info.get("languages")
    others = [row["lang"] for row in scored if made_for and row.get("lang") and row["lang"] not in made_for]
    if others:
        named = [f"{lang} (no language: no letters to tell it from)" if lang == UNKNOWN else lang
                 for lang in sorted(set(others))]
        notes.append(f"made for {', '.join(made_for)}: {len(others)} of {len(scored)} caption(s) are in "
                     f"{', '.join(named)}")
    unspaced = sorted({row["lang"] for row in scored if row.get("lang") in info.get("one_word", ())})
    notes.extend(one_word_note(lang) for lang in unspaced)
    zeros = sum(1 for row in scored if row[name] == 0.0) if info.get("clips_at_zero") else 0
    if zeros:
        notes.append(f"{zeros} of {len(scored)} score(s) are 0: a negative cosine is clipped to 0")
    return notes


def metric_availability(names, meta: dict, rows: list[dict], with_references: bool, with_image: bool = True,
                        notes: dict[str, str] | None = None) -> list[dict]:
    """Per metric: its backbone and "available", "unavailable: <reason>", or which of its own
    inputs these rows lack (an image, references, or both) when it scored none of them; `notes`
    (e.g. CIDEr-D's document-frequency note) are added to an available metric's status, and so
    are captions in a language the metric was not made for (rows with a "lang"), captions it reads
    as one word, and scores clipped to 0. The one status rule of the Score tab, the /score API and
    the Perturbation lab."""
    notes = notes or {}
    availability = []
    for name in names:
        info = meta.get(name, {})
        reason = info.get("unavailable")
        status = f"unavailable: {reason}" if reason else "available"
        if not reason and rows and all(row.get(name) is None or row.get(name) != row.get(name) for row in rows):
            lacking = [what for what, needed, given in (("an image", info.get("needs_image", True), with_image),
                                                        ("references", info.get("needs_references", True),
                                                         with_references)) if needed and not given]
            needs = " and ".join(lacking) or "an image or references"
            status = f"available (needs {needs} for these rows)"
        elif status == "available":
            said = ([notes[name]] if notes.get(name) else []) + _value_notes(name, info, rows)
            if said:
                status = "available; " + "; ".join(said)
        availability.append({"metric": name, "backbone": info.get("backbone", ""), "status": status})
    return availability


def missing_input_messages(availability: list[dict]) -> list[str]:
    """One line per kind of input the rows lack, naming the metrics that wait for it."""
    waiting: dict[str, list[str]] = {}
    for entry in availability:
        status = entry["status"]
        if status.startswith("available (needs "):
            waiting.setdefault(status[len("available (needs "):-len(" for these rows)")], []).append(entry["metric"])
    return [f"{', '.join(metrics)}: no value, needs {needs} (none given)." for needs, metrics in waiting.items()]
