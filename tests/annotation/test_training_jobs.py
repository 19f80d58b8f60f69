"""Background training jobs: one per device, the rest queued; progress, losses, log, cancel,
before/after and registration; roles checked by the library."""
from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from annotation.training import training_jobs as tj
from scoring.api import metric_names
from scoring.training.trainer import SNAPSHOT


def fit_line(config, *, progress=None, log=None, cancel=None):
    """A small real training run: least squares of y = 3x − 1 by SGD, held-out MSE before and
    after; the checkpoint is a tiny CLIP folder so the result registers as PAC-S."""
    from scoring.tiny import build_clip_folder

    gate = config.gate
    torch.manual_seed(0)
    x = torch.linspace(-1, 1, 64).unsqueeze(1)
    y = 3 * x - 1
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)

    def heldout() -> float:
        with torch.no_grad():
            return float(torch.nn.functional.mse_loss(model(x[1::2]), y[1::2]))

    before = {"mse": heldout()}
    log("fit-line: 32 training rows, 32 held-out rows")
    losses = []
    for step in range(1, config.steps + 1):
        if gate is not None:
            gate.wait(10)
        if cancel is not None and cancel.is_set():
            raise RuntimeError(f"cancelled at step {step - 1}/{config.steps}")
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[::2]), y[::2])
        loss.backward()
        optimizer.step()
        losses.append((step, loss.item()))
        progress(step / config.steps, f"fit-line step {step}/{config.steps} loss {loss.item():.4f}")
    out = Path(config.out)
    build_clip_folder(out)
    (out / "training.json").write_text(json.dumps({"config": {
        "data": {"world": {"scenes": 8, "size": 32, "languages": ["en"]}}, "base": "tiny:clip", "heldout_fraction": 0.3}}))
    return SimpleNamespace(out_dir=out, recipe="pac-s", metric="PAC-S", backbone_kind="clip", before=before,
                           after={"mse": heldout()}, losses=losses, wall_s=0.1, device="cpu", warnings=[])


def fit_flat(config, **kwargs):
    """fit_line, but the checkpoint's image projection is all zeros: every caption scores 0."""
    from transformers import CLIPModel

    result = fit_line(config, **kwargs)
    model = CLIPModel.from_pretrained(result.out_dir)
    torch.nn.init.zeros_(model.visual_projection.weight)
    model.save_pretrained(result.out_dir)
    return result


def running(runner, job_id):
    """Wait until the worker has picked the job up."""
    for _ in range(1000):
        if runner.view(job_id).status != "queued":
            return runner.view(job_id)
        threading.Event().wait(0.01)
    raise AssertionError("the job never started")


def config(tmp_path, name, steps=20, gate=None, device="cpu"):
    return SimpleNamespace(recipe="pac-s", device=device, out=str(tmp_path / name), steps=steps, gate=gate)


def test_one_job_per_device_the_rest_queued_then_both_finish_and_register(data_dir, tmp_path):
    runner = tj.JobRunner(train=fit_line)
    gate = threading.Event()
    first = runner.submit(config(tmp_path, "a", gate=gate), 1, "rita", "tiny", "the preset's data")
    second = runner.submit(config(tmp_path, "b"), 1, "rita", "tiny", "the preset's data")
    assert running(runner, first.id).status == "running"
    assert runner.view(second.id).status == "queued" and runner.view(second.id).queue_position == 1
    gate.set()
    done = runner.wait(first.id, 60), runner.wait(second.id, 60)
    assert [v.status for v in done] == ["done", "done"], [v.message for v in done]
    view = done[0]
    assert view.progress == 1.0 and view.eta_s == 0.0 and len(view.losses) == 20
    assert view.losses[-1][1] < view.losses[0][1] / 10
    [row] = view.comparison
    assert row["key"] == "mse" and row["after"] < row["before"] and row["change"] == row["after"] - row["before"]
    assert view.metric_name and view.metric_name.startswith("PAC-S@world-")
    assert done[1].metric_name.endswith("-2") and {view.metric_name, done[1].metric_name} <= set(metric_names("tiny"))
    assert any("32 training rows" in line for line in view.log) and view.message == f"done: registered as {view.metric_name}"


