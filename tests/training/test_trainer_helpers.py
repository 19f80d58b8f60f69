"""The trainer's small decisions, each against values worked out by hand: which device and
autocast precision a config gets, the schedule's factor at each step, which optimizer with which
settings, how a duration is printed, and which `out` folders a run refuses."""
import contextlib
import json
import math
import time
from pathlib import Path

import pytest
import torch

from scoring.training import load_config
from scoring.training import trainer


def _config(**overrides):
    return load_config("pr-mcs-tiny", out="/nonexistent/run", **overrides)


def _quiet_run(config):
    """A run set up (data, model, optimizer) but not started, with its messages dropped."""
    return trainer._Run(config, lambda message: None, lambda fraction, message: None)


def test_device_follows_the_config_and_refuses_cuda_where_there_is_none(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert trainer._device(_config(device="cpu")) == torch.device("cpu")
    assert trainer._device(_config(device="auto")) == torch.device("cpu")
    with pytest.raises(ValueError, match=r"^device 'cuda' requested but CUDA is not available here$"):
        trainer._device(_config(device="cuda"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert trainer._device(_config(device="auto")) == torch.device("cuda")
    assert trainer._device(_config(device="cuda")) == torch.device("cuda")


@pytest.mark.parametrize("precision, bf16, expected", [
    ("auto", True, torch.bfloat16), ("auto", False, torch.float16), ("fp16", True, torch.float16),
    ("bf16", True, torch.bfloat16), ("fp32", True, None)])
def test_autocast_is_half_precision_on_cuda_only(monkeypatch, precision, bf16, expected):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    config = _config(precision=precision)
    assert trainer._autocast_dtype(config, torch.device("cuda")) is expected
    assert trainer._autocast_dtype(config, torch.device("cpu")) is None


def test_cosine_schedule_warms_up_then_falls_to_zero_and_stays_there():
    # 10 steps, warm-up 0.2 -> 2 steps: 1/2, 2/2; then cos over 8 steps, progress k/8
    factor = trainer._schedule(_config(schedule={"name": "cosine", "warmup": 0.2}), 10)
    expected = [0.5, 1.0] + [0.5 * (1 + math.cos(math.pi * k / 8)) for k in range(8)]
    assert [factor(s) for s in range(10)] == pytest.approx(expected, abs=1e-12)
    assert factor(10) == pytest.approx(0.0, abs=1e-12) and factor(25) == pytest.approx(0.0, abs=1e-12)
    # an integer warm-up counts steps; the defaults are cosine with 5 % warm-up (20 steps -> 1)
    assert trainer._schedule(_config(schedule={"warmup": 3}), 10)(2) == pytest.approx(1.0)
    assert trainer._schedule(_config(schedule={"warmup": 3}), 10)(1) == pytest.approx(2 / 3)
    default = trainer._schedule(_config(schedule={}), 20)
    assert default(0) == 1.0 and default(1) == 1.0
    assert default(2) == pytest.approx(0.5 * (1 + math.cos(math.pi / 19)))
    # no warm-up, one step: the whole schedule is its first factor
    assert trainer._schedule(_config(schedule={"warmup": 0}), 1)(0) == 1.0
    # one step after the warm-up: the cosine runs its whole course in that one step
    after_warmup = trainer._schedule(_config(schedule={"warmup": 3}), 4)
    assert after_warmup(3) == 1.0 and after_warmup(4) == pytest.approx(0.0, abs=1e-12)


def test_constant_schedule_and_an_unknown_one():
    factor = trainer._schedule(_config(schedule={"name": "constant", "warmup": 4}), 8)
    assert [factor(s) for s in range(8)] == pytest.approx([0.25, 0.5, 0.75, 1, 1, 1, 1, 1])
    with pytest.raises(ValueError, match=r"^unknown schedule 'linear': use cosine or constant$"):
        trainer._schedule(_config(schedule={"name": "linear"}), 8)


@pytest.mark.parametrize("warmup", [1.0, 2.5, -0.1])
def test_a_warm_up_fraction_outside_0_to_below_1_is_refused(warmup):
    """A float warm-up is a share of the steps: 1.0 would warm up over the whole run and 2.5 never
    reach the full rate; an integer counts steps."""
    with pytest.raises(ValueError, match=rf"^schedule.warmup {warmup}: a fraction of the steps is from 0 up to "
                                         r"below 1; give a number of steps as an integer$"):
        trainer._schedule(_config(schedule={"warmup": warmup}), 8)


def test_optimizer_by_name_with_the_configs_settings():
    params = [torch.nn.Parameter(torch.zeros(2))]
    adamw = trainer._optimizer(_config(optimizer={"name": "AdamW", "lr": 3e-4, "weight_decay": 0.02}), params)
    assert type(adamw) is torch.optim.AdamW
    assert adamw.param_groups[0]["lr"] == 3e-4 and adamw.param_groups[0]["weight_decay"] == 0.02
    assert type(trainer._optimizer(_config(optimizer={"lr": 1e-3}), params)) is torch.optim.AdamW  # the default
    assert type(trainer._optimizer(_config(optimizer={"name": "adam", "lr": 1e-3}), params)) is torch.optim.Adam
    sgd = trainer._optimizer(_config(optimizer={"name": "sgd", "lr": 0.1, "momentum": 0.9}), params)
    assert type(sgd) is torch.optim.SGD and sgd.param_groups[0]["momentum"] == 0.9
    with pytest.raises(ValueError, match=r"^unknown optimizer 'lamb': use adamw, adam, sgd$"):
        trainer._optimizer(_config(optimizer={"name": "lamb"}), params)


@pytest.mark.parametrize("seconds, printed", [
    (0, "0:00"), (59.9, "0:59"), (61, "1:01"), (3540, "59:00"), (3599, "59:59"), (3600, "1:00:00"), (3661, "1:01:01"),
    (36000 + 60 * 5 + 7, "10:05:07")])
def test_clock(seconds, printed):
    assert trainer._clock(seconds) == printed


def test_a_run_refuses_a_finished_folder_nothing_to_resume_and_starting_over_an_interrupted_one(tmp_path):
    finished, empty, interrupted = tmp_path / "finished", tmp_path / "empty", tmp_path / "interrupted"
    (finished / trainer.RESULT_FILE).parent.mkdir()
    (finished / trainer.RESULT_FILE).write_text("{}")
    (interrupted / trainer.SNAPSHOT).parent.mkdir(parents=True)
    (interrupted / trainer.SNAPSHOT).write_bytes(b"")
    for resume in (False, True):
        with pytest.raises(ValueError, match=f"^{finished} already holds a finished run: choose another `out`$"):
            trainer._check_out(finished, resume)
    with pytest.raises(ValueError, match=rf"^nothing to resume in {empty}: no snapshot \(the run never reached "
                                         r"its first one\)$"):
        trainer._check_out(empty, True)
    with pytest.raises(ValueError, match=f"^{interrupted} holds an interrupted run: resume it, or choose another `out`$"):
        trainer._check_out(interrupted, False)
    trainer._check_out(empty, False)  # a new run
    trainer._check_out(interrupted, True)  # a resumed one


def test_seeding_sets_threads_and_every_generator(monkeypatch):
    import random

    import numpy as np

    calls = {}
    monkeypatch.setattr(torch, "set_num_threads", lambda n: calls.setdefault("threads", n))
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda on, warn_only: calls.setdefault("det", (on, warn_only)))
    trainer._seed_everything(_config(seed=7, threads=3), torch.device("cpu"))
    assert calls == {"threads": 3, "det": (True, True)}
    draws = (torch.rand(1).item(), random.random(), np.random.rand())
    torch.manual_seed(7), random.seed(7), np.random.seed(7)
    assert draws == (torch.rand(1).item(), random.random(), np.random.rand())
    calls.clear()
    trainer._seed_everything(_config(seed=7, threads=None), torch.device("cuda"))
    assert calls == {"det": (False, True)}  # CUDA kernels stay fast; no thread count forced


@pytest.mark.parametrize("dtype, precision", [(torch.bfloat16, "bfloat16"), (torch.float16, "float16"), (None, "fp32")])
def test_the_record_names_the_cuda_card_and_the_autocast_precision(monkeypatch, tmp_path, dtype, precision):
    """What a GPU run writes in training.json, from a CPU run whose device says CUDA: the card's
    name (asked of the run's own device) and the autocast dtype, or fp32 without autocast."""
    run = _quiet_run(load_config("pr-mcs-tiny", out=str(tmp_path / "run")))
    asked = []
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: asked.append(device) or "NVIDIA H100 80GB HBM3")
    run.device, run.autocast_dtype = torch.device("cuda", 1), dtype
    record = run.save({"loss": 0.5}, 0, None)
    assert (record["device"], record["precision"]) == ("NVIDIA H100 80GB HBM3", precision)
    assert record["before"] == {} and record["history"] == [] and record["losses"] == []  # nothing evaluated or run
    assert asked == [torch.device("cuda", 1)]
    assert json.loads((tmp_path / "run" / trainer.RESULT_FILE).read_text())["precision"] == precision


def test_the_record_is_indented_utf8_with_its_wall_time_in_tenths_and_its_end_in_utc(monkeypatch, tmp_path):
    """training.json is for people too: one-space indents, non-ASCII text as written, the wall
    time to a tenth of a second, and the finishing time in UTC whatever the machine's zone."""
    import time
    from datetime import datetime, timezone

    run = _quiet_run(load_config("pr-mcs-tiny", out=str(tmp_path / "run")))
    run.elapsed = lambda: 12.3456
    run.state.warnings = ["Übersetzung: 3 Zeilen ohne Bild"]
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        record = run.save({"loss": 0.5}, 0, None)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert record["wall_s"] == 12.3
    finished = datetime.strptime(record["finished_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert abs((datetime.now(timezone.utc) - finished).total_seconds()) < 120
    text = (tmp_path / "run" / trainer.RESULT_FILE).read_text(encoding="utf-8")
    assert text.startswith('{\n "recipe": "pr-mcs",\n') and '"Übersetzung: 3 Zeilen ohne Bild"' in text


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, None])
def test_a_run_takes_its_autocast_dtype_from_its_config_and_scales_only_fp16_gradients(monkeypatch, tmp_path, dtype):
    """The run asks `_autocast_dtype` with its own config and device; only fp16 gets a CUDA
    GradScaler (bf16 has fp32's exponent range and needs none)."""
    asked = []
    monkeypatch.setattr(trainer, "_autocast_dtype", lambda config, device: asked.append((config.precision, device)) or dtype)
    config = load_config("pr-mcs-tiny", out=str(tmp_path / "run"), precision="fp16")
    started = time.time()
    with pytest.warns(UserWarning) if dtype == torch.float16 else contextlib.nullcontext():  # no CUDA here
        run = _quiet_run(config)
    assert asked == [("fp16", torch.device("cpu"))] and run.autocast_dtype is dtype
    assert 0 <= run.elapsed() <= time.time() - started  # a new run has no time from earlier sittings
    if dtype == torch.float16:
        assert isinstance(run.scaler, torch.amp.GradScaler) and run.scaler._device == "cuda"
    else:
        assert run.scaler is None


def test_a_run_evaluates_on_its_own_device_under_autocast_to_its_own_dtype(monkeypatch, tmp_path):
    """What a CUDA run would enter, checked on the CPU: autocast for device type "cuda" at the
    run's dtype, nothing without one, and the recipe's evaluation given the run's device."""
    import warnings

    run = _quiet_run(load_config("pr-mcs-tiny", out=str(tmp_path / "run")))
    assert isinstance(run.autocast(), contextlib.nullcontext)
    run.autocast_dtype = torch.bfloat16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CUDA is not available here: torch disables the context
        context = run.autocast()
    assert isinstance(context, torch.autocast) and (context.device, context.fast_dtype) == ("cuda", torch.bfloat16)
    run.autocast_dtype = None
    given = []
    monkeypatch.setattr(run.recipe, "evaluate", lambda state, rows, device: given.append((state, rows, device)) or {"m": 1.0})
    assert run.evaluate("after") == {"m": 1.0}
    assert given == [(run.state, run.eval_rows, run.device)] and run.module.training


def test_a_resume_maps_the_snapshot_to_the_runs_device_and_reads_one_kept_before_evaluations_were(monkeypatch, tmp_path):
    """A snapshot is loaded onto the run's own device (one written on CUDA resumes on the CPU),
    and one written before periodic evaluations were kept resumes with none."""
    import threading

    from scoring.training import Cancelled, train

    out = tmp_path / "run"
    cancel = threading.Event()
    with pytest.raises(Cancelled):
        train(load_config("pr-mcs-tiny", out=str(out)), cancel=cancel,
              progress=lambda fraction, message: "step 3/6" in message and cancel.set())
    snapshot = torch.load(out / trainer.SNAPSHOT, weights_only=False)
    del snapshot["history"], snapshot["best"]
    torch.save(snapshot, out / trainer.SNAPSHOT)
    loaded, real = [], torch.load
    monkeypatch.setattr(torch, "load", lambda path, **kw: loaded.append((Path(path).name, kw.get("map_location"))) or real(path, **kw))
    result = train(load_config("pr-mcs-tiny", out=str(out)), resume=True)
    assert ("snapshot.pt", torch.device("cpu")) in loaded
    record = json.loads((result.out_dir / trainer.RESULT_FILE).read_text())
    assert record["history"] == [] and record["selected_step"] == 6 and len(record["losses"]) == 6


def test_snapshots_fall_every_checkpoint_steps_before_the_last_and_a_cancel_says_where(monkeypatch, tmp_path):
    import dataclasses
    import threading

    from scoring.training import Cancelled, train

    snapshots, real = [], trainer._Run.save_snapshot
    monkeypatch.setattr(trainer._Run, "save_snapshot", lambda run: snapshots.append(run.step) or real(run))
    train(load_config("pr-mcs-tiny", out=str(tmp_path / "whole")))  # 6 steps, a snapshot every 2
    assert snapshots == [2, 4]  # none at the last step: the run is finished there
    snapshots.clear()
    cancel = threading.Event()
    with pytest.raises(Cancelled) as stopped:
        train(load_config("pr-mcs-tiny", out=str(tmp_path / "cut")), cancel=cancel,
              progress=lambda fraction, message: "step 3/6" in message and cancel.set())
    assert str(stopped.value) == "cancelled at step 3/6" and snapshots == [2, 3]
    unknown = dataclasses.replace(load_config("pr-mcs-tiny", out=str(tmp_path / "x")), recipe="bleu")
    with pytest.raises(ValueError) as refused:
        train(unknown)
    assert str(refused.value) == f"unknown recipe 'bleu'; known: {', '.join(trainer.RECIPES)}"


def test_on_a_clock_of_a_minute_a_step_the_eta_counts_the_steps_left_and_the_time_limit_must_be_passed(monkeypatch, tmp_path):
    """Each step takes exactly one minute on a stand-in clock: step k of 6 says k minutes
    elapsed and 6 - k minutes left; a limit of 180 s is not yet passed after step 3 (exactly
    180 s), so step 4 is taken and the run stops after it. Periodic evaluations say their step."""
    from scoring.training import train

    now = [1_000_000.0]

    class Clock:  # the time module, but its time() moves only when a step is taken
        def __getattr__(self, name):
            return getattr(time, name)

        def time(self):
            return now[0]

    real_step = trainer._Run.optimise_one_step

    def a_minute_long(run):
        now[0] += 60.0
        return real_step(run)

    monkeypatch.setattr(trainer, "time", Clock())
    monkeypatch.setattr(trainer._Run, "optimise_one_step", a_minute_long)
    said, told = [], []
    result = train(load_config("pr-mcs-tiny", out=str(tmp_path / "run"), time_limit_s=180, eval_every=2),
                   log=said.append, progress=lambda fraction, message: told.append(message))
    steps = [line for line in said if line.startswith("pr-mcs step ")]
    assert [line.split(" elapsed")[0].rsplit(" ", 1)[1] + " " + line.split("ETA ")[1] for line in steps] == [
        "1:00 5:00", "2:00 4:00", "3:00 3:00", "4:00 2:00"]
    assert "time limit of 180 s reached at step 4/6: stopping early" in said
    record = json.loads((result.out_dir / trainer.RESULT_FILE).read_text(encoding="utf-8"))
    assert record["stopped_early_at"] == 4 and record["wall_s"] == 240.0
    assert any(line.startswith("step 2: ") for line in said)
    assert any(message.startswith("evaluating step 2 on ") for message in told)


def test_what_train_returns_is_what_the_record_says(monkeypatch, tmp_path):
    """The TrainResult a caller gets (the Train tab shows it) carries the record's device, the
    card's name on a GPU run, and its wall time, not defaults."""
    from scoring.training import train

    real_save = trainer._Run.save
    monkeypatch.setattr(trainer._Run, "save", lambda run, *args: {**real_save(run, *args), "device": "NVIDIA H100 80GB HBM3"})
    result = train(load_config("pr-mcs-tiny", out=str(tmp_path / "run")))
    record = json.loads((tmp_path / "run" / trainer.RESULT_FILE).read_text(encoding="utf-8"))
    assert result.device == "NVIDIA H100 80GB HBM3" and result.wall_s == record["wall_s"] > 0


def test_split_rows_names_what_left_it_without_rows(monkeypatch):
    """Each way a config can leave a run with nothing to train or evaluate is refused in words
    that name the recipe, or the images that sit on both sides."""
    from scoring.training.data import image_key
    from scoring.training.trainer import split_rows

    def refused(**overrides):
        with pytest.raises(ValueError) as error:
            split_rows(load_config("caplens-r-tiny", out="/nonexistent/run", **overrides))
        return str(error.value)

    assert refused(options={"languages": ["ja"]}) == "the set has no rows recipe caplens-r can use"
    german_heldout = {"world": {"scenes": 2, "split": "heldout", "size": 32, "languages": ["de"]}}
    assert refused(options={"languages": ["en"]}, heldout=german_heldout) == (
        "the held-out set has no rows recipe caplens-r can use")
    same = load_config("caplens-r-tiny", out="/nonexistent/run").data
    train_rows = trainer.RECIPES["caplens-r"].load_rows(load_config("caplens-r-tiny", out="/nonexistent/run"))[0]
    shared = sorted({image_key(r) for r in train_rows})
    assert refused(heldout=same) == f"{len(shared)} image(s) are both in `data` and in `heldout`, e.g. {shared[0]}"
    monkeypatch.setattr(trainer.RECIPES["caplens-r"], "training_rows", lambda rows, config: [])
    assert refused() == "no training rows are left for recipe caplens-r (options)"


def test_a_run_keeps_transformers_bars_off_from_its_start_to_its_end_and_puts_them_back(monkeypatch, tmp_path):
    """No "Loading weights" or "Writing model shards" bar in a run's log: they are off from
    before the model is built (a from-scratch model saves itself then) to after it is saved,
    although loading a backbone inside the run turns them off and back on for itself."""
    from transformers.utils import logging as hf_logging

    from scoring.training import train

    seen = {}
    for name in ("begin", "save"):
        real = getattr(trainer._Run, name)
        monkeypatch.setattr(trainer._Run, name, lambda run, *args, _real=real, _name=name: seen.setdefault(
            _name, hf_logging.is_progress_bar_enabled()) is None or _real(run, *args))
    hf_logging.enable_progress_bar()
    try:
        train(load_config("pr-mcs-tiny", out=str(tmp_path / "run")))
        assert seen == {"begin": False, "save": False} and hf_logging.is_progress_bar_enabled()
    finally:
        hf_logging.enable_progress_bar()


def test_the_rows_fingerprint_of_a_set_exported_again_elsewhere_is_the_same_and_changes_with_the_rows(tmp_path):
    """`caplens finetune --collection X --resume` exports X anew (another folder, another
    manifest time); a resume compares the rows, not the path."""
    import json

    from scoring.training.data import load_set, rows_fingerprint

    def export(folder, rows, at):
        (folder / "images").mkdir(parents=True)
        (folder / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        (folder / "manifest.json").write_text(json.dumps({"data": "data.jsonl", "created_at": at}), encoding="utf-8")
        return load_set(folder)

    rows = [{"image": "images/ab.png", "text": "a dog"}, {"image": "images/cd.png", "text": "a cat"}]
    first, first_hash, _ = export(tmp_path / "x-1", rows, "2026-11-30T01:00")
    again, again_hash, _ = export(tmp_path / "x-2", rows, "2026-11-30T02:00")
    assert first_hash != again_hash and first[0]["image"] != again[0]["image"]
    assert rows_fingerprint(first) == rows_fingerprint(again)
    changed, _, _ = export(tmp_path / "x-3", [rows[0], rows[1] | {"text": "a cow"}], "2026-11-30T03:00")
    reordered, _, _ = export(tmp_path / "x-4", rows[::-1], "2026-11-30T03:00")
    renamed, _, _ = export(tmp_path / "x-5", [rows[0], rows[1] | {"image": "images/ef.png"}], "2026-11-30T03:00")
    assert len({rows_fingerprint(r) for r in (first, changed, reordered, renamed)}) == 4
    # CapLens-R's cross rows nest each image's caption rows, paths and all
    assert rows_fingerprint([{"image": r["image"], "captions": [r]} for r in first]) == rows_fingerprint(
        [{"image": r["image"], "captions": [r]} for r in again])


def test_umic_keeps_the_rows_with_the_usual_number_of_negatives_counting_them_once(monkeypatch):
    """Counted per row, the most common number of negatives made preparing a large set quadratic."""
    from scoring.training import recipes
    from scoring.training.config import TrainConfig

    calls, real = [], recipes.losses_negatives
    monkeypatch.setattr(recipes, "losses_negatives", lambda rows: calls.append(len(rows)) or real(rows))
    rows = [{"image": f"{i}", "positive": "p", "negatives": ["a", "b", "c", "d"][: 3 if i % 10 == 0 else 4]}
            for i in range(50)]
    kept = recipes.RECIPES["umic"].prepare_rows(rows, TrainConfig(recipe="umic", data="unused", out="unused"))
    assert [r["image"] for r in kept] == [str(i) for i in range(50) if i % 10] and calls == [50]
