"""The Perturbation lab as library calls: perturb one caption by one operation or by the five
of PR-MCS, then score it before and after in the layout of PR-MCS Table 7.

The table is `scoring.analysis.robustness.robustness_table` over one caption, so the lab and
`caplens analyze robustness` compute the change the same way.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import pandas as pd

from app.render import status_cell
from scoring.analysis.robustness import ORIGINAL, format_table7, robustness_table, undefined_change
from scoring.api import ScoreItem
from scoring.language_id import resolve_language
from scoring.paths import check_caption_length
from scoring.perturb.ops import ALL_OPS, PRMCS_OPS, Perturbation, canonical_op, default_p, default_p_text, perturb
from scoring.perturb.pos import TaggerUnavailableError
from scoring.perturb.tokenize import normalize_lang
from scoring.session_scoring import (batch_document_frequencies, document_frequency_note, metric_availability,
                                     metric_meta, missing_input_messages)

ALL_FIVE = "all five (PR-MCS)"


def operation_choices() -> list[str]:
    """The lab's menu: all five PR-MCS operations at once, then each operation of the library's
    one list (PR-MCS's, then UMIC's own; UMIC's permutation is jumble)."""
    return [ALL_FIVE, *ALL_OPS]


def lab_default_p(op: str) -> float | None:
    """The p the lab shows for `op`: the library's default (`scoring.perturb.ops.DEFAULT_P`),
    None for all five at once (each then takes its own) and for operations without one."""
    if op in (ALL_FIVE, "all"):
        return None
    return default_p(op)


def p_help() -> str:
    """What the paper defaults are, in words, for the lab's p control."""
    return (f"Paper defaults per operation: {default_p_text()} (removal drops each word with p = 0.6, i.e. "
            "keeps it with 0.4, as PR-MCS Algorithm 1); jumble and substitution take none.")


def parse_critical(text: str | None) -> list[str] | None:
    """Critical objects typed as "man; white shirt" (or one per line); None when none."""
    objects = [part.strip() for part in (text or "").replace("\n", ";").split(";") if part.strip()]
    return objects or None


def perturb_caption(text: str, op: str, p: float | None, seed: int, lang: str, critical: list[str] | None,
                    corpus: list[str] | None = None) -> list[Perturbation]:
    """`text` perturbed by `op`, or by each PR-MCS operation for ALL_FIVE (or "all"), in
    language `lang` (AUTO: detected from the text). `p` None: each operation's own default
    (`scoring.perturb.ops.DEFAULT_P`); a number applies to every operation that takes one. One operation that needs a POS tagger the
    language lacks raises TaggerUnavailableError; among all five it is a no-op saying so."""
    if not text or not text.strip():
        raise ValueError("Enter a caption to perturb.")
    check_caption_length(text, "caption")
    check_caption_length("; ".join(critical or []), "critical objects")
    ops = list(PRMCS_OPS) if op in (ALL_FIVE, "all") else [canonical_op(op)]
    lang = resolve_language(lang, text)
    results = []
    for name in ops:
        try:
            results.append(perturb(text, name, p=p, seed=int(seed), lang=lang, critical=critical, corpus=corpus))
        except TaggerUnavailableError as exc:
            if len(ops) == 1:
                raise
            # All five in a language without a POS tagger: the operations that need none
            # still run, and the one that does says why it changed nothing.
            results.append(Perturbation(text, name, None, int(seed), normalize_lang(lang), text, [], True, str(exc)))
    return results


@dataclass
class CaptionRobustness:
    """Scores of one caption before and after its perturbations: `table` is the numeric
    Table-7 frame (one row per metric that scored), `statuses` says for every metric whether
    it is available, and `ops` keeps the operations' order."""

    table: pd.DataFrame
    statuses: dict[str, str]
    ops: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    def summary(self, n_perturbations: int, lang: str) -> str:
        """The run in one line: how many metrics gave the caption a score, of those asked."""
        scored = 0 if self.table.empty else self.table["metric"].nunique()
        return (f"{n_perturbations} perturbation(s) of a caption in {lang}; {scored} of {len(self.statuses)} "
                "metric(s) scored it" + ("." if scored == len(self.statuses) else " (the others: see status)."))


def caption_robustness(scorer, image, original: str, perturbations: Sequence[Perturbation], references: list[str],
                       lang: str, metrics: Sequence[str]) -> CaptionRobustness:
    """Score `original` and each perturbed text with `metrics` against one image (None: text
    metrics only) and `references`; the change per operation is relative to the original, and
    an operation that left the caption unchanged has no change ("-")."""
    texts = [original] + [pert.text for pert in perturbations]
    ops = [pert.op for pert in perturbations]
    noops = [False] + [pert.noop for pert in perturbations]
    items = [ScoreItem(image=image, candidate=text, references=list(references), lang=lang) for text in texts]
    rows, meta, values = [], {}, {}
    results = scorer.score(items, list(metrics))
    for name, result in results.items():
        meta[name] = metric_meta(scorer, name, result)
        values[name] = result.values[0] if result.values is not None and len(result.values) else None
        if result.unavailable:
            continue
        for op, noop, value in zip([ORIGINAL, *ops], noops, result.values):
            # One caption: every row is the same item; a no-op (the caption unchanged) is no
            # perturbation, so its operation shows "-" rather than a 0 % "miss".
            rows.append({"item_id": 0, "lang": lang, "metric": name, "op": op, "noop": noop, "score": value})
    long = pd.DataFrame(rows, columns=["item_id", "lang", "metric", "op", "noop", "score"])
    scored = long[long["score"].notna() & (long["op"] == ORIGINAL)]
    table = robustness_table(long, ops) if not scored.empty else pd.DataFrame()
    # The Score tab's status rule: what the inputs lack, and CIDEr-D's document frequencies,
    # which over one image's references give every n-gram an IDF of 0.
    cider = [n for n in results if scorer.registry.metrics[n].family == "cider"]
    source = batch_document_frequencies([references]) if cider and references else None
    notes = {name: document_frequency_note(source) for name in cider} if source is not None else {}
    availability = metric_availability(list(results), meta, [{**values, "lang": lang}], bool(references),
                                       image is not None, notes)
    statuses = {entry["metric"]: entry["status"] for entry in availability}
    messages = missing_input_messages(availability)
    flat = [] if table.empty else [m for m, v in zip(table["metric"], table["original"]) if undefined_change(v)]
    if flat:  # the chart draws changes only: say why these have no bars
        messages.append(f"{', '.join(flat)}: the original scores 0, so no change in % is defined; left out of the "
                        "chart (the table shows the scores).")
    return CaptionRobustness(table, statuses, ops, messages)


def caption_robustness_cells(result: CaptionRobustness) -> pd.DataFrame:
    """Rows: metrics; columns: the metric's status as an icon, Original, each operation as
    "score (change %)" (the score alone where the original is zero), Average (for several
    operations), Robustness and the status in words; "-" where a metric could not score
    (unavailable, or it needs an image or references these inputs lack)."""
    if result.table.empty:
        cells = pd.DataFrame(columns=["metric"]).set_index("metric")
    else:
        cells = format_table7(result.table, result.ops).drop(columns=["lang"]).set_index("metric")
        numeric = result.table.set_index("metric")
        for op in [*result.ops, "average"]:
            # Off a zero original the change is undefined; the score itself is still shown.
            undefined = (cells[op.capitalize()] == "-") & numeric[op].notna()
            cells.loc[undefined, op.capitalize()] = numeric.loc[undefined, op].map("{:.4f}".format)
    cells = cells.reindex(list(result.statuses)).fillna("-")
    if len(result.ops) < 2:
        cells = cells.drop(columns=["Average"], errors="ignore")
    # The Score tab's layout: the status as an icon beside the metric (its words on hover), so a
    # caveat is seen without scrolling to the words in the last column.
    cells.insert(0, "status", [status_cell(result.statuses[m]) for m in cells.index])
    cells["status in words"] = [result.statuses[m] for m in cells.index]
    return cells.rename_axis("metric").reset_index()


@dataclass
class LabRun:
    """One run of the lab: the caption's language, its perturbations and, when metrics were
    chosen, their scores before and after (`problem` says why scoring failed; the
    perturbations are still there to show)."""

    lang: str
    perturbations: list[Perturbation]
    robustness: CaptionRobustness | None = None
    problem: str | None = None


def perturb_and_score(scorer, text: str, op: str, p: float | None, seed: int, lang: str,
                      critical: list[str] | None, *, image=None, references: Sequence[str] = (),
                      metrics: Sequence[str] = ()) -> LabRun:
    """Perturb `text` (language `lang`, AUTO: detected; the references also feed
    keyword-substitution), then score it and its perturbations with `metrics`."""
    lang = resolve_language(lang, text or "")
    perturbations = perturb_caption(text, op, p, seed, lang, critical, list(references) or None)
    if not metrics:
        return LabRun(lang, perturbations)
    try:
        robustness = caption_robustness(scorer, image, text, perturbations, list(references), lang, metrics)
    except (ValueError, LookupError, OSError) as exc:  # the scorer's "bad input" signals
        return LabRun(lang, perturbations, problem=str(exc))
    return LabRun(lang, perturbations, robustness)


@dataclass(frozen=True)
class LabExample:
    """One ready-made input of the lab, for a visitor to try in one click: `image` is a PNG
    path (None: text metrics only), `references` one per line, `critical` "a; b"."""

    label: str
    image: str | None
    caption: str
    references: str
    lang: str
    op: str
    critical: str


# (language, operation) of the world-scene examples, one scene each.
_WORLD_EXAMPLES = (("en", ALL_FIVE), ("de", "removal"), ("fr", "substitution"), ("ja", "masking"))


def lab_examples(folder) -> list[LabExample]:
    """The lab's examples: synthetic-world scenes (rendered into `folder` as PNG) with a caption
    in each of four languages, the scene's long description in that language as its reference
    and the objects the caption names as its critical objects, then PR-MCS Figure 5's caption (substitution of its
    critical objects, its own caption as reference, no image). Deterministic: the same scenes
    of the world's validation split every time."""
    from pathlib import Path

    from scoring.perturb.examples import PRMCS_FIGURES
    from scoring.world.captions import scene_captions
    from scoring.world.render import render_scene
    from scoring.world.sets import split_scenes

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    # Scenes with a long caption too, so each example has a reference in its language, and a
    # short caption naming two different objects, so substitution has something to swap.
    scenes = [s for s in split_scenes("validation", 40)
              if "long" in (caps := scene_captions(s, ("en",))) and len(set(caps["short"]["en"].critical_objects)) >= 2]
    examples = []
    for scene, (lang, op) in zip(scenes, _WORLD_EXAMPLES):
        captions = scene_captions(scene, (lang,))
        caption, reference = captions["short"][lang], captions["long"][lang]
        path = folder / f"{scene.scene_id}.png"
        if not path.exists():
            render_scene(scene, 224).save(path)
        examples.append(LabExample(f"world scene, {lang}, {op}", str(path), caption.text, reference.text, lang, op,
                                   "; ".join(caption.critical_objects)))
    figure = PRMCS_FIGURES["en"]
    examples.append(LabExample(f"{figure.figure}, en, substitution", None, figure.caption, figure.caption, "en",
                               "substitution", "; ".join(figure.critical)))
    return examples
