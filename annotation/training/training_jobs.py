"""Fine-tuning runs as background jobs for the app's Train tab.

A job wraps one ``scoring.training.train`` call in a worker thread.  One job per device
("cpu" or "cuda") is taken from that device's queue at a time, the others wait in it, and
``train`` itself runs one job at a time in the process (torch's generators, determinism switch
and thread count are process-wide): a CUDA job started beside a CPU one waits, saying so.  A
job records its status, progress fraction and ETA, the loss curve, its log lines, and when it
ends its before/after numbers and the metric version it registered (``scoring.user_registry``).
Jobs live in this process, keyed by id, so a page reload finds them again.

A smoke or tiny preset (``is_scratch_preset``) trains into its owner's scratch folder and
registers nothing: nobody else's metric list changes until its owner registers it on purpose
(``register_training``). Registration refuses a version that gives its held-out captions one
constant score. A job, and the version it registered, can be deleted (``delete_training``);
so can a registered version whose job is gone (``delete_version``).

Who may train is checked here, not in the UI: every public function takes the acting
user's id and requires the researcher or admin role; a user sees and cancels their own
jobs, an admin everyone's.
"""
from __future__ import annotations

import logging
import re
import shutil
import threading
import time
import tomllib
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from annotation.transfer.archives import extract_zip
from annotation.errors import public_text, user_message
from scoring.api import metric_names
from scoring.paths import data_dir
from scoring.training import read_learning_curve
from scoring.training.measures import compare
from scoring.training.trainer import SNAPSHOT
from scoring.user_registry import register_run, registered_versions, unregister

LOG = logging.getLogger(__name__)
ACTIVE = ("queued", "running")  # the other statuses: done, failed, cancelled
LOG_LINES = 500
SET_SUFFIXES = (".jsonl", ".parquet", ".csv", ".json")
# The trainer's set kinds that a collection export provides under another name.
COLLECTION_SET_KINDS = {"ratings": "human"}
# "pr-mcs step 3/40 loss 0.4821 …": the trainer's per-step progress message.
STEP_LOSS = re.compile(r"\bstep (\d+)/\d+ loss ([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))")

TrainFunction = Callable[..., Any]  # train(config, *, progress, log, cancel) -> TrainResult


@dataclass(frozen=True)
class JobView:
    """A snapshot of one job, safe to hand to the UI (no server paths, no tracebacks)."""

    id: str
    owner: str
    recipe: str
    preset: str
    data: str
    device: str
    status: str
    progress: float
    message: str
    eta_s: float | None
    elapsed_s: float
    queue_position: int | None
    losses: list[tuple[int, float]]
    log: list[str]
    comparison: list[dict[str, Any]]
    metric_name: str | None
    warnings: list[str]
    error: str | None
    scratch: bool = False  # a smoke/tiny run kept in its owner's scratch folder
    learning_curve: dict | None = None  # {"unit", "points"} when the run wrote one (options.learning_curve)
    registerable: bool = False  # finished, not registered: its owner may register it

    @property
    def active(self) -> bool:
        return self.status in ACTIVE


@dataclass
class _Job:
    id: str
    owner_id: int
    owner: str
    config: Any
    preset: str
    data: str
    device: str
    profile: str | None = None
    status: str = "queued"
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    progress: float = 0.0
    message: str = "waiting for the device"
    first_step: tuple[float, float] | None = None  # (time, fraction) of the first training step
    eta_s: float | None = None
    losses: list[tuple[int, float]] = field(default_factory=list)
    log: deque = field(default_factory=lambda: deque(maxlen=LOG_LINES))
    before: dict[str, float] = field(default_factory=dict)
    after: dict[str, float] = field(default_factory=dict)
    metric_name: str | None = None
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    scratch: bool = False  # registers only when its owner asks (register())
    result: Any = None  # the TrainResult, kept for a registration on request
    refused: bool = False  # registration was refused (the reason is in message)
    learning_curve: dict | None = None


