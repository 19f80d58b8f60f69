"""The trainer's arithmetic, step by step, on a one-weight fake recipe whose every number can be
worked out by hand: the learning rate of each optimizer step (warm-up, cosine, constant),
gradient-accumulation scaling, and which rows each micro-batch gets (a new shuffle each epoch,
every row once per epoch).

The fake model is one weight w (starting at 0) and the loss of a micro-batch is w times the
mean of its rows' x, all x = 1: the gradient of every micro-batch is exactly 1. With SGD (no
momentum, no weight decay, no clipping) an optimizer step t moves w by exactly -lr_t, where
lr_t = lr x schedule factor of step t, and the loss the trainer records for step t is w_t (the
mean of the micro-batch losses, each divided by grad_accum before they are summed)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from scoring.training import train
from scoring.training.config import TrainConfig
from scoring.training.recipes import RECIPES, Recipe

LR = 0.1
ROWS = 8


@dataclass(frozen=True)
class OneWeight(Recipe):
    """Rows {"image", "id", "x"}; `state.seen` records (w, row ids) of every micro-batch."""

    def load_rows(self, config):
        side = config.data["fake"]
        count = ROWS if side == "train" else 2
        rows = [{"image": f"{side}-{i}", "id": f"{side}-{i}", "x": 1.0} for i in range(count)]
        return rows, "0" * 64, {"source": "fake"}

    def setup(self, config, device, scratch):
        weight = torch.nn.Linear(1, 1, bias=False)
        torch.nn.init.zeros_(weight.weight)
        return SimpleNamespace(trainable=weight, seen=[], draws=[], nan_from=config.options.get("nan_from"),
                               evaluations=iter(config.options.get("evaluations", ())),
                               measure=config.options.get("measure", "tau_c"))

    def batch_loss(self, state, rows, rng, device):
        w = state.trainable.weight[0, 0]
        state.seen.append((w.item(), [r["id"] for r in rows]))
        state.draws.append(rng.random())
        if state.nan_from is not None and len(state.seen) >= state.nan_from:
            return w * float("nan"), {}
        return w * torch.tensor([r["x"] for r in rows]).mean(), {}

    def evaluate(self, state, rows, device):
        """{"w": w}, and `options.measure` (tau_c unless given): the next of `options.evaluations` when given."""
        return {"w": state.trainable.weight.item()} | {state.measure: v for v in [next(state.evaluations, None)] if v is not None}

    def save(self, state, out: Path) -> None:
        (out / "w.txt").write_text(str(state.trainable.weight.item()))


@pytest.fixture
def run(tmp_path, monkeypatch):
    """run(train_kwargs, **config) -> (TrainResult, state.seen), trained with the fake recipe."""
    states, draws = [], []
    recipe = OneWeight("one-weight", "none", "none", "none", "one weight, loss w * mean(x)")
    real_setup = recipe.setup

    def keeping_state(config, device, scratch):
        state = real_setup(config, device, scratch)
        states.append(state)
        return state

    object.__setattr__(recipe, "setup", keeping_state)
    monkeypatch.setitem(RECIPES, "one-weight", recipe)

    def _run(train_kwargs=None, **overrides):
        values = dict(recipe="one-weight", data={"fake": "train"}, heldout={"fake": "heldout"},
                      out=str(tmp_path / f"run{len(states)}"), device="cpu", grad_clip=0.0,
                      optimizer={"name": "sgd", "lr": LR}, checkpoint_every=1000)
        values.update(overrides)
        try:
            result = train(TrainConfig(**values), **(train_kwargs or {}))
        finally:
            draws.append(states[-1].draws if states else [])
        return result, states[-1].seen

    _run.draws = draws  # per run, what each micro-batch drew from the random.Random it was given
    return _run


def _step_weights(seen, grad_accum):
    """w at the first micro-batch of each optimizer step."""
    return [w for w, _ in seen[::grad_accum]]


def _moves(weights, final):
    ws = weights + [final]
    return [a - b for a, b in zip(ws, ws[1:])]


def test_warm_up_then_cosine_learning_rate_per_step(run):
    """8 rows, batch 2: 4 micro-batches an epoch; grad_accum 2: 2 steps an epoch; 3 epochs: 6
    steps. Warm-up 2 steps: factors 1/2, 2/2. Cosine over the other 4 steps, progress 0, 1/4,
    2/4, 3/4: (1 + cos(pi * progress)) / 2 = 1, 0.853553, 0.5, 0.146447."""
    result, seen = run(batch_size=2, grad_accum=2, epochs=3, schedule={"name": "cosine", "warmup": 2})
    expected = [0.5, 1.0, 1.0, 0.8535533906, 0.5, 0.1464466094]
    assert len(seen) == 12 and len(result.losses) == 6
    moves = _moves(_step_weights(seen, 2), result.after["w"])
    assert moves == pytest.approx([LR * f for f in expected], abs=1e-6)


def test_constant_schedule_with_a_warm_up_given_as_a_share_of_the_steps(run):
    """Warm-up 0.3 of 6 steps = 1.8, rounded to 2 steps (1/2, 2/2), then the constant factor 1."""
    result, seen = run(batch_size=2, grad_accum=2, epochs=3, schedule={"name": "constant", "warmup": 0.3})
    moves = _moves(_step_weights(seen, 2), result.after["w"])
    assert moves == pytest.approx([LR * f for f in [0.5, 1, 1, 1, 1, 1]], abs=1e-6)


def test_gradient_accumulation_averages_the_micro_batches(run):
    """grad_accum 4 with batch 2 is one step of 8 rows: the step's gradient is the mean of the 4
    micro-batch gradients (1), not their sum (4), so the same schedule moves w by the same
    amounts as grad_accum 1 with batch 8; and the recorded loss of a step is w_t (the mean of 4
    losses w_t), not 4 w_t."""
    accumulated, seen = run(batch_size=2, grad_accum=4, epochs=4, schedule={"name": "constant", "warmup": 0})
    assert len(seen) == 16 and len(accumulated.losses) == 4
    weights = _step_weights(seen, 4)
    assert _moves(weights, accumulated.after["w"]) == pytest.approx([LR] * 4, abs=1e-6)
    assert [w for w, _ in seen[:4]] == [0.0] * 4  # no step between the micro-batches of a step
    assert accumulated.losses == [(t + 1, pytest.approx(w, abs=1e-6)) for t, w in enumerate(weights)]
    assert weights == pytest.approx([0.0, -0.1, -0.2, -0.3], abs=1e-6)
    assert accumulated.after["w"] == pytest.approx(-0.4, abs=1e-6)


def test_each_epoch_is_a_new_shuffle_of_every_row_once(run):
    result, seen = run(batch_size=2, grad_accum=1, epochs=4, schedule={"name": "constant", "warmup": 0})
    assert len(seen) == 16 and all(len(ids) == 2 for _, ids in seen)
    epochs = [[i for _, ids in seen[e * 4:(e + 1) * 4] for i in ids] for e in range(4)]
    in_order = [f"train-{i}" for i in range(ROWS)]
    for order in epochs:
        assert sorted(order) == sorted(in_order)  # every row exactly once an epoch
    assert len({tuple(order) for order in epochs}) == 4  # each epoch shuffled anew
    assert any(order != in_order for order in epochs)
    # the order is a function of the seed: the same seed gives it again, another seed another one
    _, again = run(batch_size=2, grad_accum=1, epochs=4, schedule={"name": "constant", "warmup": 0})
    _, other = run(batch_size=2, grad_accum=1, epochs=4, seed=1, schedule={"name": "constant", "warmup": 0})
    assert [ids for _, ids in again] == [ids for _, ids in seen]
    assert [ids for _, ids in other] != [ids for _, ids in seen]


def test_the_number_of_steps_counts_optimizer_steps_not_micro_batches(run):
    """8 rows, batch 3: ceil(8 / 3) = 3 micro-batches an epoch (3, 3, 2 rows); grad_accum 2:
    ceil(3 / 2) = 2 steps an epoch; 2 epochs: 4 steps of 2 micro-batches, each step moving w by
    lr."""
    result, seen = run(batch_size=3, grad_accum=2, epochs=2, schedule={"name": "constant", "warmup": 0})
    assert len(result.losses) == 4 and len(seen) == 8
    assert [len(ids) for _, ids in seen[:3]] == [3, 3, 2]
    assert math.isclose(result.after["w"], -0.4, abs_tol=1e-6)


def test_a_loss_that_is_not_finite_stops_the_run_with_a_clear_error(run, tmp_path):
    """Micro-batch 3 returns NaN: the run stops at optimizer step 3 (of 8), saying how to go on,
    instead of training on and saving NaN weights."""
    with pytest.raises(ValueError, match=r"the training loss is nan at step 3/8: lower the learning rate"):
        run(batch_size=2, epochs=2, options={"nan_from": 3}, schedule={"name": "constant", "warmup": 0})
    assert not list(tmp_path.glob("run*/training.json"))


def test_select_by_never_keeps_a_nan_evaluation_and_ties_keep_the_earlier_step(run):
    """Evaluations: before 0.1, step 2 NaN, step 4 0.3, step 6 0.3 again, after (step 8) NaN. The
    kept step is 4, where w was -0.4: a NaN first periodic evaluation must not become "the best",
    and a later tie does not replace it. training.json records every evaluation."""
    import json

    result, seen = run(batch_size=2, epochs=2, eval_every=2, select_by="tau_c",
                       options={"evaluations": [0.1, float("nan"), 0.3, 0.3, float("nan")]},
                       schedule={"name": "constant", "warmup": 0})
    assert len(seen) == 8
    assert result.after["tau_c"] == 0.3 and result.after["w"] == pytest.approx(-0.4, abs=1e-6)
    record = json.loads((result.out_dir / "training.json").read_text())
    assert record["selected_step"] == 4
    history = [(step, metrics["tau_c"], round(metrics["w"], 6)) for step, metrics in record["history"]]
    assert history[1:3] == [(4, 0.3, -0.4), (6, 0.3, -0.6)]
    assert [step for step, _, _ in history] == [2, 4, 6, 8]


def test_select_by_a_measure_the_recipe_does_not_report_is_refused_by_name(run):
    with pytest.raises(ValueError) as error:
        run(batch_size=2, epochs=1, eval_every=2, select_by="mse", options={"evaluations": [0.1, 0.2, 0.3]})
    assert str(error.value) == "select_by 'mse' is not a measure of this recipe; it reports w, tau_c"


def test_select_by_a_lower_is_better_measure_keeps_the_lowest_evaluation(run):
    """mse (lower is better) evaluates 0.5 before, 0.2, 0.1, 0.4 at steps 2, 4, 6 and 0.3 after
    step 8: the kept step is 4 (w -0.4), not the highest mse."""
    result, _ = run(batch_size=2, epochs=2, eval_every=2, select_by="mse",
                    options={"measure": "mse", "evaluations": [0.5, 0.2, 0.1, 0.4, 0.3]},
                    schedule={"name": "constant", "warmup": 0})
    assert result.after["mse"] == 0.1 and result.after["w"] == pytest.approx(-0.4, abs=1e-6)


def test_select_by_a_measure_with_no_better_direction_is_refused_before_training(run, tmp_path):
    with pytest.raises(ValueError) as error:
        run(batch_size=2, epochs=1, eval_every=2, select_by="w")
    assert str(error.value).startswith("select_by 'w' has no better direction for recipe one-weight")
    assert not list(tmp_path.glob("run*"))


def test_gradient_clipping_scales_the_step_to_the_norm_limit(run):
    """Every gradient is 1; clipped to norm 0.25 each constant-rate step moves w by lr x 0.25,
    and a limit above 1 changes nothing."""
    result, seen = run(batch_size=2, epochs=1, grad_clip=0.25, schedule={"name": "constant", "warmup": 0})
    assert _moves(_step_weights(seen, 1), result.after["w"]) == pytest.approx([LR * 0.25] * 4, abs=1e-7)
    result, seen = run(batch_size=2, epochs=1, grad_clip=3.0, schedule={"name": "constant", "warmup": 0})
    assert _moves(_step_weights(seen, 1), result.after["w"]) == pytest.approx([LR] * 4, abs=1e-7)


def test_only_the_first_max_heldout_rows_are_evaluated(run):
    import json

    result, _ = run(batch_size=2, epochs=1, max_heldout=1)
    data = json.loads((result.out_dir / "training.json").read_text())["data"]
    assert (data["heldout_rows"], data["evaluated_rows"]) == (2, 1)


def test_a_resumed_run_keeps_the_evaluations_and_the_best_step_from_before_it_stopped(run, tmp_path):
    """Cancelled after step 3 with the step-2 evaluation (0.9) the best so far; the resumed run's
    fresh recipe state evaluates 0.5 at step 4 and 0.9 after step 6. The snapshot carries the
    history and the best weights: the record lists steps 2, 4, 6, and the tie at 0.9 keeps step 2,
    where w was -0.2."""
    import json
    import threading

    from scoring.training import Cancelled

    cancel = threading.Event()

    def stop_after_three(fraction, message):
        if message.startswith("one-weight step 3/6 "):
            cancel.set()

    settings = dict(out=str(tmp_path / "cut"), batch_size=2, max_steps=6, eval_every=2, select_by="tau_c",
                    options={"evaluations": [0.5, 0.9, 0.2, 0.3]}, schedule={"name": "constant", "warmup": 0})
    with pytest.raises(Cancelled):
        run(train_kwargs={"progress": stop_after_three, "cancel": cancel}, **settings)
    result, _ = run(train_kwargs={"resume": True}, **settings)
    record = json.loads((result.out_dir / "training.json").read_text())
    assert [(step, m["tau_c"]) for step, m in record["history"]] == [(2, 0.9), (4, 0.5), (6, 0.9)]
    assert record["selected_step"] == 2 and result.after["w"] == pytest.approx(-0.2, abs=1e-6)


def test_each_micro_batch_draws_from_its_own_seeded_generator_also_after_a_resume(run, tmp_path):
    """A recipe's random choices (a prompt prefix, a negative) come from the generator the step
    hands it, seeded by the run's seed and the micro-batch: an interrupted and resumed run draws
    what an uninterrupted one draws, and another seed draws otherwise."""
    import threading

    from scoring.training import Cancelled

    settings = dict(batch_size=2, max_steps=6, grad_accum=2)
    run(out=str(tmp_path / "whole"), **settings)
    cancel = threading.Event()
    with pytest.raises(Cancelled):
        run(out=str(tmp_path / "cut"), train_kwargs={"cancel": cancel, "progress": lambda f, m: (
            cancel.set() if m.startswith("one-weight step 2/6 ") else None)}, **settings)
    run(out=str(tmp_path / "cut"), train_kwargs={"resume": True}, **settings)
    run(out=str(tmp_path / "other"), seed=1, **settings)
    whole, first, resumed, other = run.draws
    assert len(whole) == 12 and len(first) == 4 and len(resumed) == 8
    assert first + resumed == whole and len(set(whole)) == 12
    assert not set(other) & set(whole)


def test_select_by_says_which_step_it_kept_and_keeps_the_last_weights_when_they_are_best(run):
    """Evaluations before, step 2, step 4 (after, 6 steps): the earlier step is put back and named;
    when the last is best, or every evaluation is NaN, the last weights stay, and the log says so."""
    import json

    said = []
    settings = dict(batch_size=2, max_steps=6, eval_every=2, select_by="tau_c", schedule={"name": "constant", "warmup": 0})
    result, _ = run(train_kwargs={"log": said.append}, options={"evaluations": [0.0, 0.9, 0.2, 0.1]}, **settings)
    assert "kept the weights of step 2 (tau_c 0.9000 on the held-out rows)" in said
    assert result.after["w"] == pytest.approx(-0.2, abs=1e-6)
    for evaluations, line in (([0.0, 0.1, 0.2, 0.3], "kept the weights of the last step 6 (tau_c 0.3000 on the "
                                                     "held-out rows, the best)"),
                              ([float("nan")] * 4, "kept the weights of the last step 6 (no evaluation of tau_c "
                                                   "gave a number)")):
        said.clear()
        result, _ = run(train_kwargs={"log": said.append}, options={"evaluations": evaluations}, **settings)
        record = json.loads((result.out_dir / "training.json").read_text())
        assert record["selected_step"] == 6 and result.after["w"] == pytest.approx(-0.6, abs=1e-6)
        assert [said_line for said_line in said if said_line.startswith("kept the weights")] == [line]


def test_an_fp16_run_resumes_with_the_loss_scale_it_had(run, tmp_path, monkeypatch):
    """fp16 trains through a GradScaler, whose scale here doubles every step (growth_interval 1,
    a CPU scaler standing in for CUDA's): 2**16 x 2**6 after 6 steps, also when the run is
    cancelled after step 3 and resumed (a fresh scaler would end at 2**16 x 2**3). A snapshot
    written before the scale was kept still resumes, with a fresh scaler."""
    import contextlib
    import threading

    from scoring.training import Cancelled, trainer

    scalers = []
    real = torch.amp.GradScaler
    monkeypatch.setattr(torch.amp, "GradScaler",
                        lambda device: scalers.append(real("cpu", init_scale=2.0 ** 16, growth_interval=1)) or scalers[-1])
    monkeypatch.setattr(trainer, "_autocast_dtype", lambda config, device: torch.float16)
    monkeypatch.setattr(trainer._Run, "autocast", lambda self: contextlib.nullcontext())
    settings = dict(batch_size=2, max_steps=6, schedule={"name": "constant", "warmup": 0})
    whole, _ = run(out=str(tmp_path / "whole"), **settings)
    cancel = threading.Event()
    for out in ("cut", "old"):
        cancel.clear()
        with pytest.raises(Cancelled):
            run(out=str(tmp_path / out), train_kwargs={"cancel": cancel, "progress": lambda f, m: (
                cancel.set() if m.startswith("one-weight step 3/6 ") else None)}, **settings)
    snapshot = torch.load(tmp_path / "old" / trainer.SNAPSHOT, weights_only=False)
    del snapshot["scaler"]
    torch.save(snapshot, tmp_path / "old" / trainer.SNAPSHOT)
    resumed, _ = run(out=str(tmp_path / "cut"), train_kwargs={"resume": True}, **settings)
    assert scalers[0].get_scale() == scalers[-1].get_scale() == 2.0 ** 22
    assert resumed.after["w"] == pytest.approx(whole.after["w"], abs=1e-6)
    run(out=str(tmp_path / "old"), train_kwargs={"resume": True}, **settings)
    assert scalers[-1].get_scale() == 2.0 ** 19


def _cut_after_three(run, out, **settings):
    import threading

    from scoring.training import Cancelled

    cancel = threading.Event()
    with pytest.raises(Cancelled):
        run(out=str(out), train_kwargs={"cancel": cancel, "progress": lambda f, m: (
            cancel.set() if m.startswith("one-weight step 3/") else None)}, **settings)


def test_a_resume_with_another_config_or_other_rows_is_refused_naming_what_differs(run, tmp_path):
    """The restored optimizer and schedule would go on with the interrupted run's lr and length
    while training.json recorded the new ones; another set's rows would train on from its weights."""
    settings = dict(batch_size=2, max_steps=6, schedule={"name": "constant", "warmup": 0})
    _cut_after_three(run, tmp_path / "cut", **settings)
    with pytest.raises(ValueError) as error:
        run(out=str(tmp_path / "cut"), train_kwargs={"resume": True},
            **settings | {"max_steps": 9, "optimizer": {"name": "sgd", "lr": 1.0}})
    assert str(error.value) == (
        f"cannot resume {tmp_path / 'cut'}: this run differs from the interrupted one in max_steps (6 then, 9 now); "
        "optimizer ({'name': 'sgd', 'lr': 0.1} then, {'name': 'sgd', 'lr': 1.0} now). Resume with its config and "
        "data, or start a new run in another `out` (to train a finished run further, make it the new run's `base`)")
    with pytest.raises(ValueError, match=r"differs from the interrupted one in the training rows' content\. "):
        run(out=str(tmp_path / "cut"), train_kwargs={"resume": True}, data={"fake": "other"}, **settings)
    with pytest.raises(ValueError, match=r"differs from the interrupted one in the held-out rows' content\. "):
        run(out=str(tmp_path / "cut"), train_kwargs={"resume": True}, heldout={"fake": "other"}, **settings)
    assert not (tmp_path / "cut" / "training.json").exists()


def test_a_resume_may_move_the_folder_change_the_device_threads_and_limits_and_read_the_same_rows_anew(run, tmp_path):
    """What a resume may change: where the run lives, how it runs, and the path of the same rows
    (`caplens finetune --collection X --resume` exports the collection into a new folder)."""
    settings = dict(batch_size=2, max_steps=6, schedule={"name": "constant", "warmup": 0})
    whole, _ = run(out=str(tmp_path / "whole"), **settings)
    _cut_after_three(run, tmp_path / "cut", **settings)
    (tmp_path / "cut").rename(tmp_path / "moved")
    resumed, _ = run(out=str(tmp_path / "moved"), train_kwargs={"resume": True}, threads=1, time_limit_s=3600.0,
                     checkpoint_every=2, data={"fake": "train", "exported": "again"}, **settings)
    assert resumed.losses == whole.losses and resumed.after["w"] == pytest.approx(whole.after["w"], abs=1e-9)


def test_runs_in_one_process_take_turns_and_a_cancel_ends_one_still_waiting(run, tmp_path):
    """torch's generators, determinism switch and thread count are process-wide, and the app
    trains a CPU job and a CUDA job in threads of one server: a run started while another goes
    waits, saying so, and starts (seeds, loads) only once the other is done; cancelled while it
    waits, it ends without starting."""
    import threading

    from scoring.training import Cancelled, trainer

    said, waiting, threads = [], threading.Event(), []

    def second():
        run(out=str(tmp_path / "second"), batch_size=2, max_steps=4, train_kwargs={
            "log": lambda line: said.append(("second", line)),
            "progress": lambda f, m: m.startswith("waiting for the training run already going") and waiting.set()})

    def start_second(fraction, message):
        if message.startswith("one-weight step 1/4 ") and not threads:
            threads.append(threading.Thread(target=second))
            threads[0].start()
            assert waiting.wait(10)

    run(out=str(tmp_path / "first"), batch_size=2, max_steps=4,
        train_kwargs={"log": lambda line: said.append(("first", line)), "progress": start_second})
    threads[0].join(30)
    order = [who for who, _ in said]
    assert waiting.is_set() and order == sorted(order, key=lambda who: who == "second") and "second" in order
    assert (tmp_path / "second" / "training.json").is_file()
    cancel = threading.Event()
    cancel.set()
    with trainer._ONE_RUN:
        with pytest.raises(Cancelled, match="^cancelled while waiting for another training run to finish$"):
            run(out=str(tmp_path / "third"), batch_size=2, max_steps=4, train_kwargs={"cancel": cancel})
    assert not (tmp_path / "third").exists()