def test_each_device_has_its_own_queue(data_dir, tmp_path):
    runner = tj.JobRunner(train=fit_line, register=lambda result, **_: "X@y")
    gate = threading.Event()
    on_cpu = runner.submit(config(tmp_path, "a", gate=gate), 1, "rita", "tiny", "d")
    running(runner, on_cpu.id)
    on_gpu = runner.submit(config(tmp_path, "b", device="cuda"), 1, "rita", "tiny", "d")
    assert runner.wait(on_gpu.id, 60).status == "done" and runner.view(on_cpu.id).status == "running"
    gate.set()
    assert runner.wait(on_cpu.id, 60).status == "done"


def test_progress_gives_an_eta_and_loss_points_while_running(data_dir, tmp_path):
    runner = tj.JobRunner(train=fit_line, register=lambda result, **_: "X@y")
    gate = threading.Event()
    job = runner.submit(config(tmp_path, "a", steps=400, gate=gate), 1, "rita", "tiny", "d")
    gate.set()
    for _ in range(400):
        view = runner.view(job.id)
        if view.progress >= 0.05:
            break
        threading.Event().wait(0.01)
    assert 0 < view.progress <= 1 and view.losses and view.losses[0][0] == 1
    assert view.eta_s is not None or view.progress == 1.0
    assert runner.wait(job.id, 60).status == "done"


def test_cancel_a_running_and_a_queued_job(data_dir, tmp_path):
    runner = tj.JobRunner(train=fit_line)
    gate = threading.Event()
    first = runner.submit(config(tmp_path, "a", gate=gate), 1, "rita", "tiny", "d")
    queued = runner.submit(config(tmp_path, "b"), 1, "rita", "tiny", "d")
    running(runner, first.id)
    assert runner.cancel(queued.id).status == "cancelled"
    runner.cancel(first.id)
    gate.set()
    ended = runner.wait(first.id, 30)
    assert ended.status == "cancelled" and ended.metric_name is None
    assert ended.message == "cancelled before its first snapshot; nothing to resume"  # fit_line writes none
    assert not (tmp_path / "b").exists()
    third = runner.submit(config(tmp_path, "c", gate=(gate := threading.Event())), 1, "rita", "tiny", "d")
    running(runner, third.id)
    (tmp_path / "c" / SNAPSHOT).parent.mkdir(parents=True)
    (tmp_path / "c" / SNAPSHOT).write_bytes(b"a snapshot")
    runner.cancel(third.id)
    gate.set()
    assert runner.wait(third.id, 30).message == "cancelled; the last snapshot stays resumable"


def test_a_failing_run_says_why_without_server_paths(data_dir, tmp_path):
    def broken(config, **_):
        raise ValueError(f"{tmp_path}/runs/x already holds a finished run: choose another `out`")

    runner = tj.JobRunner(train=broken)
    view = runner.wait(runner.submit(config(tmp_path, "a"), 1, "rita", "tiny", "d").id, 10)
    assert view.status == "failed"
    assert view.error == "x already holds a finished run: choose another `out`"
    assert str(tmp_path) not in view.message and all(str(tmp_path) not in line for line in view.log)


def test_roles_are_checked_by_the_library(accounts, engine, tmp_path):
    from annotation.people.accounts import create_user
    from db.session import session_scope

    with session_scope(engine) as session:
        other = create_user(session, "otto", "researcher", None)
    runner = tj.JobRunner(train=fit_line, register=lambda result, **_: "X@y")
    rita, ann, root = accounts["rita"], accounts["ann"], accounts["root"]
    job = runner.submit(config(tmp_path, "a"), rita.id, "rita", "tiny", "d")
    with pytest.raises(PermissionError, match="researcher or admin"):
        tj.training_board(ann.id, jobs=runner)
    with pytest.raises(PermissionError, match="Log in first"):
        tj.training_board(None, jobs=runner)
    with pytest.raises(PermissionError, match="another user"):
        tj.cancel_training(other.id, job.id, jobs=runner)
    with pytest.raises(PermissionError, match="another user"):
        tj.training_board(other.id, job.id, jobs=runner)
    assert tj.training_board(other.id, jobs=runner) == tj.TrainingBoard(None, [])
    admin_board = tj.training_board(root.id, jobs=runner)
    assert admin_board.current is None and [j.id for j in admin_board.jobs] == [job.id]
    assert tj.training_board(root.id, job.id, jobs=runner).current.owner == "rita"
    board = tj.training_board(rita.id, jobs=runner)
    assert board.current.id == job.id and [j.id for j in board.jobs] == [job.id]
    runner.wait(job.id, 60)