class JobRunner:
    """Queues per device, one worker thread per busy device."""

    def __init__(self, train: TrainFunction | None = None, register: Callable[..., str] = register_run,
                 unregister_version: Callable[[str], None] = unregister):
        self._train = train
        self._register = register
        self._unregister = unregister_version
        self._jobs: dict[str, _Job] = {}
        self._queues: dict[str, deque[str]] = {}
        self._busy: set[str] = set()
        self._lock = threading.RLock()

    def submit(self, config, owner_id: int, owner: str, preset: str, data: str, profile: str | None = None,
               scratch: bool = False) -> JobView:
        """Queue ``config``; the result registers for ``profile`` when the run names none, and
        with ``scratch`` only when register() asks."""
        job = _Job(id=uuid.uuid4().hex[:12], owner_id=owner_id, owner=owner, config=config, preset=preset,
                   data=data, device=_device_of(config), profile=profile, scratch=scratch)
        with self._lock:
            self._jobs[job.id] = job
            self._queues.setdefault(job.device, deque()).append(job.id)
            self._note(job, f"queued on {job.device} ({config.recipe}, preset {preset}, data: {data})")
            if job.device not in self._busy:
                self._busy.add(job.device)
                threading.Thread(target=self._work, args=(job.device,), name=f"train-{job.device}", daemon=True).start()
            return self._view(job)

    def view(self, job_id: str) -> JobView:
        with self._lock:
            return self._view(self._get(job_id))

    def owner_of(self, job_id: str) -> int:
        return self._get(job_id).owner_id

    def jobs(self, owner_id: int | None = None) -> list[JobView]:
        """Jobs newest first (``owner_id`` None: everyone's)."""
        with self._lock:
            chosen = [j for j in self._jobs.values() if owner_id is None or j.owner_id == owner_id]
            return [self._view(j) for j in sorted(chosen, key=lambda j: j.created, reverse=True)]

    def cancel(self, job_id: str) -> JobView:
        """A queued job leaves its queue; a running one is asked to stop at its next step."""
        with self._lock:
            job = self._get(job_id)
            if job.status == "queued":
                self._queues[job.device].remove(job.id)
                job.status, job.finished, job.message = "cancelled", time.time(), "cancelled before it started"
                self._note(job, job.message)
            elif job.status == "running":
                job.cancel.set()
                job.message = "cancelling at the next step…"
                self._note(job, "cancel requested")
            return self._view(job)

    def register(self, job_id: str) -> JobView:
        """Register a finished, unregistered run now (a scratch run, on its owner's request).
        ValueError with the reason when it cannot be (not finished, refused by the check)."""
        with self._lock:
            job = self._get(job_id)
            if job.metric_name:
                raise ValueError(f"this run is already registered as {job.metric_name}")
            if job.status != "done" or job.result is None:
                raise ValueError(f"only a finished run can be registered; this one is {job.status}")
        self._note(job, "registering on request")
        self._register_result(job)
        with self._lock:
            if job.metric_name is None:
                raise ValueError(job.message)
            return self._view(job)

    def delete(self, job_id: str) -> str | None:
        """Forget an ended job, take the version it registered out of the registry and remove
        its run folder; returns that version. A queued or running job must be cancelled first."""
        with self._lock:
            job = self._get(job_id)
            if job.status in ACTIVE:
                raise ValueError("cancel this job before deleting it")
            if job.metric_name:
                try:
                    self._unregister(job.metric_name)
                except LookupError:
                    pass  # already taken out of the registry by hand
            shutil.rmtree(job.config.out, ignore_errors=True)
            del self._jobs[job_id]
            return job.metric_name

    def forget_version(self, name: str) -> None:
        """A registered version was deleted elsewhere: the job that registered it no longer names it."""
        with self._lock:
            for job in self._jobs.values():
                if job.metric_name == name:
                    job.metric_name, job.message = None, f"its version {name} was deleted"

    def wait(self, job_id: str, timeout: float) -> JobView:
        """Block until the job has ended or ``timeout`` seconds passed (CLI and tests)."""
        deadline = time.time() + timeout
        while self.view(job_id).active and time.time() < deadline:
            time.sleep(0.05)
        return self.view(job_id)

    # -- the worker ------------------------------------------------------------------------
    def _work(self, device: str) -> None:
        while True:
            with self._lock:
                queue = self._queues.get(device)
                if not queue:
                    self._busy.discard(device)
                    return
                job = self._jobs[queue.popleft()]
                job.status, job.started, job.message = "running", time.time(), "starting"
            try:
                self._run(job)
            except Exception as exc:  # after training: the job fails, this device's queue goes on
                self._end(job, exc)

    def _end(self, job: _Job, exc: Exception) -> None:
        """A job that raised: cancelled (its snapshot stays) or failed with a message a user may read."""
        with self._lock:
            job.finished = time.time()
            if job.cancel.is_set():
                resumable = (Path(job.config.out) / SNAPSHOT).is_file()  # none before its first snapshot
                job.status, job.message = "cancelled", ("cancelled; the last snapshot stays resumable" if resumable
                                                        else "cancelled before its first snapshot; nothing to resume")
            else:
                job.status = "failed"
                job.error = public_message(user_message(exc))  # an unexpected error is logged with its id
                LOG.warning("training job %s failed: %s", job.id, job.error)
                job.message = f"failed: {job.error}"
            self._note(job, job.message)

    def _run(self, job: _Job) -> None:
        train = self._train or _library_train()
        try:
            result = train(job.config, progress=lambda f, m: self._progress(job, f, m),
                           log=lambda line: self._note(job, line), cancel=job.cancel)
        except Exception as exc:  # the job ends; the server and the other jobs go on
            self._end(job, exc)
            return
        with self._lock:
            job.before, job.after = dict(result.before), dict(result.after)
            job.losses = [(int(s), float(v)) for s, v in result.losses] or job.losses
            job.warnings = list(result.warnings)
            job.progress, job.eta_s = 1.0, 0.0
            job.result = result
            try:
                job.learning_curve = read_learning_curve(result.out_dir)
            except (OSError, ValueError) as exc:  # a damaged learning_curve.json: the trained model stands
                self._note(job, f"the learning curve could not be read: {public_message(exc)}")
            if job.scratch:
                job.status, job.finished = "done", time.time()
                job.message = scratch_message(job.preset, "press “Register as a metric version”")
                self._note(job, job.message)
                return
            self._note(job, "training finished; registering the result")
        self._register_result(job)
        with self._lock:
            job.status, job.finished = "done", time.time()

    def _register_result(self, job: _Job) -> None:
        """Register the job's result; the job's message says what happened."""
        try:
            name = self._register(job.result, fallback_profile=job.profile, owner=job.owner)
        except (ValueError, OSError) as exc:
            name, message = None, f"trained, but not registered: {public_message(exc)}"
        else:
            message = f"done: registered as {name}"
            if job.profile and name not in metric_names(job.profile):
                message += f" for the profile of its base models, not this app's profile {job.profile}"
        with self._lock:
            job.metric_name, job.message, job.refused = name, message, name is None
            self._note(job, message)

    def _progress(self, job: _Job, fraction: float, message: str) -> None:
        with self._lock:
            now, fraction = time.time(), min(max(float(fraction), 0.0), 1.0)
            match = STEP_LOSS.search(message)
            if match:
                job.losses.append((int(match.group(1)), float(match.group(2))))
                if job.first_step is None:
                    job.first_step = (now, fraction)
            job.progress, job.message = fraction, message
            if job.first_step is not None and fraction > job.first_step[1]:
                start, first = job.first_step
                job.eta_s = (now - start) / (fraction - first) * (1.0 - fraction)

    def _note(self, job: _Job, line: str) -> None:
        with self._lock:
            job.log.append(f"{datetime.now(timezone.utc):%H:%M:%S} {public_message(line)}")

    def _get(self, job_id: str) -> _Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise LookupError(f"no training job {job_id!r}")
        return job

    def _view(self, job: _Job) -> JobView:
        queue = list(self._queues.get(job.device, ()))
        end = job.finished or time.time()
        return JobView(
            id=job.id, owner=job.owner, recipe=job.config.recipe, preset=job.preset, data=job.data, device=job.device,
            status=job.status, progress=job.progress, message=public_message(job.message), eta_s=job.eta_s,
            elapsed_s=(end - job.started) if job.started else 0.0,
            queue_position=queue.index(job.id) + 1 if job.id in queue else None,
            losses=list(job.losses), log=list(job.log), comparison=compare(job.before, job.after, job.config.recipe),
            metric_name=job.metric_name, warnings=list(job.warnings), error=job.error, scratch=job.scratch,
            learning_curve=job.learning_curve,
            registerable=job.status == "done" and job.result is not None and not job.metric_name and not job.refused,
        )


