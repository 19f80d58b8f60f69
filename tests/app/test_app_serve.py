"""`caplens serve` as a user runs it: a subprocess on a free port, first run on an empty data dir."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _upload(port: int, name: str, data: bytes) -> str:
    """POST one file to Gradio's upload route as an anonymous visitor; the path it stored."""
    boundary = "caplens-test-boundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{name}\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/gradio_api/upload", data=body, method="POST",
                                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    return json.loads(urllib.request.urlopen(request, timeout=30).read())[0]


def test_serve_creates_the_database_and_names_the_profile_and_sigterm_removes_uploads(tmp_path):
    """Also: SIGTERM (how a Space, Docker or systemd stops it) ends the server cleanly, and
    what an anonymous visitor uploaded is gone from disk afterwards."""
    port = free_port()
    cache = tmp_path / "gradio"
    env = {**os.environ, "CAPLENS_DATA_DIR": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1",
           "GRADIO_TEMP_DIR": str(cache)}
    env.pop("CAPLENS_PROFILE", None)
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--profile", "tiny", "--no-demo",
                                 "--port", str(port)], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 120
        page = None
        while time.time() < deadline and proc.poll() is None:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read().decode()
                break
            except OSError:
                time.sleep(1)
        while time.time() < deadline and "* Running on local URL" not in log.read_text():
            time.sleep(0.2)  # the server answers before Gradio's launch has returned
        output = log.read_text()
        assert page is not None, output
        assert "CapLens" in page
        assert "CapLens: profile tiny: chosen explicitly" in output
        assert (tmp_path / "data" / "caplens.db").is_file()
        stored = Path(_upload(port, "junk.bin", b"x" * 5000))
        assert stored.is_file() and cache in stored.parents
    finally:
        proc.terminate()  # SIGTERM
        code = proc.wait(timeout=30)
    assert code == 0, log.read_text()
    assert not stored.exists() and not [p for p in cache.rglob("*") if p.is_file()]
    output = log.read_text()
    assert f"* Running on local URL:  http://127.0.0.1:{port}" in output
    assert "share=True" not in output  # Gradio's advice; CapLens shares with --share


def test_a_stop_before_the_launch_returns_closes_the_server_and_exits_cleanly():
    """SIGTERM that lands while Gradio's launch is still running (after the server answers,
    before `block_thread`) used to escape as KeyboardInterrupt: `caplens serve` printed
    "interrupted" and exited 130 instead of closing the server."""
    import signal

    import gradio as gr

    from app.serve import launch

    class StoppedDuringLaunch(gr.Blocks):
        def launch(self, **kwargs):
            answer = super().launch(**kwargs)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises in this thread long before this ends
            return answer

    port = free_port()
    previous = signal.getsignal(signal.SIGTERM)
    try:
        with StoppedDuringLaunch() as demo:
            gr.Markdown("stop me")
        try:
            launch(demo, {"server_name": "127.0.0.1", "server_port": port, "quiet": True})
        except KeyboardInterrupt:
            demo.close()
            pytest.fail("the stop escaped launch as KeyboardInterrupt (caplens serve exits 130)")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not demo.is_running
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)


def test_profile_choice_says_why_hub_is_not_used(monkeypatch):
    from app.engine import choose_profile

    monkeypatch.delenv("CAPLENS_PROFILE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ctx = choose_profile(None)
    assert ctx.profile in ("hub", "world")
    assert "could not be loaded" in ctx.banner  # offline: the hub checkpoints are not reachable
    assert "no network connection and no cached copy" in ctx.banner and "CAPLENS\\_PROFILE" in ctx.banner
    assert "CAPLENS_PROFILE" in ctx.console and "\\" not in ctx.console  # the console gets plain text
    tiny = choose_profile("tiny")
    assert (tiny.profile, tiny.banner, tiny.console) == ("tiny", "**profile tiny**: chosen explicitly",
                                                         "profile tiny: chosen explicitly")


def test_serve_help_lists_gradio_style_options():
    proc = subprocess.run([sys.executable, "-m", "app.cli", "serve", "--help"], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 0
    for option in ("--host", "--port", "--share", "--profile", "--no-demo"):
        assert option in proc.stdout


def test_library_reasons_in_the_banner_are_escaped():
    from app.engine import _plain

    assert "<" not in _plain("<img src=x onerror=alert(1)>").replace("\\<", "")


def test_first_run_gives_the_operator_a_login_and_seeds_the_demo_beside_the_server(tmp_path, monkeypatch, capsys):
    import re

    from annotation.people.accounts import authenticate
    from annotation.database import database_session
    from app import serve

    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    first = serve._prepare()
    assert first.seed_demo  # the demo is still to be filled: the server does not wait for it
    printed = capsys.readouterr().out
    match = re.search(r"log in as 'demo' with password '([^']+)'", printed)
    assert match, printed
    with database_session() as session:
        user = authenticate(session, "demo", match.group(1))
        assert user.role == "researcher"
        assert authenticate(session, "demo", "wrong") is None

    serve._seed_demo_in_background().join(timeout=600)
    assert "demo collection 'world-demo' created." in capsys.readouterr().out

    again = serve._prepare()  # not a first run any more: no second account, no password, no seeding
    assert not again.seed_demo
    assert "password" not in capsys.readouterr().out


def test_the_demo_seeding_and_the_warm_up_start_once_the_server_answers(tmp_path, monkeypatch):
    """Started while the app was built, their threads took the CPU and the GIL from Gradio's
    launch: a first boot on a busy 2-core machine took over a minute to answer."""
    from app import serve

    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    started = []

    def answers() -> int:
        with urllib.request.urlopen(demo.local_url + "gradio_api/info", timeout=30) as answer:
            return answer.status

    def seeding():
        started.append(("seeding", answers()))
        return "the seeding thread"

    monkeypatch.setattr(serve, "_seed_demo_in_background", seeding)
    monkeypatch.setattr(serve, "_warm_up", lambda profile, seeding: started.append(("warm-up", profile, seeding)))
    demo, _ = serve.create_app("tiny")  # a first run: the demo is to be seeded
    assert started == []
    kwargs = serve.launch_kwargs("127.0.0.1", free_port(), False)
    kwargs.update(prevent_thread_lock=True, quiet=True)
    try:
        serve.launch(demo, kwargs)
        assert started == [("seeding", 200), ("warm-up", "tiny", "the seeding thread")]
    finally:
        demo.close()


def test_a_failed_demo_seeding_leaves_the_server_a_line_not_a_crash(tmp_path, monkeypatch):
    from annotation import app_start

    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))

    def broken():
        raise ValueError("no scenes today")

    monkeypatch.setattr(app_start, "seed_demo_if_empty", broken)
    lines = []
    app_start.seed_demo_in_background(lines.append).join(timeout=60)
    assert lines == ["the demo collection could not be created: no scenes today"]


def test_space_owner_account_is_made_once(tmp_path, monkeypatch):
    from annotation.people.auth_sessions import log_in
    from annotation.app_start import ensure_account

    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    assert ensure_account("owner", "admin", "owner-password") is True
    assert ensure_account("owner", "admin", "another-password") is False  # an existing account is kept as it is
    assert log_in("owner", "owner-password", None).account.role == "admin"
    with pytest.raises(PermissionError, match="Wrong user name or password"):
        log_in("owner", "another-password", None)
