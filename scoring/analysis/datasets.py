"""Loaders for public human-judgment sets, in the file formats they are published in.

Users download the files themselves; every loader takes local paths and fetches nothing.
Each returns a tidy pandas DataFrame:

Rating sets (Flickr8k-Expert, Flickr8k-CF, Composite, CapEval1k, M-CapEval1k, Polaris, Nebula,
LongCap-Arena), one row per
(caption, rating): `collection`, `lang`, `image_id`, `image_path`, `item_id` (stable id of
the image-caption pair; several ratings of one caption share it), `candidate`,
`references` (list of str), `human`, `rater`, plus set-specific columns.

Pair sets: Pascal-50S (`pair_id`, `image_id`, `caption_a`, `caption_b`, `category`,
`votes_a`, `votes_b`, `references`) and FOIL (`pair_id`, `image_id`, `image_path`,
`correct`, `foil`, `target_word`, `foil_word`, `references`).

Retrieval: COCO-SM meta files (`lang`, `image_index`, `filename`, `caption_index`,
`caption`).
"""
from __future__ import annotations

import csv
import hashlib
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from .benchmark_names import LONGCAP_ARENA_ASPECTS, LONGCAP_ARENA_SPLITS

RATING_COLUMNS = ["collection", "lang", "image_id", "image_path", "item_id", "candidate", "references", "human", "rater"]


def make_item_id(image_id: str, caption: str) -> str:
    """Stable 16-hex id of an (image, caption) pair, used to join ratings with metric scores."""
    digest = hashlib.sha1(f"{image_id}\n{caption}".encode("utf-8")).hexdigest()
    return digest[:16]


def _normalise_space(text: str) -> str:
    return " ".join(str(text).split())


def _path(path, what: str) -> Path:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{what} not found: {path}")
    return path


def _read_json(path: Path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None


def _ratings_frame(rows: list[dict], extra: Sequence[str] = ()) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=[*RATING_COLUMNS, *extra])
    frame["human"] = pd.to_numeric(frame["human"], errors="coerce")
    return frame


# --- Flickr8k (Hodosh et al. 2013) ----------------------------------------------------------