def public_message(error: BaseException | str) -> str:
    """One line for users: server folders replaced by names they know."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return public_text(text)


def _device_of(config) -> str:
    if config.device != "auto":
        return config.device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _library_train() -> TrainFunction:
    from scoring.training import train

    return train


# -- the library functions the Train tab calls (role-checked) ---------------------------------

_runner: JobRunner | None = None
_runner_lock = threading.Lock()


def runner() -> JobRunner:
    """The process-wide runner (the app's jobs)."""
    global _runner
    with _runner_lock:
        if _runner is None:
            _runner = JobRunner()
        return _runner


def _researcher(user_id: int | None) -> tuple[int, str, bool]:
    """(id, name, is_admin) of a researcher or admin; PermissionError otherwise."""
    from annotation.people.accounts import RESEARCH_ROLES, require_role
    from annotation.people.acting import acting

    with acting(user_id, read_only=True) as (_session, user):
        require_role(user, *RESEARCH_ROLES)
        return user.id, user.name, user.role == "admin"


def training_options() -> dict[str, dict[str, Any]]:
    """Recipe name -> its summary and its config presets (smallest first), for the menus."""
    from scoring.training import RECIPES
    from scoring.training.config import PRESETS_DIR

    by_recipe: dict[str, list[str]] = {}
    for path in sorted(PRESETS_DIR.glob("*.toml")):
        by_recipe.setdefault(tomllib.loads(path.read_text(encoding="utf-8")).get("recipe", ""), []).append(path.stem)
    return {name: {"summary": recipe.summary,
                   "presets": sorted(by_recipe.get(name, []), key=lambda p: (not p.endswith("-tiny"), p))}
            for name, recipe in RECIPES.items()}


def is_scratch_preset(preset: str) -> bool:
    """A smoke or tiny preset: seconds-long runs that test the pipeline, never a metric for others."""
    return preset.endswith("-tiny") or "smoke" in preset


def run_folder(owner: str, recipe: str, preset: str, stamp: str) -> tuple[Path, bool]:
    """(folder, scratch) of a run of ``preset`` by ``owner``: the one rule of the Train tab and
    of `caplens finetune`. A smoke/tiny preset (``scratch``) trains in the owner's scratch
    folder and registers only when asked (``scratch_message`` says so); any other registers
    when it ends. ``preset`` is a preset's name or a config file (named by its stem)."""
    scratch = is_scratch_preset(Path(preset).stem)
    runs = data_dir() / "runs" / "scratch" / _slug(owner) if scratch else data_dir() / "runs"
    return runs / f"{recipe}-{stamp}", scratch


def scratch_message(preset: str, how: str) -> str:
    """What a finished smoke/tiny run says: kept, not registered, and ``how`` to register it."""
    return (f"done: kept in your scratch space, not registered (preset {Path(preset).stem} is a smoke run); "
            f"{how} to offer it to everyone")


def start_training(user_id: int | None, recipe: str, preset: str, *, set_file: str | None = None,
                   collection: str | None = None, profile: str | None = None,
                   jobs: JobRunner | None = None) -> JobView:
    """Queue a run of ``recipe`` with config ``preset`` on the preset's data, an uploaded set
    (a set folder zipped, or its JSONL/Parquet/CSV data file) or a collection's exported set.
    ``profile`` (the app's) is where the result registers if the run names no profile. A
    smoke/tiny preset runs in the owner's scratch folder and registers only on request."""
    from annotation.people.acting import acting
    from scoring.training import RECIPES, load_config

    owner_id, owner, _ = _researcher(user_id)
    if recipe not in RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}; choose one of {', '.join(RECIPES)}")
    if set_file and collection:
        raise ValueError("choose a set file or a collection, not both")
    preset_recipe = load_config(preset).recipe
    if preset_recipe != recipe:
        raise ValueError(f"preset {preset} is for recipe {preset_recipe}, not {recipe}")
    stamp = run_stamp()
    folder, scratch = run_folder(owner, recipe, preset, stamp)
    overrides: dict[str, Any] = {"out": str(folder)}
    if set_file:
        overrides["data"] = str(_unpack_set(Path(set_file), data_dir() / "sets" / f"upload-{stamp}"))
        about = f"uploaded set {Path(set_file).name}"
    elif collection:
        with acting(owner_id, read_only=True) as (session, user):
            overrides["data"] = str(export_collection_set(session, user, recipe, collection,
                                                          data_dir() / "sets" / f"{_slug(collection)}-{stamp}"))
        about = f"collection {collection}"
    else:
        about = "the preset's data"
    config = load_config(preset, **overrides)
    return (jobs or runner()).submit(config, owner_id, owner, preset, about, profile, scratch=scratch)


