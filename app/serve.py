"""`caplens serve`: start the Gradio app on localhost (or wherever --host says)."""
from __future__ import annotations

import argparse


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
    p.set_defaults(handler=run)


def create_app(profile: str | None = None, seed_demo: bool = True):
    """Prepare the database and the scorer, and build the Blocks app. Returns (demo, ctx).

    On first run this creates the database (through the migrations) and, with `seed_demo`,
    fills the synthetic-world demo collection so every tab has something to show offline.
    """
    from app import engine
    from app.ui import build_app

    _prepare(seed_demo)

    chosen, banner = engine.choose_profile(profile)
    ctx = engine.AppContext(profile=chosen, banner=banner)
    return build_app(ctx), ctx


DEMO_LOGIN = "demo"


def _prepare(seed_demo: bool = True) -> None:
    """The database ready to serve; on a first run the operator's console learns the demo
    collection and the login (nobody else sees the password)."""
    from annotation.app_start import prepare_database

    first = prepare_database(seed_demo, DEMO_LOGIN)
    if first.demo_collection:
        print(f"CapLens: first run, demo collection {first.demo_collection!r} created.", flush=True)
    if first.login_password:
        print(f"CapLens: log in as '{DEMO_LOGIN}' with password '{first.login_password}' (researcher; change it "
              f"with `caplens user passwd {DEMO_LOGIN}`).", flush=True)


def launch_kwargs(host: str, port: int | None, share: bool) -> dict:
    """Arguments for `Blocks.launch`: the stored images may be served (thumbnails, opening
    a failure case in the Score tab); uploads are capped before they reach our decoder."""
    from annotation.app_start import served_image_folders
    from app.uploads import max_upload_bytes

    return dict(
        server_name=host,
        server_port=port or None,
        share=share,
        max_file_size=max_upload_bytes(),
        allowed_paths=served_image_folders(),
        show_error=True,
    )


def run(args: argparse.Namespace) -> int:
    demo, ctx = create_app(args.profile, seed_demo=not args.no_demo)
    print(f"CapLens: profile '{ctx.profile}' in use.", flush=True)
    demo.queue(default_concurrency_limit=2).launch(**launch_kwargs(args.host, args.port, args.share))
    return 0
