"""`caplens serve`: start the Gradio app on localhost (or wherever --host says)."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import time
from pathlib import Path


def register(subparsers, parents) -> None:
    p = subparsers.add_parser("serve", parents=parents, help="start the web app")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (0.0.0.0 for all; default 127.0.0.1)")
    p.add_argument("--port", type=int, default=7860, help="port (default 7860; 0 picks a free one)")
    p.add_argument("--share", action="store_true", help="also create a public gradio.live share link")
    p.add_argument("--profile", default=None,
                   help="metric profile: hub, world or tiny (default: $CAPLENS_PROFILE, else hub when its "
                        "checkpoints load, else world)")
    p.add_argument("--no-demo", action="store_true",
                   help="do not fill the synthetic-world demo collection into an empty database")
    p.add_argument("--mcp", action="store_true",
                   help="also serve the API endpoints (score, perturb, login, next_item, rate, next_pair, judge_pair, analyze, "
                        "failure_cases) "
                        "as MCP tools at /gradio_api/mcp/ (streamable HTTP; SSE at /gradio_api/mcp/sse); needs "
                        "the mcp package (pip install \"gradio[mcp]\"). The tools that act as an account need the "
                        "X-CapLens-Token header from the login tool, as the API does")
    p.set_defaults(handler=run)


def create_app(profile: str | None = None, seed_demo: bool = True, warm_up: bool = True):
    """Prepare the database and the scorer, and build the Blocks app. Returns (demo, ctx).

    On first run this creates the database (through the migrations) and, with `seed_demo`,
    fills the synthetic-world demo collection beside the server, so every tab has something to
    show offline without the server waiting for it. With `warm_up` the models load and the demo
    collection is analyzed once in the background (`annotation.warmup`). Both start from
    `launch`, once the server answers: started here, their threads took the CPU and the GIL
    from Gradio's launch, and a first boot on 2 busy cores took over a minute to answer.
    """
    from app import engine
    from app.access import allow_direct_events, limit_heavy_work
    from app.api import check_argument_count
    from app.ui import build_app

    stored = _storage()
    first = _prepare(seed_demo)
    sweep_own_files(None)  # what a killed server handed out
    ctx = engine.choose_profile(profile)
    if stored.warning:
        ctx = dataclasses.replace(ctx, banner=f"{ctx.banner}\n\n{stored.warning}")
    demo = build_app(ctx)
    demo.validate_inputs = check_argument_count  # a call with too few arguments: words, no traceback
    limit_heavy_work(demo)
    allow_direct_events(demo)
    light_sessions()
    end_pageless_sessions()
    start_sweeping()

    def start_background() -> None:
        seeding = _seed_demo_in_background() if first.seed_demo else None
        if warm_up:
            _warm_up(ctx.profile, seeding)

    demo.caplens_start_background = start_background  # `launch` calls it once the server answers
    return demo, ctx


def _warm_up(profile: str, seeding):
    """Load the profile's models and analyze the demo collection once (after `seeding`, the
    thread filling it; without a demo, the models only) on a daemon thread; the console says
    when it is done."""
    from annotation.warmup import start_warm_up
    from app import engine
    from scoring.world.demo import DEMO_COLLECTION

    def report(line: str) -> None:  # the warm-up's last word: what it loaded lives as long as the server
        from scoring.api import freeze_long_lived_objects

        print(f"CapLens: {line}", flush=True)
        freeze_long_lived_objects()

    return start_warm_up(engine.AppScorer(profile), engine.metric_names(profile),
                         DEMO_COLLECTION if seeding is not None else None, seeding, report)


DEMO_LOGIN = "demo"


def _storage():
    """Where the ratings live, said on the console (and on a Space that loses them at restart,
    a warning for the banner)."""
    from annotation.persistence import prepare_storage

    return prepare_storage(lambda line: print(f"CapLens: {line}", flush=True))


def _prepare(seed_demo: bool = True):
    """The database ready to serve; on a first run the operator's console learns the demo
    login (nobody else sees the password). Returns what the first run still needs."""
    from annotation.app_start import prepare_database

    first = prepare_database(seed_demo, DEMO_LOGIN)
    if first.login_password:
        print(f"CapLens: log in as '{DEMO_LOGIN}' with password '{first.login_password}' (researcher; change it "
              f"with `caplens user passwd {DEMO_LOGIN}`).", flush=True)
    return first


def _seed_demo_in_background():
    """Fill the demo collection on a daemon thread; the console says when it is there."""
    from annotation.app_start import seed_demo_in_background

    print("CapLens: first run, filling the demo collection in the background.", flush=True)
    return seed_demo_in_background(lambda line: print(f"CapLens: {line}", flush=True))


def sweep_own_files(age_s: float | None) -> int:
    """Delete the files CapLens put in Gradio's folder (copies handed to one session: stored
    images, exports; download folders) that are older than `age_s` seconds (None: all of
    them); how many. Gradio's own sweep (`app.ui.CACHE_SWEEP`) knows only the files it wrote."""
    import shutil
    import time

    from gradio.utils import get_upload_folder

    from app.session import private_files_root
    from app.uploads import DOWNLOAD_PREFIX

    cache = Path(get_upload_folder())
    roots = [private_files_root(), *cache.glob(f"{DOWNLOAD_PREFIX}*")]
    if age_s is None:
        removed = sum(1 for root in roots for path in root.rglob("*") if path.is_file())
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)
        return removed
    removed, now = 0, time.time()
    for root in roots:
        for path in sorted(root.rglob("*"), reverse=True):  # files before their folders
            try:
                if path.is_file() and now - path.stat().st_mtime > age_s:
                    path.unlink()
                    removed += 1
                elif path.is_dir() and not any(path.iterdir()):
                    path.rmdir()
            except OSError:
                continue
    return removed