def run_stamp() -> str:
    """A run's unique time stamp, for its folder's name."""
    return f"{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class TrainingBoard:
    """What the Train tab shows: one job in detail and the list of jobs."""

    current: JobView | None
    jobs: list[JobView]
    deleted_version: str | None = None  # the version a deletion took out of the metric lists


def training_board(user_id: int | None, job_id: str | None = None, *, jobs: JobRunner | None = None) -> TrainingBoard:
    """Job ``job_id`` (else the user's newest active job, else their newest) and the user's
    jobs newest first; an admin's list holds everyone's."""
    owner_id, _, admin = _researcher(user_id)
    jobs = jobs or runner()
    listed = jobs.jobs(None if admin else owner_id)
    if job_id:
        _check_access(user_id, jobs, job_id)
        # From the same snapshot as the list, so the two never disagree about the job's state.
        return TrainingBoard(next(j for j in listed if j.id == job_id), listed)
    own = [j for j in listed if jobs.owner_of(j.id) == owner_id] if admin else listed
    return TrainingBoard(next((j for j in own if j.active), own[0] if own else None), listed)


def cancel_training(user_id: int | None, job_id: str, *, jobs: JobRunner | None = None) -> JobView:
    jobs = jobs or runner()
    _check_access(user_id, jobs, job_id)
    return jobs.cancel(job_id)


