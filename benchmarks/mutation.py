"""Mutation testing of the modules that decide a number, with mutmut.

For each module it copies the working tree's packages and tests into a scratch folder (the
shared working tree is never mutated), lets mutmut mutate that one module, and runs only the
tests that cover it. It writes the score and every surviving mutant (its diff) to
benchmarks/results/mutation.md and mutation.json; modules not run this time keep their last
result there.

    pip install -e ".[mutation]"
    nice -n 15 python benchmarks/mutation.py scoring/training/losses.py scoring/analysis/correlation.py
    nice -n 15 python benchmarks/mutation.py            # every module below (hours on 2 cores)
    python benchmarks/mutation.py --list

Too slow for CI: run it before a submission that touches one of these modules, and kill the
survivors with tests that check a value (docs/architecture.md, "Mutation testing").
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PROGRESS = RESULTS / "mutation_progress"  # stopped --resume runs, carried to the next machine
PACKAGES = ("scoring", "annotation", "db", "app")

# Every metric of every shipped profile, through the public scorer: split, reordered, caches on
# and off, the protocol's declarations, rows without an image, unavailable backbones.
_EVERY_METRIC = ["tests/scoring/test_metric_invariance.py", "tests/scoring/test_metric_protocol.py",
                 "tests/scoring/test_unavailable.py", "tests/scoring/test_profile_constants.py"]

# module -> the tests that cover it (only these run for its mutants)
MODULES: dict[str, list[str]] = {
    "scoring/metrics/base.py": [*_EVERY_METRIC, "tests/scoring/test_registry.py", "tests/scoring/test_learned_metrics.py"],
    "scoring/metrics/clip_score.py": [*_EVERY_METRIC, "tests/scoring/test_learned_metrics.py", "tests/scoring/test_clip_parity.py"],
    "scoring/metrics/mcs.py": [*_EVERY_METRIC, "tests/scoring/test_learned_metrics.py"],
    "scoring/metrics/specs.py": [*_EVERY_METRIC, "tests/scoring/test_umic_specs_fidelity.py", "tests/scoring/test_learned_metrics.py"],
    "scoring/metrics/umic.py": [*_EVERY_METRIC, "tests/scoring/test_umic_specs_fidelity.py", "tests/scoring/test_learned_metrics.py"],
    # the module's own tests first: --recheck runs them in this order and stops at the first failure
    "scoring/metrics/caplens_r.py": ["tests/scoring/test_caplens_r_reference.py", "tests/scoring/test_learned_metrics.py",
                                     "tests/training/test_losses.py", "tests/training/test_caplens_r_cross.py",
                                     "tests/training/test_caplens_r_fluency.py", *_EVERY_METRIC],
    "scoring/metrics/fluency.py": ["tests/training/test_caplens_r_fluency.py"],
    "scoring/metrics/coco.py": ["tests/scoring/test_ngram_metrics.py", "tests/scoring/test_ptb_line_separators.py",
                                "tests/scoring/test_session_scoring.py", "tests/scoring/test_metric_protocol.py",
                                "tests/scoring/test_metric_invariance.py"],
    "scoring/perturb/ops.py": ["tests/perturb/test_perturb_examples.py", "tests/perturb/test_perturb_properties.py",
                               "tests/perturb/test_negatives.py", "tests/perturb/test_perturb_outcomes.py"],
    "scoring/perturb/negatives.py": ["tests/perturb/test_negatives.py"],
    "scoring/analysis/correlation.py": ["tests/analysis/test_correlation_analysis.py",
                                        "tests/analysis/test_cluster_bootstrap.py",
                                        "tests/analysis/test_bootstrap_reference.py"],
    # the others reach learning_curve, read_result, list_runs, _git_commit and store_weights_as
    # (210 mutants that the first two leave untested); the last two train a model from scratch in
    # the run's scratch folder and fit a fluency model on the training rows (`_Run.__init__`)
    "scoring/training/trainer.py": ["tests/training/test_trainer_steps.py", "tests/training/test_trainer.py",
                                    "tests/training/test_learning_curve.py", "tests/training/test_caplens_r_cross.py",
                                    "tests/annotation/test_training_jobs.py", "tests/training/test_run_records.py",
                                    "tests/training/test_trainer_helpers.py", "tests/world/test_world_training.py",
                                    "tests/training/test_caplens_r_fluency.py"],
    "scoring/training/losses.py": ["tests/training/test_losses.py"],
    # PR-MCS Table 7 and every "change %": the lab, the Analyze tab and the world's PR-MCS drops
    "scoring/analysis/robustness.py": ["tests/analysis/test_robustness_analysis.py",
                                       "tests/analysis/test_pipeline_analysis.py", "tests/app/test_perturb_lab.py",
                                       "tests/world/test_world_measure.py", "tests/analysis/test_store_analysis.py"],
    # queue_screens and quality call tasks.py's item navigation and reservation: their tests are its tests too
    "annotation/studies/tasks.py": ["tests/annotation/test_tasks.py", "tests/annotation/test_queue_leases.py",
                                    "tests/annotation/test_queue_orders.py", "tests/annotation/test_annotator_screens.py",
                                    "tests/annotation/test_quality.py", "tests/annotation/test_study_defects.py",
                                    "tests/annotation/test_tasks_values.py"],
    "scoring/fingerprint.py": ["tests/scoring/test_score_cache_keys.py", "tests/annotation/test_score_store_keys.py",
                               "tests/scoring/test_fingerprint_parts.py"],
}

# Why the survivors that no test can kill change no result (equivalent mutants), per module.
NOTES: dict[str, str] = {
    "scoring/analysis/robustness.py": (
        "First run 2026-12-02 (the zero threshold for a change in % moved to 1e-3): 352 of 414; tests written "
        "for the survivors (edges of the zero rule, scores as text, a missing no-op flag, the item column, "
        "error texts, ties, Robustness cells, a group without originals) killed 28 in two rechecks, and the "
        "`continue` -> `break` of a group without originals was killed by a test planted by hand after the "
        "second. Equivalent, the rest: guards on empty lists (`if op_means or True`: np.mean of nothing is "
        "nan, as the guard gives, with a warning); `fillna(None)` before `astype(bool)` (None is False); the "
        "merge on None or without `how` (the two frames share only the key columns; inner is the default); "
        "`float('NAN')`; `groupby(sort=None/False)` and `isinstance(key, tuple) or True` (pandas gives tuple "
        "keys for a list of columns; the order of rows only). Not asserted: the exact words of four error "
        "messages, the `average_original` column's name, the fallback to the Original column for tables "
        "without `<op>_original` columns (written before they existed), and the cell of a non-finite "
        "Robustness."),
    "scoring/fingerprint.py": (
        "Equivalent survivors: `encode('UTF-8')` is `encode('utf-8')`; `spec.tokenizer if ... or True` "
        "also stats a tokenizer named by a string (a Hugging Face name or \"@clip\"), which is no file "
        "in the working folder, so nothing is added; the timeout (`name = None`) loops forever, which "
        "the time limit catches. In `_towers_a_head_names` (2026-11-27): `encoding=None`/'UTF-8' (UTF-8 "
        "locale); `kind == 'caplens-r' or spec.path`: the other local folder that holds a caplens_r.json, "
        "a cross-mode blip-itm run, names no towers in it, so nothing is added. `isinstance(named, dict) "
        "or True` is killed by the damaged-head case written after the run (planted by hand, it fails)."),
    "scoring/metrics/base.py": (
        "Equivalent survivors: any other non-zero denominator than 1.0 where both scores are 0 (the "
        "numerator is 0 there); a dropped float64 cast of one input (the other is float64, and numpy "
        "promotes the product). The first run of 2026-11-27 (58 of 72) had 13 survivors in the old "
        "harmonic_mean's outer `where` and `errstate`, which could never change a value: both went, and "
        "a by-hand test came."),
    "scoring/metrics/clip_score.py": (
        "Equivalent survivors: the eight dropped float64 casts of one side of a product (numpy promotes "
        "float32 times float64 to float64: the same cosines); `_embed`'s images or image keys passed as None "
        "(every image was encoded in the Scorer's pass, so the cache answers by key; without keys the "
        "backbone hashes the images itself: the same values); `references=None` in `embedding_requests` "
        "(it also requests the rows without references, which the metric then skips: extra work, the same "
        "values). Killed after the run by tests written for them, each planted by hand and failing: the "
        "description's model name and RefCLIP-S's truncation flags (test_learned_metrics.py::"
        "test_reference_metrics_flag_truncated_candidates_and_descriptions_name_the_model), and `texts =` "
        "for `texts +=` (RefCLIP-S requesting only its references, hidden when CLIP-S requests the same "
        "candidates: test_metric_protocol.py::test_each_metric_alone_requests_everything_it_encodes)."),
    "scoring/metrics/caplens_r.py": (
        "The run of record (2026-11-28 12:15, today's code and tests): 413 of 442 killed; its 29 survivors are "
        "all of the equivalent kinds listed at the end. The earlier run of 2026-11-28 (350 of 453) found CapLens-R's end-to-end cross-encoder row (`variant = \"cross\"`, "
        "the pair head's P(match) as the rating) reached by no test of this module: 20 of its 103 survivors. Tests "
        "written afterwards in test_caplens_r_reference.py, each checked by planting mutants by hand: that row "
        "against the raw BLIP pair head (imageless items, truncation flags); the towers a head's caplens_r.json "
        "names when its row names none, with a cross-encoder's [CLS] state appended, and the exact message for a "
        "tower nobody names; towers of different widths named with both widths; `embedding_requests` (rows with an "
        "image, only towers the row names); clipping at 0 and no truncation flags on the frozen path; `save_head` "
        "into a new nested folder, read back; the world profile's CapLens-R `w`, `prefix` and description "
        "(test_metric_protocol.py). `CaplensRHead` kept `spec`, `label` and a fingerprint that nothing read: gone. "
        "Equivalent survivors: the JSON layout of caplens_r.json (`indent`, `ensure_ascii`) and `encoding` None or "
        "'UTF-8' (UTF-8 locale): the same payload is read back; `squeeze(+1)` for `squeeze(-1)` on the head's (N, 1) "
        "output; the zero mean reference without its float32 dtype (the products are stored into the float32 feature "
        "array); image keys passed as None to a vision tower or a cross-encoder (each hashes the images itself: the "
        "same keys), and images passed as None where the Scorer has already encoded them (found by key); "
        "`if flat or True` (a text tower given no text returns an empty (0, D) array) and the empty reference array's "
        "shape (1, D) or dtype when no item has references (every item's slice of it is empty either way); "
        "`head=` left out of `match_probability` (its default is \"pair\"); on the frozen path, whose flags are all "
        "False, `scatter`'s flags left out or None (its default is no truncation); `cross_name = \"\"` for None (both falsy)."),
    "scoring/metrics/coco.py": (
        "The run of record (four sittings of 8d4ec46, coco.py unchanged since) left 70 survivors and 2 timeouts; "
        "the tests written for them while it ran kill 40 in the recheck of 2026-11-28. Of the 32 left, one "
        "could not be planted again (`_start` with stderr left out, a change over two lines; equivalent, below), four are "
        "timeouts whose tests fail by hanging: `_read`'s `timeout=None` waits for ever in the silent-process "
        "test, and a reader thread that is not a daemon (`daemon=None`/`False`/left out) fails the daemon test, "
        "after which the module's shared METEOR reader keeps pytest from exiting. `compute`'s truncation flags "
        "set to True for scored rows is killed by test_the_ngram_metrics_of_one_batch_tokenise_it_once, written "
        "after the recheck (planted by hand, it fails). Equivalent, the rest: `CorpusCiderScorer` without `n` or "
        "`sigma` (pycocoevalcap's defaults are n=4, sigma=6.0); the `ref_len` setter's return value (a setter's "
        "is ignored); the tokenizer's temporary file opened as `w+b` (the default) for `wb`, with another suffix "
        "or none (the tokenizer reads any name), or `delete=None` (falsy, as False: the file is unlinked in "
        "`finally`); `subprocess.run`'s timeout left out, None or 301 (only a hung JVM reaches it) and `check` "
        "None or left out (False either way); `split(None)` for `split(' ')` and `lstrip` for `rstrip` on a tokenizer line (it separates "
        "tokens by one space and has no space at either end: the same tokens); `MeteorProcess.__init__`'s "
        "`_lines = ''` (`_start` sets the queue before anything reads it); `_pump`'s error handler named "
        "`'REPLACE'` or `'XXreplaceXX'` (METEOR writes ASCII numbers, so no handler is looked up); `_start`'s "
        "stderr left out or None (METEOR -stdio writes nothing to stderr), its two `-` file arguments (unused "
        "in -stdio mode) and `-l EN`, and the lower-case `score`/`eval` commands (METEOR accepts either case; "
        "both checked on a real JVM: the same statistics); a double space replaced by a double space marked "
        "`XX  XX` (the hypotheses are PTB-tokenised, single-spaced; METEOR splits on whitespace)."),
    "scoring/metrics/fluency.py": (
        "Equivalent survivors: a dropped `dtype=np.float64` (numpy's default for float lists and zeros), "
        "`'UTF-8'` for `'utf-8'`, another key than `''` for a caption without a language (neither is a "
        "language of the model, so both fall back to the all-languages model), and the JSON layout options "
        "of the saved file (`ensure_ascii`, `separators`: the same payload is read back); `mtime=1` is as "
        "deterministic as `mtime=0`."),
    "scoring/metrics/mcs.py": (
        "The run of 2026-11-26 (93 of 108 killed) predates tests/scoring/test_metric_protocol.py's "
        "test_mcs_* tests, written for its survivors: each of the image, image-key, request-kind, "
        "mismatch-message, description and prefix mutants was planted by hand afterwards and fails them. "
        "Equivalent in every shipped profile: the request-kind mutants when scoring MCS beside CLIP-S (the "
        "same images are requested with the right kind), which the new test scores MCS alone to catch."),
    "scoring/metrics/specs.py": (
        "Equivalent survivors: the four mutants drop the float64 cast of one side of the product; "
        "numpy promotes a float32 array times a float64 array to float64, so the cosines are the same."),
    "scoring/metrics/umic.py": (
        "Equivalent survivors: the image keys passed as None (the cross-encoder then hashes each image itself: "
        "the same keys, the same values, only slower). The `w` and `prefix` survivors of the 2026-11-26 run "
        "were killed afterwards by the test that every learned family reports its registry row's `w` and "
        "`prefix` (each planted by hand, each fails it)."),
    "scoring/perturb/negatives.py": (
        "The 2026-11-26 run (257 of 279) predates "
        "test_the_borrowed_caption_of_a_umic_set_is_seeded_from_the_sets_seed_and_names_its_parent, written "
        "for its survivors: the borrowed caption's seed (`2 * 31`, `None`, `Random(None)`), its parent and the "
        "hard/random threshold (`<=`) were planted by hand afterwards and fail it. The default `lang='EN'` "
        "still passes: the perturbations give this English caption the same result with 'EN'."),
    "scoring/analysis/correlation.py": (
        "Equivalent survivors, by kind. Pearson's r does not change when a row is rescaled, so "
        "`_pearson_rows` scaled by another positive spread (the batch's largest, or 2.0 where a row is "
        "constant) gives the same r, and a constant row's r is 0/0 = nan whether or not `constant` marks "
        "it (`errstate` only quiets numpy's warning). Spearman is r of ranks, unchanged by any "
        "affine change of the ranks in `_average_ranks_rows` (x2, /3, +-1) and by the sort kind in "
        "`average_ranks` (tied values share one mean rank in any order). `_coefficients` and "
        "`_kendall_parts_of_codes` have a fast path and a general one that count the same pairs: "
        "mutants that take the other path (a size check, the names of the coefficients computed "
        "together, which side is scanned, the small-alphabet threshold, a code table one wider) or "
        "count pairs in floats change speed, not values. `_count_inversions`: a wider stride, one more "
        "merge pass, the sort kind of a value sort (not an argsort) and the dtype change nothing; "
        "`width = 2` and `width /= 2` never end (timeouts). pandas treats `dropna=None` as not dropping "
        "and sorts groups by default; `key ... or True` is a tuple already; `bootstrap_estimate` without "
        "`[name]` computes every coefficient and returns the same one; `mean_estimate`'s chunk size and "
        "`integers(n)` (low 0) draw the same resamples; float casts of float input change nothing; "
        "`cluster_bootstrap` with `n_boot < 0` has no draws and answers the same nan interval. The first "
        "run of 2026-11-27 (1,131 of 1,350, 83.8 %) led to the reference tests of "
        "`tests/analysis/test_bootstrap_reference.py`, to Spearman answering nan for a missing score "
        "as the other coefficients (it ranked nan above every number), and to deleting the unused "
        "`_tie_pairs`."),
    "scoring/perturb/ops.py": (
        "Equivalent or unreachable survivors, by kind. Unreachable: `perturb`'s outcome for a caption "
        "without tokens (every non-blank caption gives at least one: punctuation and zero-width "
        "characters are tokens) and the outcomes after 200 shuffles that all kept the order (for two "
        "or more distinct tokens a chance under 2^-200). `_Piece(..., None)` for `False`: `changed` is "
        "read as a truth value, and never for a removed piece; a removal's `drawn[...] = None` keeps the "
        "word as `False` does. `rng.random() <= p` for `<` (and `>` for `>=`) differ only when a draw "
        "equals p exactly (2^-53). In `_render`, `previous_changed`/`removal_pending` as None are falsy "
        "like False, and `previous_changed = True` after a gap is overwritten before it is read (no "
        "operation puts a changed piece right after a gap). `removed_words`' `and`/`or` regrouping keeps "
        "a no-op removal's answer []. `_replace_slots` without its `None` tokens is the default None. "
        "A one-alias join and `name or \"XXXX\"` (an unknown operation either way, the message shows "
        "the name given) read the same; `PosVocabulary(lang=\"EN\")` normalises to en, and a blank "
        "caption tagged has no tokens. The first run of 2026-11-27 (627 of 863, 72.7 %, 51 reached "
        "by no listed test) led to `tests/perturb/test_perturb_outcomes.py` and to no-op outcomes that "
        "carry only their tokens and reason (the text and spans they carried were never read)."),
    "annotation/studies/tasks.py": (
        "The run of 2026-11-27 (12:49-14:39, beside two trainings and the app's tests) copied the tree before this "
        "session's tasks.py tests and queue-order fix. Afterwards 141 of its survivors and timeouts were planted "
        "again in the new code and run against the two test files written or changed since: 51 killed, 12 not "
        "planted (the old queue_order formula; release_lease lines that are not unique), 78 survived "
        "(`benchmarks/results/mutation_tasks_replanted.md` lists each). Kinds read among those: `func.count(None)` "
        "renders `count(*)`, which counts the same rows (equivalent); `limit(None)` "
        "or `limit(2)` under `session.scalar`, a dropped `Caption.id` tie-break, `sorted` by the whole (time, id) row, "
        "`order_by(None)` where SQLite keeps insertion order (equivalent here); `existing = None` in submit_rating "
        "(the unique constraint's IntegrityError branch then edits the same rating; that branch is not reached by a "
        "one-threaded test); PostgreSQL-only code (`takes_row_locks`, `_lock_caption`, `first_open`'s savepoints, "
        "`skip_locked`), whose tests the run skipped without CAPLENS_TEST_PG_URL and CI runs. reference_texts' "
        "default limit 6 for 5 survived the replanting; test_human_score_and_references now reads seven "
        "references (planted by hand afterwards, it fails). Read on 2026-11-27 (third session), the rest: in "
        "next_rating_item, `outerjoin(counts/leased, None)` (SQLAlchemy infers the same join from the foreign "
        "key: equivalent), the leased subquery without its collection filter (it is joined to the collection's "
        "captions anyway: equivalent), the candidate limit 8 -> 9 or None and `first_open(..., None, ...)` "
        "(they differ only when another annotator fills the first eight between the query and the recount, or on "
        "PostgreSQL), `session.get(Caption, None)` for a None id (returns None: equivalent); three were real gaps, "
        "now killed by new tests in tests/annotation/test_queue_leases.py (planted by hand, each fails): a lease "
        "expiring exactly now still counting against k (`>=` in the leased subquery) or still coming first as "
        "the annotator's own (`>=` in `held`; `_taken`'s `>=` fails them too), a lease expiring exactly now left "
        "undeleted (`<` for `<=` in `_drop_expired_leases`), and the held flag dropped from the "
        "disagreement-first order. In "
        "next_transcreation_item, `limit(1)` -> None or 2 under `session.scalar` and `count(None)` (equivalent), a "
        "dropped `Caption.kind == 'candidate'` (references are never rated, so never mine or complete) and a "
        "dropped `QueueSkip.task` filter (its language filter already leaves rating skips out): equivalent; a "
        "dropped `queue_order(user)` or tie-break (per-annotator order not pinned for this queue: left); the "
        "dropped source-language filter was a real gap, killed by "
        "test_transcreation_queue_offers_only_captions_in_the_source_language (planted by hand, it fails)."),
    "scoring/training/losses.py": (
        "Equivalent survivors: every tensor here is 2-D, so `dim=-1` -> `dim=+1` and a dropped `dim=-1` "
        "(F.normalize, F.cosine_similarity and sum default to dim 1) compute the same thing; `device=None` "
        "or a dropped `device=` is the same device on the CPU the suite runs on; `positives.to(None)` keeps a "
        "bool mask that multiplies and sums to the same numbers. In `info_nce`, `log_softmax(dim=-2)`, "
        "`(log_prob * positives).sum(-2)` and `positives.sum(-2)` give the same loss: the positives mask is "
        "symmetric and pairs only texts of one image, whose rows and columns have the same number of "
        "positives, so the column-wise terms of one direction are the row-wise terms of the other "
        "(worked through by hand; all 23 survivors of the 2026-11-25 run are of these kinds). The run of "
        "2026-12-02 (403 mutants, 340 killed) adds two more equivalent kinds: in `teacher_rank_distillation` "
        "`keep = ~positives_mask(...)` for `keep &= ...`, and a dropped or None `n` there, since with "
        "image ids the mask ignores `n` and already holds the diagonal; `device=None` in "
        "`umic_cross_ranking` as above. Its 13 `twin_match_bce` mutants had no selected test: that loss's "
        "hand computation lived in test_trainer.py and moved to test_losses.py, where the recheck killed 9 of "
        "them; the other 4 are a None or dropped `device` or `dtype` of `torch.eye`, whose defaults are the "
        "CPU and float32 (equivalent)."),
    "scoring/training/trainer.py": (
        "The run started on 2026-11-28 (the 2026-11-27 run was lost with its machine's scratch folder) and goes "
        "on over sittings and machines: `--resume` keeps its statuses in benchmarks/results/mutation_progress/. "
        "Killed after the copy by tests written for its survivors (each planted by hand, each fails): "
        "store_weights_as's `.resume` name and `continue` -> `break` there, list_runs' warning and logger, "
        "read_learning_curve's missing file, the CUDA generator's device. From the 2026-11-27 run, killed since the same way: "
        "_restore_rng/_rng_state's CUDA branch (test_a_cuda_resume_sets_the_cuda_generator_it_saved...), "
        "read_result's device, learning_curve's point options, folder, log, cancel and resume "
        "(test_a_cancelled_curve_point_resumes...), save_snapshot's history and best "
        "(test_a_resumed_run_keeps_the_evaluations...), the unseeded per-micro-batch generator "
        "(test_each_micro_batch_draws...), lineage without config or data, and lineage's record keys and the "
        "older-record path, which test_a_continued_run_records_the_runs_it_continues claimed but never reached "
        "(it read a record that kept its lineage; now it reads the one without, checks each field against the "
        "run's own record, and that the kept lineage outlives the folders it names). Equivalent: `encoding=None` or "
        "'UTF-8' for 'utf-8' (UTF-8 locale); json `indent` (formatting only); `continue` -> `break` in "
        "learning_curve (budgets are sorted, so every later one is at least the full set too); "
        "`.with_suffix('.TMP')` (any scratch name); `list_runs`'s `root.is_dir() or True` (rglob of a missing "
        "folder or a file yields nothing); BatchOrder's seed formula (`- epoch`, another multiplier: any "
        "distinct seed per epoch shuffles as well); `zero_grad(set_to_none=False/None)`; `device=None` and the "
        "GradScaler branches (CUDA with fp16 only; the suite runs on the CPU); `round(loss, 7)` for 6. "
        "Timeouts: `self.step = 1` or `-= 1` (the loop never ends) and read_learning_curve with no path "
        "(the training job's worker thread died, so its test waited; fixed: the worker now survives, "
        "test_an_error_after_training_fails_that_job_and_the_next_one_still_runs). Pausing the run with "
        "SIGSTOP (for a CI run) made the two mutants then running count as timeouts; they were set back to "
        "untested in mutmut's record and tested again (both killed): stop a run, do not pause it. "
        "The copy of cab7756 (2026-11-28, three sittings, 1,238 mutants): tests written after the copy for its "
        "survivors, each planted by hand in trainer.py and each failing: the record's CUDA card name and "
        "precision label (test_the_record_names_the_cuda_card_and_the_autocast_precision); wall_s rounding, a "
        "local-time finish, the record's indent and ensure_ascii (test_the_record_is_indented_utf8...); "
        "lineage's git_commit, None on both sides in the copy, which is no git checkout "
        "(test_lineage_follows_the_bases...with_every_field); _Run.__init__'s autocast dtype and GradScaler "
        "(test_a_run_takes_its_autocast_dtype...); the scratch folder and fit_on's rows (reached only by "
        "tests/world/test_world_training.py and tests/training/test_caplens_r_fluency.py, now in this list); "
        "_Run.autocast (all six, CUDA-only) and _Run.evaluate's device (test_a_run_evaluates_on_its_own_device...); "
        "_Run.begin's map_location and a snapshot without history (test_a_resume_maps_the_snapshot...); "
        "_Run.loop's snapshot condition, the cancel message and train's unknown-recipe message "
        "(test_snapshots_fall_every_checkpoint_steps...); the ETA rate (`/`, `+`), the elapsed time "
        "(`+ self.started`, elapsed_before), the time limit's strict `>` and the periodic evaluation's label "
        "(test_on_a_clock_of_a_minute_a_step..., a stand-in clock that moves a minute a step); train handing "
        "its log and cancel to learning_curve (test_train_hands_its_log_and_cancel_to_the_learning_curve); the "
        "device train returns (test_what_train_returns_is_what_the_record_says); _clock's `// 61` (3,540 s "
        "prints 59:00); split_rows' four refusals (test_split_rows_names_what_left_it_without_rows); the "
        "cosine schedule's `max(2, ...)` when one step follows the warm-up. Equivalent in that copy: "
        "`say = lambda message: 0` (what a log returns is never read); `'ADAMW'.lower()`; `encoding=None` or "
        "'UTF-8'; `ensure_ascii=None` (falsy); `rmtree(..., ignore_errors=...)` on `.resume`, which always "
        "exists at save; `BatchOrder._epoch = -2`; `.to(None)` and `prepare(..., None)` on the CPU."),
}


COPY_RECORD = "caplens-copy.json"


def _git_head() -> str | None:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", *PACKAGES, "tests"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return (done.stdout.strip() + (" with uncommitted changes" if dirty else "")) if done.returncode == 0 else None


def _scratch_copy(module: str, tests: list[str], workers_dir: Path, resume: bool = False) -> Path:
    """The packages, tests and pyproject.toml of the working tree, with a [tool.mutmut] section
    that mutates `module` only and selects `tests`. With `resume`, an earlier copy of the same
    module in `workers_dir` is kept as it is: mutmut then tests only the mutants it has no result
    for, so a module that takes hours can run over several sittings on the same code."""
    work = workers_dir / module.replace("/", "_").removesuffix(".py")
    if resume and (work / COPY_RECORD).is_file():
        return work
    shutil.rmtree(work, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, work / package, ignore=ignore)
    shutil.copytree(ROOT / "tests", work / "tests", ignore=ignore)
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = "\n".join([
        "", "[tool.mutmut]",
        f"source_paths = {json.dumps(list(PACKAGES))}",
        f"only_mutate = {json.dumps([module])}",
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-x", "-q"]',
        'process_isolation = "forkserver"',  # torch is not fork-safe once imported
        "use_git_change_detection = false",
        # mutmut's CPU limit is 30 x (the tests' own time + this): a session fixture's setup (a
        # scorer loading every model) is charged to the first test that used it in the timing run,
        # so a mutant reached only by a later 0.3 s test hit 38 s of CPU while loading (SPICE's).
        "timeout_constant = 5.0",
        "",
    ])
    (work / "pyproject.toml").write_text(pyproject + section, encoding="utf-8")
    (work / COPY_RECORD).write_text(json.dumps({
        "commit": _git_head(), "copied_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "id": uuid.uuid4().hex[:12]}), encoding="utf-8")
    return work


def copy_tests(work: Path) -> list[str]:
    """The tests a copy selects: those of MODULES when it was made (a kept copy keeps them)."""
    import tomllib

    config = tomllib.loads((work / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["mutmut"]["pytest_add_cli_args_test_selection"]


def _progress_file(module: str) -> Path:
    return PROGRESS / (module.replace("/", "_").removesuffix(".py") + ".json")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def carried_progress(module: str, work: Path) -> dict | None:
    """The statuses of a run stopped on another machine (a fresh checkout has no kept copy), from
    benchmarks/results/mutation_progress/: valid only while the module is byte for byte the code
    those mutants were made from, since mutmut numbers mutants by their place in the code."""
    path = _progress_file(module)
    if not path.is_file():
        return None
    saved = json.loads(path.read_text(encoding="utf-8"))
    if saved["module_sha256"] != _digest(work / module):
        print(f"{module}: the progress in {path} is of other code (the module changed since): "
              "starting over", flush=True)
        return None
    return saved


def save_progress(module: str, work: Path, statuses: dict[str, str], sittings: list[dict]) -> Path:
    """Keep a stopped run's statuses in the repository, so that the next sitting, on any machine,
    tests only the mutants no sitting has tested."""
    path = _progress_file(module)
    path.parent.mkdir(parents=True, exist_ok=True)
    tested = sum(1 for status in statuses.values() if status != "not checked")
    path.write_text(json.dumps({"module": module, "module_sha256": _digest(work / module), "sittings": sittings,
                                "tested": tested, "mutants": len(statuses), "statuses": dict(sorted(statuses.items()))},
                               indent=0), encoding="utf-8")
    return path


def _local_statuses(work: Path) -> dict[str, str]:
    """mutmut's own record of the copy: mutant name -> status."""
    statuses: dict[str, str] = {}
    for line in _mutmut(work, "results", "--all", "true").splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and "__mutmut_" in name:
            statuses[name] = status.strip()
    return statuses