def start_sweeping(stop=None):
    """`sweep_own_files` every CACHE_SWEEP period on a daemon thread (until the threading.Event
    `stop` is set, if one is given), and once more, of everything, when the process exits."""
    import atexit
    import logging
    import threading

    from app.ui import CACHE_SWEEP

    every, age = CACHE_SWEEP
    stop = stop or threading.Event()

    def loop():
        while not stop.wait(every):
            try:
                sweep_own_files(age)
            except Exception:  # one failed sweep (a folder removed under it) must not end the sweeping
                logging.getLogger(__name__).warning("the cache sweep failed; trying again later", exc_info=True)

    atexit.register(sweep_own_files, None)
    thread = threading.Thread(target=loop, name="caplens-sweep", daemon=True)
    thread.start()
    return thread


def light_sessions() -> None:
    """Make each Gradio session cost what it stores, not a copy of the whole page.

    Gradio keeps one session per session hash, and an API call without one (plain HTTP,
    `/gradio_api/call/...`) gets a new hash each time. Its session renders the settings of
    every one of the app's ~430 components when it is created: about 0.7 MB and 0.3 s of CPU per
    call, kept until 10,000 sessions push it out. `LightSessionState` renders a component's
    settings only when the session changes it, and copies the page's config only then; the whole
    list only where Gradio asks for it (deep links, which `app.access` does not serve). Installed
    once, for every Blocks app of this process."""
    import gradio.state_holder as holder

    if not getattr(holder.SessionState, "caplens_light", False):
        holder.SessionState = _light_session_class(holder.SessionState)


def end_pageless_sessions() -> None:
    """End the session of a call that sent no session hash when its event ends.

    A plain-HTTP call (`/gradio_api/call/...`, curl, an agent) names no session: Gradio names
    one after the event and keeps it until 10,000 newer sessions push it out (28 KB each, about
    280 MB at the cap), and keeps the session's message queue and its set of event ids for
    ever. No later request can name that session again, so its state ends with its event, and
    its queue entries once the caller has read the answer (or after `UNREAD_ANSWER_S`, an
    answer nobody came for). Sessions a page or `gradio_client` named keep Gradio's rules (a
    page's ends an hour after its heartbeat stops). Installed once, for every Blocks app of
    this process."""
    from gradio.queueing import Queue

    if getattr(Queue.process_events, "caplens_ends_pageless", False):
        return
    run_events = Queue.process_events

    async def process_events(self, events, *args, **kwargs):
        try:
            return await run_events(self, events, *args, **kwargs)
        finally:
            holder = getattr(self.server_app, "state_holder", None)
            ended = self.__dict__.setdefault("caplens_ended_sessions", {})
            for event in events:
                if holder is not None and event.session_hash == event._id and not event.streaming:
                    with holder.lock:
                        holder.session_data.pop(event.session_hash, None)
                        holder.time_last_used.pop(event.session_hash, None)
                    ended[event.session_hash] = time.monotonic()
            _forget_answered(self, ended)

    process_events.caplens_ends_pageless = True
    Queue.process_events = process_events


