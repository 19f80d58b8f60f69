"""Hugging Face Spaces entry point (README front matter: `app_file: space.py`).

Spaces run this file directly; it builds the same app as `caplens serve` and listens on the
address the Space expects.
"""
from app.serve import create_app, launch_kwargs

demo, ctx = create_app()

if __name__ == "__main__":
    print(f"CapLens: profile '{ctx.profile}' in use.", flush=True)
    demo.queue(default_concurrency_limit=2).launch(**launch_kwargs("0.0.0.0", 7860, False))