def _mutmut(work: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run([sys.executable, "-m", "mutmut", *args], cwd=work, capture_output=True, text=True,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    if check and done.returncode != 0:
        raise RuntimeError(f"mutmut {' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def _changed_lines(diff: str) -> list[str]:
    return [line for line in diff.splitlines()
            if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))]


def run_module(module: str, workers_dir: Path, max_children: int, resume: bool = False) -> dict | None:
    """The module's result, or None where a resumable run was stopped (`resume`: the kept copy
    and mutmut's record of the mutants tested so far stay in `workers_dir`)."""
    tests = [t for t in MODULES[module] if (ROOT / t).is_file()]
    missing = sorted(set(MODULES[module]) - set(tests))
    if not tests:
        raise SystemExit(f"{module}: none of its tests exist ({', '.join(missing)})")
    work = _scratch_copy(module, tests, workers_dir, resume)
    used = copy_tests(work)
    if used != tests:
        print(f"{module}: the kept copy runs the tests it was made with: {', '.join(used)}", flush=True)
    tests = used
    copy = json.loads((work / COPY_RECORD).read_text(encoding="utf-8")) | {"tests": used}
    timing = work / "caplens-wall.json"  # this copy's sittings' wall time, added up
    earlier = json.loads(timing.read_text(encoding="utf-8"))["wall_s"] if timing.is_file() else 0.0
    progress = carried_progress(module, work) if resume else None
    carried = {name: status for name, status in (progress or {}).get("statuses", {}).items() if status != "not checked"}
    names: list[str] = []  # with carried results: only the mutants that no sitting has tested
    if carried:
        local = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"] if (
            meta := work / "mutants" / f"{module}.meta").is_file() else {}
        names = [name for name in progress["statuses"] if name not in carried and local.get(name) is None]
        print(f"{module}: {len(carried)} mutants tested in earlier sittings ({progress['sittings'][-1]['commit']}); "
              f"{len(names)} to go", flush=True)
    started = time.time()
    if names or not carried:
        _mutmut(work, "run", "--max-children", str(max_children), *names, check=False)
    wall = earlier + time.time() - started
    timing.write_text(json.dumps({"wall_s": wall}), encoding="utf-8")
    statuses = _local_statuses(work)
    if not statuses:
        raise RuntimeError(f"{module}: mutmut produced no mutants; see {work}")
    statuses |= {name: status for name, status in carried.items() if statuses.get(name) == "not checked"}
    this = copy.get("id") or copy["copied_at"]  # a copy made before copies had an id
    sittings = [s for s in (progress or {}).get("sittings", []) if (s.get("id") or s["copied_at"]) != this]
    sittings.append(copy | {"wall_s": round(wall, 1)})
    wall = sum(s["wall_s"] for s in sittings)
    untested = sum(1 for status in statuses.values() if status == "not checked")
    if resume and untested:  # stopped before the end: continue at the next sitting, here or elsewhere
        kept = save_progress(module, work, statuses, sittings)
        print(f"{module}: stopped with {untested} of {len(statuses)} mutants untested; run again with "
              f"--resume --work-dir {workers_dir} to continue (on another machine, commit {kept})",
              flush=True)
        return None
    counts = {status: sum(1 for s in statuses.values() if s == status) for status in sorted(set(statuses.values()))}
    not_killed = [name for name, status in sorted(statuses.items()) if status != "killed"]
    survivors = []
    for name in not_killed:
        diff = _mutmut(work, "show", name, check=False)
        survivors.append({"mutant": name, "status": statuses[name], "change": _changed_lines(diff)})
    killed = counts.get("killed", 0)
    result = {
        "module": module, "tests": tests, "tests_missing": missing, "mutants": len(statuses), "counts": counts,
        # killed out of all mutants: survivors and mutants no selected test reaches both count against
        "score": round(killed / len(statuses), 4), "wall_s": round(wall, 1),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "not_killed": survivors,
        "code": copy, "sittings": sittings,
    }
    shutil.rmtree(work, ignore_errors=True)
    _progress_file(module).unlink(missing_ok=True)  # the finished run's result supersedes it
    return result