UNREAD_ANSWER_S = 600


def _forget_answered(queue, ended: dict) -> None:
    """Drop the queue entries of ended page-less sessions whose answer was read (no event id
    left, no message waiting) or waited longer than `UNREAD_ANSWER_S`."""
    now = time.monotonic()
    for session_hash, when in list(ended.items()):
        messages = queue.pending_messages_per_session.get(session_hash)
        read = not queue.pending_event_ids_session.get(session_hash) and (messages is None or messages.empty())
        if read or now - when > UNREAD_ANSWER_S:
            queue.pending_event_ids_session.pop(session_hash, None)
            if messages is not None:
                del queue.pending_messages_per_session[session_hash]
            del ended[session_hash]


def _light_session_class(base: type) -> type:
    from copy import copy

    from gradio.components import State

    class LightSessionState(base):
        caplens_light = True

        def __init__(self, blocks):  # what base.__init__ sets, without rendering every component
            import os

            # The page's config is shared until this session stores a changed component in it
            # (`__setitem__`): a copy of its dicts of ~430 components and their events was 27 KB
            # of the 56 KB each API call's session kept. A page with `gr.render` (which changes a
            # session's config in other places) gets its copy at once.
            shared = not blocks.default_config.renderables
            self.blocks_config = blocks.default_config if shared else copy(blocks.default_config)
            self._own_config = not shared
            self._known_blocks = blocks.blocks
            self.config_values = {}
            self.state_data = {}
            self._state_ttl = {}
            self.is_closed = False
            self.STATE_TTL_WHEN_CLOSED = 1 if os.getenv("GRADIO_IS_E2E_TEST") else 3600

        def __setitem__(self, key, value):
            if not self._own_config and not isinstance(self.blocks_config.blocks.get(key), State):
                self.blocks_config, self._own_config = copy(self.blocks_config), True
            super().__setitem__(key, value)

        @property
        def components(self):
            for key, block in self.blocks_config.blocks.items():
                if key in self._known_blocks and key not in self.config_values:
                    self.config_values[key] = self.blocks_config.config_for_block(key, [], block)
            return super().components

    return LightSessionState


def configure_logging() -> None:
    """Warnings and errors (an error id's traceback, a failed training job) on the console."""
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def launch_kwargs(host: str, port: int | None, share: bool, mcp: bool = False) -> dict:
    """Arguments for `Blocks.launch`: uploads capped before they reach our decoder; the data
    directory never served (stored images and exports reach a browser only as copies for its
    session); the login routes and the guard of `app.access`; no run history kept in the browser;
    Gradio's MCP server only with `mcp` (never from the GRADIO_MCP_SERVER variable alone), its
    tools answering in JSON."""
    from annotation.app_start import unserved_folders
    from app.access import app_kwargs
    from app.ui import PAGE_CSS, page_words
    from app.uploads import max_upload_bytes

    extra = app_kwargs()
    if mcp:
        extra["lifespan"] = _mcp_answers_in_json
    return dict(
        server_name=host,
        server_port=port or None,
        share=share,
        max_file_size=max_upload_bytes(),
        blocked_paths=unserved_folders(),
        app_kwargs=extra,
        run_history=False,
        mcp_server=bool(mcp),
        enable_monitoring=False,  # Gradio's /monitoring would print its key to the log, and its summary is open
        # Handler errors reach users as app/errors.py words them (gr.Error, always shown);
        # anything else Gradio raises shows as a bare "Error", never its text.
        show_error=False,
        css=PAGE_CSS,
        i18n=page_words(),
    )