def test_an_uploaded_set_is_unpacked_safely(tmp_path):
    import zipfile

    good = tmp_path / "set.zip"
    with zipfile.ZipFile(good, "w") as archive:
        archive.writestr("my-set/manifest.json", "{}")
        archive.writestr("my-set/data.jsonl", "{}\n")
    assert tj._unpack_set(good, tmp_path / "out") == tmp_path / "out" / "my-set"
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as archive:
        archive.writestr("../../escape.txt", "x")
    with pytest.raises(ValueError, match="leaves the archive's folder"):
        tj._unpack_set(evil, tmp_path / "out2")
    assert not (tmp_path / "out2").exists() and not (tmp_path / "escape.txt").exists()
    with pytest.raises(ValueError, match="zipped set folder"):
        tj._unpack_set(tmp_path / "notes.txt", tmp_path / "out3")


def test_a_collection_trains_with_the_real_trainer_and_registers(accounts, engine, tmp_path, make_png):
    """start_training exports the collection's set the recipe needs (UMIC: captions with four
    negatives), runs the real tiny preset in the background and registers the result for the
    app's profile."""
    from annotation.captions import add_caption, get_or_create_collection
    from annotation.image_store import add_image
    from db.session import session_scope
    from scoring.tiny import ensure_tiny_checkpoints
    from scoring.registry import load_registry

    ensure_tiny_checkpoints()
    rita = accounts["rita"]
    colours = [(200, 10, 10), (10, 200, 10), (10, 10, 200), (200, 200, 10), (10, 200, 200), (200, 10, 200)]
    with session_scope(engine) as session:
        user = session.get(type(rita), rita.id)
        collection = get_or_create_collection(session, user, "shapes")
        for n, colour in enumerate(colours):
            image = add_image(session, make_png(colour, size=(24, 24)), original_filename=f"{n}.png")
            for text in (f"a square of colour {n}", f"colour number {n} fills the picture"):
                add_caption(session, user, image, text, kind="reference", collection=collection)
    with pytest.raises(ValueError, match="is for recipe pac-s, not specs"):
        tj.start_training(rita.id, "specs", "pac-s-tiny")
    runner = tj.JobRunner()
    job = tj.start_training(rita.id, "umic", "umic-tiny", collection="shapes", profile="tiny", jobs=runner)
    assert job.data == "collection shapes"
    view = runner.wait(job.id, 240)
    assert view.status == "done", view.log
    # A tiny preset stays in rita's scratch space until she registers it on purpose.
    assert view.scratch and view.registerable and view.metric_name is None and view.comparison
    assert not [n for n in metric_names("tiny") if n.startswith("UMIC@")]
    view = tj.register_training(rita.id, job.id, jobs=runner).current
    assert view.metric_name.startswith("UMIC@shapes-") and not view.registerable
    spec = load_registry("tiny").metrics[view.metric_name]
    assert (spec.family, spec.variant) == ("itm", "umic")
    assert spec.extra["trained_on"].startswith("umic set of collection 'shapes' (12 rows)")

    # The same set uploaded as the zip of its folder trains too.
    assert Path(spec.extra["run"]).parent.name == "rita" and Path(spec.extra["run"]).parents[1].name == "scratch"
    exported = next((Path(spec.extra["run"]).parents[3] / "sets").glob("shapes-*"))
    archive = shutil.make_archive(str(tmp_path / "shapes-set"), "zip", exported.parent, exported.name)
    uploaded = tj.start_training(rita.id, "umic", "umic-tiny", set_file=archive, profile="tiny", jobs=runner)
    assert uploaded.data == "uploaded set shapes-set.zip"
    assert runner.wait(uploaded.id, 240).status == "done"