def _block_span(source: str, keyword: str, name: str, start: int = 0) -> tuple[int, int] | None:
    """Where `def name(` / `class name` starts (at or after `start`) and where its block ends: the
    next line indented no deeper than its first line."""
    import re

    match = re.compile(rf"^([ \t]*)(?:async )?{keyword} {re.escape(name)}\b", flags=re.M).search(source, start)
    if match is None:
        return None
    indent = len(match.group(1))
    # (a line that closes a multi-line signature, `) -> str:`, does not end it)
    end = re.compile(rf"^[ \t]{{0,{indent}}}[^\s)\]}}]", flags=re.M).search(source, source.index("\n", match.end()) + 1)
    return match.start(), len(source) if end is None else end.start()


GONE = "gone (its lines are nowhere in today's code)"
NOT_PLANTED = "not planted (its lines are not in its function once today)"


def _removed_and_added(survivor: dict) -> tuple[str, str]:
    """The lines a recorded mutant removed and those it put in their place."""
    return tuple("\n".join(line[1:] for line in survivor["change"] if line.startswith(sign)) for sign in "-+")


def plant(source: str, survivor: dict) -> str | None:
    """`source` with one recorded survivor's change made again inside its own function (mutmut
    names it: `x_<function>__mutmut_<n>`, or `xǁ<Class>ǁ<method>__mutmut_<n>`), or None where
    today's code no longer has the lines it changed."""
    name = survivor["mutant"].split(".")[-1].split("__mutmut_")[0]
    if "ǁ" in name:
        _, cls, method = name.split("ǁ")
        outer = _block_span(source, "class", cls)
        span = outer and _block_span(source[:outer[1]], "def", method, outer[0])
    else:
        span = _block_span(source, "def", name.removeprefix("x_"))
    old, new = _removed_and_added(survivor)
    if not old or span is None:
        return None
    body = source[span[0]:span[1]]
    if body.count(old) != 1:
        return None
    return source[:span[0]] + body.replace(old, new) + source[span[1]:]