def register_training(user_id: int | None, job_id: str, *, jobs: JobRunner | None = None) -> TrainingBoard:
    """Register a finished run on purpose (a scratch run): its owner or an admin. ValueError
    with the reason when it is refused (e.g. it scores every held-out caption the same).
    Returns the board showing the registered job."""
    jobs = jobs or runner()
    _check_access(user_id, jobs, job_id)
    jobs.register(job_id)
    return training_board(user_id, job_id, jobs=jobs)


def delete_training(user_id: int | None, job_id: str, *, jobs: JobRunner | None = None) -> TrainingBoard:
    """Delete an ended job: its registered version leaves every metric list, its run folder
    is removed. Returns the board without it, naming the version deleted with it."""
    jobs = jobs or runner()
    _check_access(user_id, jobs, job_id)
    deleted = jobs.delete(job_id)
    board = training_board(user_id, jobs=jobs)
    return TrainingBoard(board.current, board.jobs, deleted)


def deletable_versions(user_id: int | None) -> list[str]:
    """The registered versions this user may delete: those they registered, every one for an admin."""
    _, name, admin = _researcher(user_id)
    return [v["name"] for v in registered_versions() if admin or v["registered_by"] == name]


def delete_version(user_id: int | None, name: str, *, jobs: JobRunner | None = None) -> list[str]:
    """Take a registered version out of every metric list (its run folder stays); the user's
    own versions, or any for an admin. Returns the versions they may still delete."""
    if name not in deletable_versions(user_id):
        if any(v["name"] == name for v in registered_versions()):
            raise PermissionError(f"{name} was registered by another user")
        raise LookupError(f"{name} is not a registered version")
    unregister(name)
    (jobs or runner()).forget_version(name)
    return deletable_versions(user_id)


def _check_access(user_id: int | None, jobs: JobRunner, job_id: str) -> None:
    owner_id, _, admin = _researcher(user_id)
    if not job_id:
        raise LookupError("no training job chosen")
    if not admin and jobs.owner_of(job_id) != owner_id:
        raise PermissionError("this training job belongs to another user")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-").lower() or "set"


def export_collection_set(session, user, recipe: str, collection: str, out_dir: Path, seed: int = 0) -> Path:
    """Export the collection's fine-tuning set of the kind ``recipe`` trains on (its
    ``set_kind``; the trainer's "ratings" is the exported "human" set) into ``out_dir``."""
    from annotation.transfer.finetune_sets import SET_KINDS, build_finetune_set
    from annotation.captions import get_collection
    from scoring.training import RECIPES

    set_kind = RECIPES[recipe].set_kind
    kind = COLLECTION_SET_KINDS.get(set_kind, set_kind)
    if kind not in SET_KINDS:
        raise ValueError(f"recipe {recipe} trains on {set_kind} data, which no collection provides: use the preset's data")
    build_finetune_set(session, user, kind, out_dir, collection=get_collection(session, collection), seed=seed)
    return out_dir


def _unpack_set(upload: Path, target: Path) -> Path:
    """The uploaded set in the data directory: a zipped set folder is unpacked under the zip
    limits (`annotation.transfer.archives`; members outside the folder refused, nothing kept on failure),
    a data file is copied with the manifest beside it if any."""
    if upload.suffix.lower() == ".zip":
        try:
            extract_zip(upload, target)
            manifests = sorted(target.rglob("manifest.json"))
            if not manifests:
                raise ValueError(f"{upload.name}: no manifest.json inside; zip the folder an export wrote")
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
        return manifests[0].parent
    if upload.suffix.lower() not in SET_SUFFIXES:
        raise ValueError(f"{upload.name}: give a zipped set folder or a {', '.join(SET_SUFFIXES)} data file")
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(upload, target / upload.name)
    manifest = upload.parent / "manifest.json"
    if manifest.is_file():
        shutil.copy2(manifest, target / "manifest.json")
    return target / upload.name