def test_a_version_registered_for_another_profile_says_so(data_dir, tmp_path):
    """The run names tiny:clip, so its version goes to the tiny profile; an app serving hub
    learns that it will not find it in its own score panel."""
    runner = tj.JobRunner(train=fit_line)
    view = runner.wait(runner.submit(config(tmp_path, "a"), 1, "rita", "tiny", "d", profile="hub").id, 60)
    assert view.status == "done" and view.metric_name in metric_names("tiny")
    assert view.message.endswith("not this app's profile hub")


def test_a_scratch_run_registers_only_when_its_owner_asks(data_dir, tmp_path):
    """A smoke/tiny run changes nobody's metric list; its owner registers it with the button."""
    assert tj.is_scratch_preset("pr-mcs-tiny") and not tj.is_scratch_preset("pr-mcs")
    runner = tj.JobRunner(train=fit_line)
    view = runner.wait(runner.submit(config(tmp_path, "a"), 1, "rita", "pac-s-tiny", "d", scratch=True).id, 60)
    assert view.status == "done" and view.metric_name is None and view.registerable, view.message
    assert "scratch space, not registered" in view.message
    assert not [n for n in metric_names("tiny") if "@" in n]
    registered = runner.register(view.id)
    assert registered.metric_name.startswith("PAC-S@world-") and registered.metric_name in metric_names("tiny")
    assert not registered.registerable and registered.message == f"done: registered as {registered.metric_name}"
    from scoring.registry import load_registry

    assert load_registry("tiny").metrics[registered.metric_name].extra["registered_by"] == "rita"
    with pytest.raises(ValueError, match="already registered"):
        runner.register(view.id)


def test_a_version_scoring_every_heldout_caption_the_same_is_refused(data_dir, tmp_path):
    runner = tj.JobRunner(train=fit_flat)
    view = runner.wait(runner.submit(config(tmp_path, "flat"), 1, "rita", "pac-s", "d").id, 120)
    assert view.status == "done" and view.metric_name is None and not view.registerable
    assert view.message.startswith("trained, but not registered: PAC-S@world-")
    assert "gives all" in view.message and "held-out captions the same score (0)" in view.message
    assert not [n for n in metric_names("tiny") if "@" in n]


def test_a_scratch_run_whose_registration_is_refused_offers_no_second_try(data_dir, tmp_path):
    """The Train tab redraws the job after a refused Register: it must no longer be registerable."""
    runner = tj.JobRunner(train=fit_flat)
    view = runner.wait(runner.submit(config(tmp_path, "flat"), 1, "rita", "pac-s-tiny", "d", scratch=True).id, 120)
    assert view.registerable
    with pytest.raises(ValueError, match="held-out captions the same score"):
        runner.register(view.id)
    after = runner.view(view.id)
    assert not after.registerable and after.metric_name is None and after.message.startswith("trained, but not registered")
    assert not [n for n in metric_names("tiny") if "@" in n]


def test_a_run_and_its_version_can_be_deleted(data_dir, tmp_path):
    runner = tj.JobRunner(train=fit_line)
    gate = threading.Event()
    active = runner.submit(config(tmp_path, "busy", gate=gate), 1, "rita", "pac-s", "d")
    running(runner, active.id)
    with pytest.raises(ValueError, match="cancel this job"):
        runner.delete(active.id)
    gate.set()
    view = runner.wait(active.id, 60)
    assert view.metric_name in metric_names("tiny") and (tmp_path / "busy").is_dir()
    runner.delete(view.id)
    assert view.metric_name not in metric_names("tiny") and not (tmp_path / "busy").exists()
    assert runner.jobs() == []
    with pytest.raises(LookupError):
        runner.view(view.id)