def _pytest(work: Path, tests: list[str], *options: str, timeout_s: float | None = None) -> int:
    """Exit status of the module's tests in a scratch copy."""
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options, *tests], cwd=work,
                          capture_output=True, text=True, timeout=timeout_s,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}).returncode


def _recheck_some(module: str, tests: list[str], survivors: list[dict], work: Path, timeout_s: float) -> dict[str, str]:
    target = work / module
    original = target.read_text(encoding="utf-8")
    outcome: dict[str, str] = {}
    try:
        for survivor in survivors:
            planted = plant(original, survivor)
            if planted is None:
                outcome[survivor["mutant"]] = NOT_PLANTED if _removed_and_added(survivor)[0] in original else GONE
                continue
            target.write_text(planted, encoding="utf-8")
            try:
                failed = _pytest(work, tests, "-x", timeout_s=timeout_s)
                outcome[survivor["mutant"]] = "killed" if failed else "survived"
            except subprocess.TimeoutExpired:
                outcome[survivor["mutant"]] = "timeout"
            print(f"  {survivor['mutant'].split('.')[-1]}: {outcome[survivor['mutant']]}", flush=True)
    finally:
        target.write_text(original, encoding="utf-8")
    return outcome


def recheck(module: str, workers_dir: Path, timeout_s: float | None = None, workers: int = 1) -> dict:
    """Plant each survivor of the module's last run in a copy of today's tree and run the
    module's tests: which of them today's tests kill. Minutes where a full run takes hours;
    the full run stays the score of record. `workers` copies run side by side."""
    from concurrent.futures import ThreadPoolExecutor

    results = json.loads((RESULTS / "mutation.json").read_text(encoding="utf-8"))
    if module not in results:
        raise SystemExit(f"{module}: no earlier run in {RESULTS / 'mutation.json'} to recheck")
    tests = [t for t in MODULES[module] if (ROOT / t).is_file()]
    survivors = results[module]["not_killed"]
    copies = [_scratch_copy(module, tests, workers_dir / f"recheck-{i}") for i in range(max(1, workers))]
    started = time.time()  # today's tests on today's code: they must pass, and they set the time limit
    if _pytest(copies[0], tests) != 0:
        raise SystemExit(f"{module}: its tests fail on today's code (run them: {' '.join(tests)})")
    timeout_s = timeout_s or max(60.0, 5 * (time.time() - started))
    with ThreadPoolExecutor(len(copies)) as pool:
        parts = pool.map(lambda i: _recheck_some(module, tests, survivors[i::len(copies)], copies[i], timeout_s),
                         range(len(copies)))
        outcome = {name: status for part in parts for name, status in part.items()}
    result = results[module]
    result["recheck"] = {"finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                         "outcome": {s["mutant"]: outcome[s["mutant"]] for s in survivors}}
    for work in copies:
        shutil.rmtree(work, ignore_errors=True)
    return result


def rechecked_score(result: dict) -> float | None:
    """The score once a recheck is counted: survivors today's tests kill count as killed, and
    mutants whose lines are gone from the code leave the count. None without a recheck."""
    outcome = result.get("recheck", {}).get("outcome", {})
    if not outcome:
        return None
    gone = sum(1 for v in outcome.values() if v.startswith("gone"))  # GONE, or a reason read by hand
    killed = result["counts"].get("killed", 0) + sum(1 for v in outcome.values() if v.startswith("killed"))
    return killed / (result["mutants"] - gone)


def _write(module_result: dict) -> None:
    """Add one module's result to the files, keeping the others' (read again now: another run
    of this script may have written meanwhile)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "mutation.json"
    results = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    results[module_result["module"]] = module_result
    for module, result in results.items():  # the reasons read for survivors live in NOTES, above
        if module in NOTES:
            result["notes"] = NOTES[module]
    (RESULTS / "mutation.json").write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    lines = ["# Mutation testing", "",
             "`python benchmarks/mutation.py MODULE ...` (mutmut; each module against the tests listed in "
             "`benchmarks/mutation.py`). Score = killed / all mutants; mutants that survive or that no selected "
             "test reaches count against it. *After recheck*: the same, with the survivors that a later "
             "`--recheck` found killed by today's tests counted as killed, and those whose code is gone left out.", "",
             "| module | mutants | killed | survived | no tests | other | score | after recheck | tests | wall | run |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for module in sorted(results):
        r = results[module]
        c = r["counts"]
        other = r["mutants"] - c.get("killed", 0) - c.get("survived", 0) - c.get("no tests", 0)
        lines.append(f"| `{module}` | {r['mutants']} | {c.get('killed', 0)} | {c.get('survived', 0)} | "
                     f"{c.get('no tests', 0)} | {other} | {r['score']:.1%} | "
                     f"{'—' if rechecked_score(r) is None else f'{rechecked_score(r):.1%}'} | {len(r['tests'])} | "
                     f"{r['wall_s'] / 60:.0f} min | {r['finished_at'][:10]} |")
    for module in sorted(results):
        r = results[module]
        lines += ["", f"## `{module}`: {len(r['not_killed'])} not killed", "",
                  "Tests: " + ", ".join(f"`{t}`" for t in r["tests"]) + "."]
        if r.get("code"):
            lines += ["", f"Code and tests as at commit {r['code']['commit']}, copied {r['code']['copied_at']}."]
        if r.get("notes"):
            lines += ["", r["notes"]]
        rechecked = r.get("recheck", {}).get("outcome", {})
        if rechecked:
            tally = {k: sum(1 for v in rechecked.values() if v == k) for k in sorted(set(rechecked.values()))}
            lines += ["", f"Rechecked {r['recheck']['finished_at'][:10]} (`--recheck`: each survivor planted in the "
                      "code and tests of that day): " + ", ".join(f"{n} {k}" for k, n in tally.items()) + "."]
        for survivor in r["not_killed"]:
            then = rechecked.get(survivor["mutant"])
            status = survivor["status"] + (f"; rechecked: {then}" if then else "")
            lines += ["", f"- `{survivor['mutant'].split('.')[-1]}` ({status})", "", "  ```diff"]
            lines += [f"  {line}" for line in survivor["change"]] + ["  ```"]
    (RESULTS / "mutation.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def status(workers_dir: Path) -> list[str]:
    """One line per module copy kept in `workers_dir`: its commit and mutmut's counts so far
    (read from the record mutmut keeps, `mutants/<module>.meta`)."""
    lines = []
    for copy in sorted(p.parent for p in workers_dir.glob(f"*/{COPY_RECORD}")):
        from mutmut.stats import status_by_exit_code  # only kept copies need mutmut to be read

        about = json.loads((copy / COPY_RECORD).read_text(encoding="utf-8"))
        for meta in sorted((copy / "mutants").rglob("*.py.meta")):
            codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"].values()
            counts = Counter(status_by_exit_code[code] for code in codes)
            tested = len(codes) - counts["not checked"]
            module = meta.relative_to(copy / "mutants").as_posix().removesuffix(".meta")
            lines.append(f"{module} (copy of {about['commit']}, {about['copied_at']}): {tested} of {len(codes)} tested; "
                         + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    for kept in sorted(PROGRESS.glob("*.json")):  # stopped runs carried in the repository
        saved = json.loads(kept.read_text(encoding="utf-8"))
        counts = Counter(saved["statuses"].values())
        lines.append(f"{saved['module']} (kept in {kept.name}, {len(saved['sittings'])} sitting(s), last of "
                     f"{saved['sittings'][-1]['commit']}): {saved['tested']} of {saved['mutants']} tested; "
                     + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="modules to mutate (default: all of --list)")
    parser.add_argument("--list", action="store_true", help="print the modules and their tests")
    parser.add_argument("--max-children", type=int, default=1, help="mutants tested at once (default 1; also for --recheck)")
    parser.add_argument("--work-dir", default=None, help="scratch folder (default: a new temporary one)")
    parser.add_argument("--recheck", action="store_true",
                        help="plant the survivors of each module's last run in today's code and run its tests")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds per rechecked survivor (default: 5 times the tests' own run, at least 60)")
    parser.add_argument("--resume", action="store_true",
                        help="with --work-dir: keep each module's copy and mutmut's record there, so that a run "
                             "stopped (pkill -f 'mutmut run') continues where it was at the next call, on the "
                             "same copy; a stopped run's statuses also go to benchmarks/results/mutation_progress/, "
                             "and a fresh machine continues from there while the module's code is unchanged")
    parser.add_argument("--status", action="store_true",
                        help="with --work-dir: how far each kept (--resume) module has got, from mutmut's record")
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite mutation.md from mutation.json (and the NOTES here) without running")
    args = parser.parse_args(argv)
    if args.report_only:
        results = json.loads((RESULTS / "mutation.json").read_text(encoding="utf-8"))
        for module, result in results.items():
            if module in NOTES:
                result["notes"] = NOTES[module]
            _write(result)
        return 0
    if args.status:
        if not args.work_dir:
            parser.error("--status needs --work-dir (stopped runs kept in the repository are listed too)")
        for line in status(Path(args.work_dir)):
            print(line)
        return 0
    if args.list:
        for module, tests in MODULES.items():
            print(f"{module}: {' '.join(tests)}")
        return 0
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"not a module this script knows: {', '.join(unknown)} (see --list)")
    try:
        import mutmut  # noqa: F401  (installed?)
    except ImportError:
        parser.error('mutmut is not installed: pip install -e ".[mutation]"')
    if args.resume and not args.work_dir:
        parser.error("--resume needs --work-dir: the folder that keeps the copy between sittings")
    workers_dir = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="caplens-mutation-"))
    if args.recheck:
        earlier = json.loads((RESULTS / "mutation.json").read_text(encoding="utf-8"))
        for module in args.modules or [m for m in MODULES if m in earlier]:
            print(f"{module}: rechecking the last run's survivors ...", flush=True)
            _write(recheck(module, workers_dir, args.timeout, args.max_children))
    else:
        for module in args.modules or list(MODULES):
            print(f"{module}: mutating against {', '.join(MODULES[module])} ...", flush=True)
            result = run_module(module, workers_dir, args.max_children, args.resume)
            if result is None:
                return 1
            if module in NOTES:
                result["notes"] = NOTES[module]
            _write(result)
            print(f"{module}: {result['counts']} score {result['score']:.1%} in {result['wall_s'] / 60:.1f} min",
                  flush=True)
    if not args.work_dir:
        shutil.rmtree(workers_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