@contextlib.asynccontextmanager
async def _mcp_answers_in_json(app):
    """When the server starts (Gradio's MCP server exists by then): its tools answer in JSON."""
    from app.api import json_answers

    server = app.get_blocks().mcp_server_obj
    if server is not None:
        json_answers(server)
    yield


def without_queue_analytics(queue) -> None:
    """Gradio's queue keeps a record of its last 10,000 events (with their session) for the
    /monitoring dashboard, which is off here, and after every event rebuilds a pandas table of
    all of them to summarise it: on 2 cores that was a tenth of a rating's server time after a
    few hundred events, growing with every event up to 10,000. Keep one record and never
    summarise (the summary stays the empty one the dashboard would have shown)."""
    queue.ANALYTICS_MAX_EVENTS = 1
    queue.ANAYLTICS_CACHE_FREQUENCY = sys.maxsize  # Gradio's spelling


def launch(demo, kwargs: dict) -> None:
    """Queue and launch the app with `kwargs` (from `launch_kwargs`). The /score endpoint's
    gr.State is a gradio_client session's memory of scored pairs; an MCP tool call runs without
    it (each call scores afresh, with the same answers), which is all Gradio's start-up warning
    about MCP tools with a State input says, so that one warning is not shown."""
    import warnings

    _stop_on_sigterm()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="This MCP server includes a tool that has a gr.State input",
                                    category=UserWarning)
            demo.queue(default_concurrency_limit=2)
            without_queue_analytics(demo._queue)
            from scoring.api import freeze_long_lived_objects

            freeze_long_lived_objects()
            # Gradio's own start-up lines end with "To create a public link, set `share=True` in
            # `launch()`", which is not how CapLens shares (`--share`): its addresses are said here.
            demo.launch(**{**kwargs, "prevent_thread_lock": True, "quiet": True})
        if not kwargs.get("quiet"):
            print(f"* Running on local URL:  {demo.local_url}", flush=True)
            if demo.share_url:
                print(f"* Running on public URL: {demo.share_url}", flush=True)
        start_background = getattr(demo, "caplens_start_background", None)
        if start_background is not None:
            del demo.caplens_start_background  # once per app
            start_background()
        if kwargs.get("prevent_thread_lock"):
            return
        demo.block_thread()
    except KeyboardInterrupt:
        # A stop that arrives before `block_thread` (Gradio's launch goes on for a while after
        # the server answers; on a busy machine for seconds) is the same stop: close the server,
        # not end with a traceback and exit 130.
        demo.close(verbose=False)
    _exit_if_busy_threads()  # the server has closed (Ctrl+C or SIGTERM); else it runs on in its thread


def _exit_if_busy_threads() -> None:
    """After the server closed: when the warm-up or the demo seeding is still running (a stop
    soon after start), end the process here. Their daemon threads may be inside torch's C++
    code, and the interpreter's shutdown under them aborts the process ("terminate called
    without an active exception", exit -6). The exit handlers (the sweep, Gradio's) run first."""
    import atexit
    import logging
    import threading

    busy = [t for t in threading.enumerate() if t.is_alive() and t.name in ("caplens-warm-up", "caplens-demo-seed")]
    if not busy:
        return
    atexit._run_exitfuncs()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _stop_on_sigterm() -> None:
    """A Space, Docker or systemd stops the server with SIGTERM, whose default ends the process
    at once: Gradio's shutdown (which empties its cache of uploads and downloads) and the exit
    sweep (`start_sweeping`) never ran, so what strangers uploaded stayed on disk. SIGTERM now
    interrupts the main thread as Ctrl+C does, which Gradio answers by closing the server."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(_signum, _frame):
    raise KeyboardInterrupt


def require_mcp() -> None:
    """ValueError (one line from `caplens serve`) when the MCP server cannot start: Gradio would
    only print a warning and serve without it."""
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        raise ValueError('--mcp needs the mcp package: pip install "gradio[mcp]"')


def run(args: argparse.Namespace) -> int:
    configure_logging()
    if args.mcp:
        require_mcp()
    demo, ctx = create_app(args.profile, seed_demo=not args.no_demo)
    print(f"CapLens: {ctx.console}", flush=True)
    launch(demo, launch_kwargs(args.host, args.port, args.share, args.mcp))
    return 0
