"""`caplens serve`: start the Gradio app."""
from __future__ import annotations

import argparse


def register(subparsers, parents) -> None:
    p = subparsers.add_parser("serve", parents=parents, help="start the web app")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (0.0.0.0 for all)")
    p.add_argument("--port", type=int, default=7860)
    p.add_argument("--share", action="store_true", help="create a public Gradio share link")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import gradio as gr

    with gr.Blocks(title="CapLens") as demo:
        gr.Markdown("# CapLens\nThe app is being built; the scoring engine is available from `caplens score`.")
    demo.launch(server_name=args.host, server_port=args.port, share=args.share)
    return 0