def load_flickr8k_json(path, kind: str = "expert") -> pd.DataFrame:
    """flickr8k.json / crowdflower_flickr8k.json as written by CLIPScore's download.py.

    Layout: {key: {"image_id", "image_path", "ground_truth": [refs],
    "human_judgement": [{"caption", "rating", ...}, ...]}}. Each judgement is one row
    (Flickr8k-Expert lists each of the three expert scores separately); NaN ratings are
    skipped as in the CLIPScore and PAC-S evaluation code.
    """
    collection = _flickr_collection(kind)
    data = _read_json(_path(path, "Flickr8k JSON"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object keyed by image, got {type(data).__name__}")
    rows = []
    for key, entry in data.items():
        try:
            judgements = entry["human_judgement"]
            references = [_normalise_space(r) for r in entry.get("ground_truth", [])]
        except (TypeError, KeyError):
            raise ValueError(f"{path}: entry {key!r} lacks 'human_judgement'") from None
        image_id = str(entry.get("image_id", key))
        image_path = entry.get("image_path", "")
        counts: dict[str, int] = defaultdict(int)
        for judgement in judgements:
            rating = judgement.get("rating")
            if rating is None or (isinstance(rating, float) and np.isnan(rating)):
                continue
            candidate = _normalise_space(judgement["caption"])
            rows.append(
                dict(
                    collection=collection, lang="en", image_id=image_id, image_path=image_path,
                    item_id=make_item_id(image_id, candidate), candidate=candidate,
                    references=list(references), human=float(rating), rater=counts[candidate],
                )
            )
            counts[candidate] += 1
    return _ratings_frame(rows)


def _flickr_collection(kind: str) -> str:
    if kind not in ("expert", "cf"):
        raise ValueError(f"kind must be 'expert' or 'cf', got {kind!r}")
    return "Flickr8k-Expert" if kind == "expert" else "Flickr8k-CF"


def _read_tsv(path: Path, columns: int, what: str) -> list[list[str]]:
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != columns:
                raise ValueError(f"{path}:{number}: {what} lines have {columns} tab-separated fields, got {len(fields)}")
            rows.append(fields)
    return rows


def load_flickr8k_raw(directory, kind: str = "expert") -> pd.DataFrame:
    """The original Flickr8k text release: Flickr8k.token.txt plus ExpertAnnotations.txt
    (image, caption id, three 1-4 expert scores) or CrowdFlowerAnnotations.txt (image,
    caption id, share of yes, #yes, #no).

    Follows the CLIPScore preprocessing: for Expert, candidates identical to one of the
    image's own references are skipped (as in SPICE) and each expert score is a row; for CF,
    the human score is the share of "yes" and the candidate is removed from the references.
    """
    collection = _flickr_collection(kind)
    directory = _path(directory, "Flickr8k text directory")
    tokens = _read_tsv(_path(directory / "Flickr8k.token.txt", "Flickr8k.token.txt"), 2, "token")
    captions = {caption_id: text for caption_id, text in tokens}
    references: dict[str, list[str]] = defaultdict(list)
    for caption_id, text in tokens:
        references[caption_id.split("#")[0]].append(text)
    rows = []
    if kind == "expert":
        annotations = _read_tsv(_path(directory / "ExpertAnnotations.txt", "ExpertAnnotations.txt"), 5, "expert")
        for image, caption_id, *scores in annotations:
            candidate = _lookup_caption(captions, caption_id)
            if candidate in references[image]:
                continue
            for rater, score in enumerate(scores):
                rows.append(
                    dict(
                        collection=collection, lang="en", image_id=image, image_path=f"Flicker8k_Dataset/{image}",
                        item_id=make_item_id(image, _normalise_space(candidate)), candidate=_normalise_space(candidate),
                        references=[_normalise_space(r) for r in references[image]], human=float(score), rater=rater,
                    )
                )
        return _ratings_frame(rows)
    annotations = _read_tsv(_path(directory / "CrowdFlowerAnnotations.txt", "CrowdFlowerAnnotations.txt"), 5, "CrowdFlower")
    for image, caption_id, share, n_yes, n_no in annotations:
        candidate = _lookup_caption(captions, caption_id)
        rows.append(
            dict(
                collection=collection, lang="en", image_id=image, image_path=f"Flicker8k_Dataset/{image}",
                item_id=make_item_id(image, _normalise_space(candidate)), candidate=_normalise_space(candidate),
                references=[_normalise_space(r) for r in references[image] if r != candidate],
                human=float(share), rater=0, n_yes=int(n_yes), n_no=int(n_no),
            )
        )
    return _ratings_frame(rows, extra=("n_yes", "n_no"))


def _lookup_caption(captions: Mapping[str, str], caption_id: str) -> str:
    try:
        return captions[caption_id]
    except KeyError:
        raise ValueError(f"caption id {caption_id!r} is not in Flickr8k.token.txt") from None


# --- Composite (Aditya et al. 2015) ---------------------------------------------------------


def load_composite(
    paths: Iterable | str | Path,
    *,
    references: Mapping[str, Sequence[str]] | None = None,
    aspect: str = "correctness",
) -> pd.DataFrame:
    """Composite's Mechanical Turk result files (`8k_correctness.csv`, `30k_correctness.csv`,
    `coco_correctness.csv`, and the `*_throughness.csv` twins), semicolon-separated.

    Each row holds `Input.image_url`, candidates `Input.text1..N` and their 1-5 ratings
    `Answer.Q1Answer..QN`; the files end in summary lines, which are dropped. `paths` is a
    directory (its three subsets' files of one `aspect`: correctness, the ratings the published
    Composite correlations use, or throughness), one such file (with its subsets beside it), or a
    list of files of one aspect: two aspects would give each caption two human scores. The files
    carry no references: pass `references` (image file name -> captions) to attach them; a
    candidate is left out of its own references (it is one of them in Composite). Columns
    `subset` (8k/30k/coco) and `aspect` come from the file name.
    """
    files = _composite_files(paths, aspect)
    rows = []
    for file in files:
        subset, _, aspect = file.stem.partition("_")
        with open(file, encoding=_text_encoding(file), newline="") as handle:
            reader = csv.DictReader(handle, delimiter=";")
            if not reader.fieldnames or "Input.image_url" not in reader.fieldnames:
                raise ValueError(f"{file}: no 'Input.image_url' column; is this a Composite AMT file?")
            slots = sorted(
                int(name[len("Input.text"):]) for name in reader.fieldnames
                if name.startswith("Input.text") and name[len("Input.text"):].isdigit()
            )
            for record in reader:
                url = (record.get("Input.image_url") or "").strip()
                if not url:
                    continue
                image_id = url.rstrip("/").split("/")[-1]
                for slot in slots:
                    candidate = _normalise_space(record.get(f"Input.text{slot}") or "")
                    answer = (record.get(f"Answer.Q{slot}Answer") or "").strip()
                    if not candidate or not answer:
                        continue
                    try:
                        rating = float(answer)
                    except ValueError:
                        raise ValueError(f"{file}: rating {answer!r} for {image_id} is not a number") from None
                    rows.append(
                        dict(
                            collection="Composite", lang="en", image_id=image_id, image_path=url,
                            item_id=make_item_id(image_id, candidate), candidate=candidate,
                            references=without_candidate(candidate, references.get(image_id, []) if references else []),
                            human=rating, rater=0, subset=subset, aspect=aspect,
                        )
                    )
    return _ratings_frame(rows, extra=("subset", "aspect"))


def _text_encoding(path: Path) -> str:
    """UTF-8 (with or without BOM) when the file decodes as such, else Latin-1 (AMT exports)."""
    try:
        path.read_bytes().decode("utf-8")
        return "utf-8-sig"
    except UnicodeDecodeError:
        return "latin-1"


COMPOSITE_ASPECTS = ("correctness", "throughness")


def _composite_files(paths, aspect: str) -> list[Path]:
    """The AMT files of one aspect: a folder's, a file's and its subsets' beside it, or a list."""
    if aspect not in COMPOSITE_ASPECTS:
        raise ValueError(f"Composite aspect {aspect!r}: expected one of {', '.join(COMPOSITE_ASPECTS)}")
    if isinstance(paths, (str, Path)):
        path = _path(paths, "Composite path")
        folder = path if path.is_dir() else path.parent
        files = sorted(folder.glob(f"*_{aspect}.csv"))
        if path.is_file() and path not in files:
            files = [path]
        if not files:
            raise FileNotFoundError(f"no *_{aspect}.csv files in {folder}")
        paths = files
    files = [_path(p, "Composite file") for p in paths]
    aspects = sorted({f.stem.partition("_")[2] for f in files})
    if len(aspects) > 1:
        raise ValueError(f"Composite files of {' and '.join(aspects)}: give one aspect's files (each caption "
                         "would have one human score per aspect)")
    return files


def without_candidate(candidate: str, references: Sequence[str]) -> list[str]:
    """`references` without the candidate itself: in Composite one of an image's references is
    the rated caption, and the published correlations score it against the others."""
    own = _normalise_space(candidate)
    return [r for r in references if _normalise_space(r) != own]


# --- CapEval1k (Lee et al. 2021) and M-CapEval1k (Kim et al. 2023) --------------------------

_ALIASES = {
    "image_id": ("image_id", "imgid", "img_id", "image", "img", "filename", "file_name"),
    "candidate": ("candidate", "caption", "cand", "text", "hyp"),
    "human": ("human", "score", "human_score", "rating", "overall", "mean_score"),
    "lang": ("lang", "language"),
    "references": ("references", "refs", "ground_truth"),
    "system": ("system", "model"),
    "image_path": ("image_path", "path", "image_url", "url"),
}


def _pick(record: Mapping, field: str):
    for alias in _ALIASES[field]:
        if alias in record and record[alias] is not None and not (isinstance(record[alias], float) and np.isnan(record[alias])):
            return record[alias]
    return None


def _records(path: Path) -> list[dict]:
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",").to_dict("records")
    if suffix == ".jsonl":
        with open(path, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    data = _read_json(path)
    if isinstance(data, dict):
        return [{"image_id": key, **value} if isinstance(value, dict) else {"image_id": key, "caption": value} for key, value in data.items()]
    if isinstance(data, list):
        return data
    raise ValueError(f"{path}: expected a list or an object of records")


def load_rating_table(path, collection: str, *, lang: str | None = None) -> pd.DataFrame:
    """A per-caption rating export (JSON list/object, JSONL, CSV or TSV).

    Recognised fields (first alias found wins): image (`image_id`/`imgid`/`image`...),
    caption (`candidate`/`caption`...), score (`human`/`score`/`human_score`/`rating`),
    optional `lang`, `references`/`refs`, `system`/`model`, `image_path`; other numeric
    fields (CapEval1k's `fluency`, `relevance`, `descriptiveness`) are kept as columns.
    """
    path = _path(path, f"{collection} file")
    rows = []
    extra_columns: list[str] = []
    known = {alias for aliases in _ALIASES.values() for alias in aliases}
    for number, record in enumerate(_records(path), 1):
        if not isinstance(record, Mapping):
            raise ValueError(f"{path}: record {number} is not an object")
        image_id, candidate, human = (_pick(record, f) for f in ("image_id", "candidate", "human"))
        if image_id is None or candidate is None or human is None:
            raise ValueError(f"{path}: record {number} needs an image id, a caption and a score; has {sorted(record)}")
        references = _pick(record, "references") or []
        if isinstance(references, str):
            references = [r for r in references.split("|") if r.strip()] if "|" in references else [references]
        candidate = _normalise_space(candidate)
        image_id = str(image_id)
        row = dict(
            collection=collection, lang=str(_pick(record, "lang") or lang or "en"), image_id=image_id,
            image_path=str(_pick(record, "image_path") or ""), item_id=make_item_id(image_id, candidate),
            candidate=candidate, references=[_normalise_space(r) for r in references], human=human, rater=0,
        )
        system = _pick(record, "system")
        if system is not None:
            row["system"] = str(system)
        for key, value in record.items():
            if key not in known and isinstance(value, (int, float)) and not isinstance(value, bool):
                row[key] = value
                if key not in extra_columns:
                    extra_columns.append(key)
        rows.append(row)
    extra = (["system"] if any("system" in r for r in rows) else []) + extra_columns
    frame = _ratings_frame(rows, extra=extra)
    if frame["human"].isna().any():
        raise ValueError(f"{path}: some scores are not numbers")
    return frame


def load_capeval1k(path) -> pd.DataFrame:
    """CapEval1k (English, 1-5 overall score from fluency, relevance, descriptiveness)."""
    return load_rating_table(path, "CapEval1k", lang="en")


def load_m_capeval1k(paths: Mapping[str, str | Path] | str | Path) -> pd.DataFrame:
    """M-CapEval1k: one file per language ({"de": path, ...}) or one file with a `lang` field.

    The transcreated captions keep the English score, so languages share human scores.
    """
    if isinstance(paths, Mapping):
        frames = [load_rating_table(path, "M-CapEval1k", lang=lang) for lang, path in paths.items()]
        return pd.concat(frames, ignore_index=True)
    return load_rating_table(paths, "M-CapEval1k")


# --- CLIPScore / PAC-S command-line JSON ---------------------------------------------------


def load_candidates_json(candidates_path, references_path=None, *, lang: str = "en", collection: str = "candidates") -> pd.DataFrame:
    """CLIPScore / PAC-S CLI inputs: {"image_id": "candidate"} and optional
    {"image_id": ["ref", ...]}. No human scores (`human` is nan)."""
    from scoring.clipscore_json import clipscore_entries

    candidates = _read_json(_path(candidates_path, "candidates JSON"))
    references = _read_json(_path(references_path, "references JSON")) if references_path is not None else None
    entries, _ = clipscore_entries(candidates, references, name=str(candidates_path), references_name=str(references_path))
    rows = []
    for entry in entries:
        if entry.problem:
            raise ValueError(f"{candidates_path}: image {entry.image_id!r}: {entry.problem}")
        candidate = _normalise_space(entry.candidate)
        rows.append(
            dict(
                collection=collection, lang=lang, image_id=entry.image_id, image_path="",
                item_id=make_item_id(entry.image_id, candidate), candidate=candidate,
                references=[_normalise_space(r) for r in entry.references], human=np.nan, rater=0,
            )
        )
    return _ratings_frame(rows)


# --- Pascal-50S (Vedantam et al. 2015) ------------------------------------------------------


def _leaves(value) -> list:
    """Strings and numbers inside a scipy.io.loadmat value, in order, whatever the nesting
    (cells, structs and char arrays come back as nested object/structured/unicode arrays)."""
    if isinstance(value, (str, np.str_)):
        return [str(value)]
    if isinstance(value, bytes):
        return [value.decode("utf-8", "replace")]
    if isinstance(value, np.void) and value.dtype.names:
        return [leaf for name in value.dtype.names for leaf in _leaves(value[name])]
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "US":
            return ["".join(str(v) for v in value.ravel())] if value.size else [""]
        if value.dtype.names:
            return [leaf for item in value.ravel() for leaf in _leaves(item)]
        if value.dtype.kind == "O":
            return [leaf for item in value.ravel() for leaf in _leaves(item)]
        return [v.item() for v in value.ravel()]
    if isinstance(value, (int, float, np.number)):
        return [value.item() if isinstance(value, np.number) else value]
    return [value]


def load_pascal50s(directory) -> pd.DataFrame:
    """Pascal-50S from its MATLAB files: `pair_pascal.mat` (`new_input`: per pair the image
    file name and captions A and B; `category`: 1 HC, 2 HI, 3 HM, 4 MM) and
    `consensus_pascal.mat` (`triplets`: per judgement a reference, the two candidates and
    the winner D, 1 = the first candidate), an equal number of judgements per pair, in pair
    order. Both files may sit in `directory` or its `pyCIDErConsensus/` folder.

    Pairwise judgments exported from a CapLens study (`annotation.studies.pairwise.export_pascal50s`)
    use the same two files with two additions the published ones lack: a `pair` variable in
    consensus_pascal.mat (per judgement its pair's 1-based number, so pairs may have different
    numbers of judgements) and winner 0 for a tie, which counts as a vote for neither caption.

    Votes are counted by matching the winning caption's text against A and B; all
    judgement references of a pair are kept in `references` (the common protocol samples 5
    of them, see `sample_references`).
    """
    from scipy.io import loadmat

    directory = _path(directory, "Pascal-50S directory")
    folder = directory / "pyCIDErConsensus" if (directory / "pyCIDErConsensus").is_dir() else directory
    pairs_mat = loadmat(_path(folder / "pair_pascal.mat", "pair_pascal.mat"))
    consensus_mat = loadmat(_path(folder / "consensus_pascal.mat", "consensus_pascal.mat"))
    try:
        entries = pairs_mat["new_input"].ravel()
        categories = pairs_mat["category"].ravel()
        triplets = consensus_mat["triplets"].ravel()
    except KeyError as exc:
        raise ValueError(f"Pascal-50S .mat files lack variable {exc}") from None
    if entries.size != categories.size or entries.size == 0:
        raise ValueError("pair_pascal.mat: new_input and category differ in length")
    if "pair" in consensus_mat:
        owners = np.asarray(consensus_mat["pair"], dtype=float).ravel()
        if owners.size != triplets.size or not np.isin(owners, np.arange(1, entries.size + 1)).all():
            raise ValueError(f"consensus_pascal.mat: pair must give each judgement a pair number 1-{entries.size}")
        judgements = [triplets[owners == index + 1] for index in range(entries.size)]
    elif triplets.size % entries.size:
        raise ValueError(f"consensus_pascal.mat: {triplets.size} judgements do not split evenly over {entries.size} pairs")
    else:
        per_pair = triplets.size // entries.size
        judgements = [triplets[index * per_pair:(index + 1) * per_pair] for index in range(entries.size)]
    from .pairwise import normalise_category

    rows = []
    for index, entry in enumerate(entries):
        leaves = [leaf for leaf in _leaves(entry) if isinstance(leaf, str)]
        if len(leaves) < 3:
            raise ValueError(f"pair_pascal.mat: pair {index} has {len(leaves)} strings, expected image, A, B")
        image_id, caption_a, caption_b = (_normalise_space(leaf) for leaf in leaves[:3])
        votes = {caption_a: 0, caption_b: 0}
        references = []
        for judgement in judgements[index]:
            parts = _leaves(judgement)
            if len(parts) != 4:
                raise ValueError(f"consensus_pascal.mat: judgement of pair {index} has {len(parts)} fields, expected 4")
            reference, first, second, winner = parts
            references.append(_normalise_space(reference))
            if float(winner) == 0:  # a tie (CapLens exports): a vote for neither
                continue
            chosen = _normalise_space(first if float(winner) == 1 else second)
            if chosen not in votes:
                raise ValueError(f"consensus_pascal.mat: pair {index} judgement picks {chosen!r}, which is neither caption")
            votes[chosen] += 1
        rows.append(
            dict(
                pair_id=index, image_id=image_id, caption_a=caption_a, caption_b=caption_b,
                category=normalise_category(categories[index]), votes_a=votes[caption_a],
                votes_b=votes[caption_b], references=references,
            )
        )
    return pd.DataFrame(rows)


PASCAL_REFERENCE_DRAWS = 5  # Pascal-50S accuracy is averaged over 5 random draws of 5 references
DRAW_SEED_STRIDE = 1_000_003


def draw_seed(seed: int, draw: int) -> int:
    """The seed of draw `draw` of references; pair i then samples with draw_seed(seed, d) + i
    (draw 0: seed + i, as a single draw always did)."""
    return seed + draw * DRAW_SEED_STRIDE


def sample_references(references: Sequence[str], k: int = 5, *, seed: int = 0) -> list[str]:
    """k references drawn without replacement (all when fewer), reproducibly per seed."""
    references = list(references)
    if len(references) <= k:
        return references
    return random.Random(seed).sample(references, k)


# --- FOIL (Shekhar et al. 2017) -------------------------------------------------------------


def load_foil(path) -> pd.DataFrame:
    """FOIL-COCO annotations (`foilv1.0_test_2017.json`): COCO-style {"images", "annotations"}
    where each annotation has `id`, `image_id`, `caption`, `foil` (bool), `foil_id`,
    `target_word`, `foil_word`.

    Each foil is paired with its correct caption: the non-foil annotation of the same image
    sharing its `id` when there is one, else the foil with `foil_word` put back to `target_word` (the
    reconstruction used by other FOIL readers). References are the image's other correct
    captions (the FOIL "4 references" setting; take one for "1 reference").
    """
    data = _read_json(_path(path, "FOIL JSON"))
    if not isinstance(data, dict) or "annotations" not in data:
        raise ValueError(f"{path}: expected a COCO-style object with 'annotations'")
    file_names = {image.get("id"): image.get("file_name", "") for image in data.get("images", [])}
    originals_by_id: dict = {}
    originals_by_image: dict = defaultdict(list)
    foils = []
    for annotation in data["annotations"]:
        try:
            is_foil = bool(annotation["foil"])
            caption = _normalise_space(annotation["caption"])
            image_id = annotation["image_id"]
        except KeyError as exc:
            raise ValueError(f"{path}: an annotation lacks {exc}") from None
        if is_foil:
            foils.append(annotation)
        else:
            originals_by_id.setdefault((annotation.get("id"), image_id), caption)
            if caption not in originals_by_image[image_id]:
                originals_by_image[image_id].append(caption)
    rows = []
    for annotation in foils:
        image_id = annotation["image_id"]
        foil = _normalise_space(annotation["caption"])
        correct = originals_by_id.get((annotation.get("id"), image_id))
        if correct is None:
            target, foil_word = annotation.get("target_word", ""), annotation.get("foil_word", "")
            correct = _normalise_space(foil.replace(foil_word, target, 1)) if foil_word else foil
        rows.append(
            dict(
                pair_id=annotation.get("foil_id", len(rows)), image_id=image_id,
                image_path=file_names.get(image_id) or f"COCO_val2014_{int(image_id):012d}.jpg",
                correct=correct, foil=foil, target_word=annotation.get("target_word", ""),
                foil_word=annotation.get("foil_word", ""),
                references=[c for c in originals_by_image[image_id] if c != correct],
            )
        )
    return pd.DataFrame(
        rows, columns=["pair_id", "image_id", "image_path", "correct", "foil", "target_word", "foil_word", "references"]
    )


# --- COCO-SM (unum-cloud) ------------------------------------------------------------------


def load_coco_sm(meta_path, langs: Sequence[str] | None = None) -> pd.DataFrame:
    """A COCO-SM meta file (`meta/google.json`, `bing.json`, `nllb.json`):
    {lang: [{"filename": ..., "captions": [...]}, ...]}, the same images in the same order
    for every language. Captions are numbered consecutively over images, which is the
    text index `meta/id_mapping.json` uses. `translator` is the file's stem.
    """
    meta_path = _path(meta_path, "COCO-SM meta file")
    data = _read_json(meta_path)
    if not isinstance(data, dict):
        raise ValueError(f"{meta_path}: expected an object keyed by language")
    langs = list(langs) if langs is not None else list(data)
    rows = []
    reference_files = None
    for lang in langs:
        if lang not in data:
            raise ValueError(f"{meta_path}: no language {lang!r} (has {', '.join(sorted(data))})")
        samples = data[lang]
        if not isinstance(samples, list) or not all(
                isinstance(s, dict) and isinstance(s.get("filename"), str) and isinstance(s.get("captions"), list)
                for s in samples):
            raise ValueError(f"{meta_path.name}: not a COCO-SM meta file: language {lang!r} must list objects "
                             "with 'filename' and 'captions'")
        files = [sample["filename"] for sample in samples]
        if reference_files is None:
            reference_files = files
        elif files != reference_files:
            raise ValueError(f"{meta_path}: language {lang!r} lists different images than {langs[0]!r}")
        caption_index = 0
        for image_index, sample in enumerate(data[lang]):
            for caption in sample["captions"]:
                rows.append(
                    dict(
                        lang=lang, translator=meta_path.stem, image_index=image_index,
                        filename=sample["filename"], caption_index=caption_index, caption=caption,
                    )
                )
                caption_index += 1
    return pd.DataFrame(rows, columns=["lang", "translator", "image_index", "filename", "caption_index", "caption"])


def load_coco_sm_id_mapping(path) -> np.ndarray:
    """`meta/id_mapping.json` -> array text index -> image index (from its "text2image")."""
    data = _read_json(_path(path, "COCO-SM id mapping"))
    try:
        text_to_image = {int(k): v for k, v in data["text2image"].items()}
    except (KeyError, AttributeError, TypeError, ValueError):
        raise ValueError(f"{path}: expected {{'text2image': {{text: image}}}}") from None
    result = np.empty(len(text_to_image), dtype=int)
    for text, image in text_to_image.items():
        image = image[0] if isinstance(image, list) else image
        if not 0 <= text < len(result):
            raise ValueError(f"{path}: text indices are not 0..{len(result) - 1}")
        result[text] = int(image)
    return result


def coco_sm_text_to_image(captions: pd.DataFrame, lang: str) -> np.ndarray:
    """Image index of each caption of `lang`, in caption order."""
    part = captions[captions["lang"] == lang].sort_values("caption_index")
    if part.empty:
        raise ValueError(f"no captions for language {lang!r}")
    return part["image_index"].to_numpy()


# --- Polos / DENEB / VELA layout: Polaris, Nebula, Composite (DA), LongCap-Arena -------------
#
# The Keio SMI lab publishes its sets as CSV files with one judged caption per row:
# `mt` (the candidate; `cand` on the hub), `refs` (a Python list literal), `score` (the human
# score, already aggregated per caption) and `imgid` (an image file name under `images/`),
# read by `validate/dataset.py` of github.com/keio-smilab24/Polos and Ka2ukiMatsuda/DENEB.
# The Hugging Face copies are Parquet shards (`data/<split>-*.parquet`) with the image bytes
# inside. Every row is one item of the correlation: nothing is averaged.

POLOS_CSV_COLUMNS = ("mt|cand", "refs", "score", "imgid|image|image_path|file_name")


def _first_field(record: Mapping, names: str):
    """The value of the first of `names` ('a|b|c') present and non-empty in `record`."""
    for name in names.split("|"):
        value = record.get(name)
        if value is not None and not (isinstance(value, str) and not value.strip()):
            return value
    return None


def _literal_list(value, where: str) -> list[str]:
    """A `refs` cell: a list, or the Python / JSON list literal the CSV files hold."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_normalise_space(v) for v in value]
    import ast

    try:
        parsed = ast.literal_eval(str(value))
    except (ValueError, SyntaxError):
        raise ValueError(f"{where}: refs is not a list literal: {str(value)[:60]!r}") from None
    if not isinstance(parsed, (list, tuple)) or not all(isinstance(r, str) for r in parsed):
        raise ValueError(f"{where}: refs is not a list of strings: {str(value)[:60]!r}")
    return [_normalise_space(r) for r in parsed]


def _polos_row(record: Mapping, where: str, collection: str, image_folder: str) -> dict:
    candidate = _first_field(record, "mt|cand")
    refs = _first_field(record, "refs")
    score = _first_field(record, "score|human_score")
    image = _first_field(record, "imgid|image|image_path|file_name")
    missing = [name for name, value in (("mt", candidate), ("refs", refs), ("score", score), ("imgid", image))
               if value is None]
    if missing:
        raise ValueError(f"{where}: no {', '.join(missing)}")
    try:
        human = float(score)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: score {score!r} is not a number") from None
    if np.isnan(human):
        raise ValueError(f"{where}: score is NaN")
    candidate = _normalise_space(candidate)
    image_id = str(image)
    return dict(
        collection=collection, lang="en", image_id=image_id,
        image_path=f"{image_folder}/{image_id}" if image_folder else image_id,
        item_id=make_item_id(image_id, candidate), candidate=candidate,
        references=_literal_list(refs, where), human=human, rater=0,
    )


def load_polos_csv(path, collection: str, *, image_folder: str = "images") -> pd.DataFrame:
    """One CSV of the Polos / DENEB / VELA layout (`mt`, `refs`, `score`, `imgid`; `cand` and
    `image` also accepted). `image_path` is `image_folder/imgid`, relative to the CSV's folder.
    A malformed row is refused with the file name and line number."""
    path = _path(path, f"{collection} CSV")
    rows = []
    with open(path, encoding=_text_encoding(path), newline="") as handle:
        reader = csv.DictReader(handle)
        columns = set(reader.fieldnames or ())
        absent = [names.split("|")[0] for names in POLOS_CSV_COLUMNS
                  if not columns & set(names.split("|")) and not (names == "score" and "human_score" in columns)]
        if absent:
            raise ValueError(f"{path.name}:1: missing column(s) {', '.join(absent)}; expected the Polos layout "
                             "mt, refs, score, imgid")
        for record in reader:
            rows.append(_polos_row(record, f"{path.name}:{reader.line_num}", collection, image_folder))
    if not rows:
        raise ValueError(f"{path.name}: no rows")
    return _ratings_frame(rows)


def load_polos_parquet(paths, collection: str, *, caption_field: str = "mt|cand",
                       image_field: str = "img|image") -> pd.DataFrame:
    """Hugging Face Parquet shards of the same sets: `refs`, the candidate (`cand` or `mt`),
    the human score (`human_score` or `score`) and the image as {bytes, path}, kept in an
    `image` column (bytes) with `image_id` from `file_name`/`imgid` or the image's own path."""
    import pyarrow.parquet as pq

    files = [_path(p, f"{collection} Parquet file") for p in paths]
    rows = []
    for file in files:
        table = pq.read_table(file)
        for number, record in enumerate(table.to_pylist(), 1):
            where = f"{file.name}: row {number}"
            picture = _first_field(record, image_field)
            name = _first_field(record, "file_name|imgid")
            if name is None and isinstance(picture, dict):
                name = picture.get("path")
            if name is None:
                name = f"{file.stem}-{number}.jpg"
            row = _polos_row({"mt": _first_field(record, caption_field), "refs": record.get("refs"),
                              "score": _first_field(record, "human_score|score"), "imgid": Path(str(name)).name},
                             where, collection, "")
            data = picture.get("bytes") if isinstance(picture, dict) else picture
            if not isinstance(data, (bytes, bytearray)):
                raise ValueError(f"{where}: no image bytes")
            row["image"] = bytes(data)
            row["image_path"] = ""
            rows.append(row)
    if not rows:
        raise ValueError(f"{collection}: the Parquet files hold no rows")
    return _ratings_frame(rows, extra=("image",))


def _split_file(path, collection: str, csv_names: Sequence[str], parquet_glob: str) -> tuple[str, list[Path]]:
    """('csv', [file]) or ('parquet', shards) for a file, or a folder holding one of `csv_names`
    (directly or in a sub-folder named after the set) or hub shards `data/<split>-*.parquet`."""
    path = _path(path, f"{collection} path")
    if path.is_file():
        return ("parquet" if path.suffix.lower() in (".parquet", ".pq") else "csv"), [path]
    for folder in (path, path / collection.lower(), path / "test"):
        for name in csv_names:
            if (folder / name).is_file():
                return "csv", [folder / name]
    shards = sorted((path / "data").glob(parquet_glob)) + sorted(path.glob(parquet_glob))
    if shards:
        return "parquet", shards
    raise FileNotFoundError(f"{collection}: none of {', '.join(csv_names)} or data/{parquet_glob} in {path}")


def load_polaris(path, split: str = "test") -> pd.DataFrame:
    """Polaris (Wada et al., CVPR 2024): `polaris_<split>.csv` (+ `images/`) as in the Polos
    repository's data_en/polaris, or the hub's `data/<split>-*.parquet` (yuwd/Polaris)."""
    csv_split = {"validation": "val"}.get(split, split)
    kind, files = _split_file(path, "Polaris", [f"polaris_{csv_split}.csv"], f"{split}-*.parquet")
    if kind == "csv":
        return load_polos_csv(files[0], "Polaris")
    return load_polos_parquet(files, "Polaris", caption_field="cand|mt", image_field="img|image")


def spica_corrections(path) -> dict[tuple[str, str], float]:
    """Corrected Nebula labels from Spica (hiranohachiman/Spica: `spica_{train,val,test}.csv`,
    columns `imgid`, `mt`, `score`): {(image stem, caption): mean score of its rows}. CaptionEvalKit
    replaces Nebula's test scores with these (its note cites arXiv:2512.21582)."""
    path = _path(path, "Spica corrections")
    files = [path] if path.is_file() else sorted(path.glob("spica_*.csv"))
    if not files:
        raise FileNotFoundError(f"no spica_*.csv in {path}")
    totals: dict[tuple[str, str], list[float]] = defaultdict(list)
    for file in files:
        with open(file, encoding=_text_encoding(file), newline="") as handle:
            reader = csv.DictReader(handle)
            absent = [c for c in ("imgid", "mt", "score") if c not in (reader.fieldnames or ())]
            if absent:
                raise ValueError(f"{file.name}:1: missing column(s) {', '.join(absent)}")
            for record in reader:
                try:
                    score = float(record["score"])
                except (TypeError, ValueError):
                    raise ValueError(f"{file.name}:{reader.line_num}: score {record['score']!r} is not a number") from None
                totals[(Path(record["imgid"]).stem, _normalise_space(record["mt"]))].append(score)
    return {key: float(np.mean(values)) for key, values in totals.items()}


def load_nebula(path, split: str = "test", *, corrections=None) -> pd.DataFrame:
    """Nebula (Matsuda et al., ACCV 2024): `nebula_<split>.csv` (+ `images/`) as DENEB's
    validate code reads it from data_en/nebula, or the hub's `data/<split>-*.parquet`
    (Ka2ukiMatsuda/Nebula: file_name, image, refs, mt, human_score).

    `corrections` (a Spica CSV or folder, see `spica_corrections`) replaces the score of every
    caption found there, matched on (image stem, caption); `score_original` keeps the
    published one and `corrected` says which rows changed."""
    csv_split = {"valid": "val", "validation": "val"}.get(split, split)
    hub_split = {"val": "valid", "validation": "valid"}.get(split, split)
    kind, files = _split_file(path, "Nebula", [f"nebula_{csv_split}.csv"], f"{hub_split}-*.parquet")
    if kind == "csv":
        table = load_polos_csv(files[0], "Nebula")
    else:
        table = load_polos_parquet(files, "Nebula", caption_field="mt|cand", image_field="image|img")
    table["score_original"] = table["human"]
    table["corrected"] = False
    if corrections is not None:
        lookup = spica_corrections(corrections)
        keys = [(Path(i).stem, c) for i, c in zip(table["image_id"], table["candidate"])]
        fixed = [lookup.get(key) for key in keys]
        table["corrected"] = [value is not None for value in fixed]
        table["human"] = [h if value is None else value for h, value in zip(table["human"], fixed)]
    return table


def load_longcap_arena(path, split: str = "testa", aspect: str = "desc") -> pd.DataFrame:
    """LongCap-Arena (Matsuda et al. 2025, the VELA paper): one aspect of one test split.

    `testa` is the hub split `dci_val.<aspect>`, `testb` is `dci_test.<aspect>`
    (Ka2ukiMatsuda/LongCap-Arena: file_name, image, refs, cand, score); as local CSV the
    files are `<aspect>_dci_val.csv` / `<aspect>_dci_test.csv` in the Polos layout, images
    under `images/`. Aspects: desc (descriptiveness), rel (relevance), flu (fluency)."""
    if split not in LONGCAP_ARENA_SPLITS:
        raise ValueError(f"LongCap-Arena split must be one of {', '.join(LONGCAP_ARENA_SPLITS)}, got {split!r}")
    if aspect not in LONGCAP_ARENA_ASPECTS:
        raise ValueError(f"LongCap-Arena aspect must be one of {', '.join(LONGCAP_ARENA_ASPECTS)}, got {aspect!r}")
    hub_split = f"{LONGCAP_ARENA_SPLITS[split]}.{aspect}"
    kind, files = _split_file(path, "LongCap-Arena", [f"{aspect}_{LONGCAP_ARENA_SPLITS[split]}.csv"],
                              f"{hub_split}-*.parquet")
    if kind == "csv":
        table = load_polos_csv(files[0], "LongCap-Arena")
    else:
        table = load_polos_parquet(files, "LongCap-Arena", caption_field="cand|mt", image_field="image|img")
    table["aspect"] = LONGCAP_ARENA_ASPECTS[aspect]
    table["subset"] = split
    return table


def load_composite_da(path) -> pd.DataFrame:
    """Composite as the Polos and DENEB validate code read it: `en_test_composite_da.csv`
    (mt, refs, score, imgid; images under `images/`), which, unlike the AMT files, carries
    the references."""
    kind, files = _split_file(path, "Composite", ["en_test_composite_da2.csv", "en_test_composite_da.csv"],
                              "test-*.parquet")
    if kind != "csv":
        raise ValueError("Composite: give en_test_composite_da.csv (the Polos layout) or the AMT files")
    table = load_polos_csv(files[0], "Composite")
    table["references"] = [without_candidate(c, refs) for c, refs in zip(table["candidate"], table["references"])]
    return table


LOADERS = {
    "flickr8k-expert": lambda path: (load_flickr8k_json if Path(path).is_file() else load_flickr8k_raw)(path, "expert"),
    "flickr8k-cf": lambda path: (load_flickr8k_json if Path(path).is_file() else load_flickr8k_raw)(path, "cf"),
    "composite": load_composite,
    "capeval1k": load_capeval1k,
    "m-capeval1k": load_m_capeval1k,
    "polaris": load_polaris,
    "nebula": load_nebula,
    **{f"longcap-arena-{split}-{aspect}": (lambda path, s=split, a=aspect: load_longcap_arena(path, s, a))
       for split in LONGCAP_ARENA_SPLITS for aspect in LONGCAP_ARENA_ASPECTS},
}
"""Rating-set loaders by CLI name (a file or a directory path each)."""

RATING_SET_FILES = {
    "flickr8k": "flickr8k.json / crowdflower_flickr8k.json from CLIPScore's download.py, or the folder of the Flickr8k "
                "text release (Flickr8k.token.txt with ExpertAnnotations.txt or CrowdFlowerAnnotations.txt)",
    "composite": "Composite's ;-separated AMT files 8k_/30k_/coco_correctness.csv, or their folder",
    "capeval1k": "a JSON, JSONL or CSV export with imgid, caption and score (fluency, relevance, descriptiveness, "
                 "model optional)",
    "m-capeval1k": "the CapEval1k fields plus lang, or one such file per language",
    "polaris": "polaris_test.csv beside images/, or the hub's data/test-*.parquet",
    "nebula": "nebula_test.csv beside images/, or the hub's data/test-*.parquet",
    "longcap-arena": "the hub's data/dci_val.<aspect>-*.parquet or data/dci_test.<aspect>-*.parquet, or "
                     "<aspect>_dci_val.csv / <aspect>_dci_test.csv in the Polos layout",
}
"""What each rating set's loader reads (docs/analysis.md has the table), for the message when a
file is not one: keyed by the set's name up to its variant (flickr8k-expert -> flickr8k)."""


def rating_set_files(name: str) -> str:
    """The files `name` (a LOADERS key) reads, in words."""
    family = next((key for key in RATING_SET_FILES if name == key or name.startswith(f"{key}-")), name)
    return RATING_SET_FILES[family]