def test_a_registered_version_is_deleted_by_its_owner_or_an_admin(accounts, engine, tmp_path):
    from annotation.people.accounts import create_user
    from db.session import session_scope

    with session_scope(engine) as session:
        other = create_user(session, "otto", "researcher", None)
    rita, root = accounts["rita"], accounts["root"]
    runner = tj.JobRunner(train=fit_line)
    first = runner.wait(runner.submit(config(tmp_path, "a"), rita.id, "rita", "pac-s", "d").id, 60)
    second = runner.wait(runner.submit(config(tmp_path, "b"), rita.id, "rita", "pac-s", "d").id, 60)
    names = [first.metric_name, second.metric_name]
    assert tj.deletable_versions(rita.id) == names and tj.deletable_versions(other.id) == []
    with pytest.raises(PermissionError, match="another user"):
        tj.delete_version(other.id, names[0], jobs=runner)
    assert tj.delete_version(rita.id, names[0], jobs=runner) == names[1:]
    assert names[0] not in metric_names("tiny") and runner.view(first.id).metric_name is None
    assert tj.delete_version(root.id, names[1], jobs=runner) == []
    assert not [n for n in metric_names("tiny") if "@" in n]
    third = runner.wait(runner.submit(config(tmp_path, "c"), rita.id, "rita", "pac-s", "d").id, 60)
    with pytest.raises(PermissionError, match="another user"):
        tj.delete_training(other.id, third.id, jobs=runner)
    board = tj.delete_training(rita.id, third.id, jobs=runner)
    assert board.deleted_version == third.metric_name and third.id not in [j.id for j in board.jobs]
    assert third.metric_name not in metric_names("tiny") and not (tmp_path / "c").exists()


def test_a_run_that_wrote_a_learning_curve_shows_it_in_its_view(data_dir, tmp_path):
    def with_curve(config, **kwargs):
        result = fit_line(config, **kwargs)
        points = [{"budget": 500, "tau_c": 0.2}, {"budget": 2000, "tau_c": 0.35}]
        (Path(config.out) / "learning_curve.json").write_text(json.dumps({"unit": "ratings", "points": points}))
        return result

    runner = tj.JobRunner(train=with_curve, register=lambda result, **_: "X@y")
    curved = runner.submit(config(tmp_path, "curved", steps=2), 1, "rita", "tiny", "d")
    assert runner.wait(curved.id, 60).learning_curve == {
        "unit": "ratings", "points": [{"budget": 500, "tau_c": 0.2}, {"budget": 2000, "tau_c": 0.35}]}
    plain = tj.JobRunner(train=fit_line, register=lambda result, **_: "X@y")
    job = plain.submit(config(tmp_path, "plain", steps=2), 1, "rita", "tiny", "d")
    assert plain.wait(job.id, 60).learning_curve is None


def test_a_damaged_learning_curve_file_is_noted_and_the_trained_model_still_registers(data_dir, tmp_path):
    def fit_with_a_broken_curve(config, **kwargs):
        result = fit_line(config, **kwargs)
        (result.out_dir / "learning_curve.json").write_text('{"unit": "ratings", "points": [')  # cut short
        return result

    runner = tj.JobRunner(train=fit_with_a_broken_curve)
    job = runner.submit(config(tmp_path, "a", steps=3), 1, "rita", "tiny", "the preset's data")
    view = runner.wait(job.id, 60)
    assert view.status == "done" and view.metric_name, view.message
    notes = [line for line in view.log if "learning curve could not be read" in line]
    assert len(notes) == 1 and str(tmp_path) not in notes[0]  # no server path shown
    assert view.learning_curve is None


def test_an_error_after_training_fails_that_job_and_the_next_one_still_runs(data_dir, tmp_path, monkeypatch):
    """Whatever raises once training returned (here: reading its learning curve) ends that job as
    failed, with a message; the device's worker goes on with the queue instead of dying with the
    job left "running" for ever."""
    calls = []

    def broken_then_fine(folder):
        calls.append(folder)
        if len(calls) == 1:
            raise RuntimeError(f"unexpected trouble in {folder}")
        return None

    monkeypatch.setattr(tj, "read_learning_curve", broken_then_fine)
    runner = tj.JobRunner(train=fit_line)
    first = runner.submit(config(tmp_path, "a", steps=3), 1, "rita", "tiny", "the preset's data")
    second = runner.submit(config(tmp_path, "b", steps=3), 1, "rita", "tiny", "the preset's data")
    failed, done = runner.wait(first.id, 60), runner.wait(second.id, 60)
    assert failed.status == "failed" and failed.message.startswith("failed: ") and str(tmp_path) not in failed.message
    assert done.status == "done" and done.metric_name, done.message
