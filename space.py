"""Hugging Face Spaces entry point (README front matter: `app_file: space.py`).

Spaces run this file directly; it builds the same app as `caplens serve` and listens where
the Space expects: GRADIO_SERVER_NAME and GRADIO_SERVER_PORT when set (as Spaces and Gradio
name them), else 0.0.0.0:7860. Space secrets CAPLENS_ADMIN_USER and CAPLENS_ADMIN_PASSWORD,
when set, create that admin account on first start so the owner can log in and add annotators.
"""
import os

from app.serve import configure_logging, create_app, launch, launch_kwargs


def ensure_admin_from_secrets() -> None:
    from annotation.app_start import ensure_account

    name, password = os.environ.get("CAPLENS_ADMIN_USER"), os.environ.get("CAPLENS_ADMIN_PASSWORD")
    if name and password:
        ensure_account(name, "admin", password)


configure_logging()
demo, ctx = create_app()
ensure_admin_from_secrets()

if __name__ == "__main__":
    print(f"CapLens: profile '{ctx.profile}' in use.", flush=True)
    host = os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0")
    port = int(os.environ.get("GRADIO_SERVER_PORT", "7860"))
    launch(demo, launch_kwargs(host, port, False))  # as `caplens serve` does (SIGTERM closes it cleanly)
