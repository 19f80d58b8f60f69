"""The `caplens db` / `caplens user` commands end to end: argv, standard input, environment,
exit status and both output streams, as a user at a shell gets them."""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy import select

from annotation.people.accounts import authenticate
from db.models import Collection, User
from db.session import get_engine, head_revision, session_scope

REPO = Path(__file__).resolve().parents[2]
# The commands run the same library code the other tests cover on both backends; one
# backend keeps these subprocess-heavy tests short.
pytestmark = pytest.mark.parametrize("empty_db_url", ["sqlite"], indirect=True)


def caplens_process(*args, stdin=None, env=None):
    """`python -m app.cli ARGS` in its own process: the entry point exactly as a shell runs it."""
    full_env = {k: v for k, v in os.environ.items() if k != "CAPLENS_PASSWORD"}
    full_env.update({"PYTHONPATH": str(REPO), **(env or {})})
    return subprocess.run([sys.executable, "-m", "app.cli", *args], input=stdin, capture_output=True, text=True,
                          env=full_env, cwd=REPO, timeout=180)


def caplens(*args, stdin=None, env=None):
    """`app.cli.main(ARGS)` in this process with its own standard input, environment (no
    CAPLENS_PASSWORD unless given) and captured streams; the exit status as a process's. The
    same commands as `caplens_process` without 2-3 s of imports each (30 calls here)."""
    from app.cli import main

    saved_env, saved_stdin = dict(os.environ), sys.stdin
    os.environ.pop("CAPLENS_PASSWORD", None)
    os.environ.update(env or {})
    sys.stdin = io.StringIO(stdin or "")
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's refusals
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        sys.stdin = saved_stdin
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def test_user_add_reads_password_from_stdin_or_env_never_argv(db_url):
    # The first two through the real entry point: the password from a pipe and from the environment.
    assert caplens_process("user", "add", "alice", "--role", "researcher", "--password-stdin",
                           stdin="s3cret-pass\n").returncode == 0
    assert caplens_process("user", "add", "bob", "--role", "annotator",
                           env={"CAPLENS_PASSWORD": "env-pass-123"}).returncode == 0
    no_password = caplens("user", "add", "carl", "--role", "annotator", stdin="")
    assert no_password.returncode == 2 and "no password" in no_password.stderr
    bad_role = caplens("user", "add", "dan", "--role", "boss", "--password-stdin", stdin="whatever-123\n")
    assert bad_role.returncode == 2 and "invalid choice" in bad_role.stderr
    again = caplens("user", "add", "alice", "--role", "admin", "--password-stdin", stdin="s3cret-pass\n")
    assert again.returncode == 2 and "already exists" in again.stderr
    with session_scope(get_engine(db_url)) as s:
        assert authenticate(s, "alice", "s3cret-pass").role == "researcher"
        assert authenticate(s, "bob", "env-pass-123").role == "annotator"
        assert s.scalar(select(User).where(User.name == "carl")) is None
    listing = caplens("user", "list")
    assert "alice\tresearcher" in listing.stdout and "bob\tannotator" in listing.stdout


def test_import_export_and_agreement_commands(db_url, tmp_path, make_png):
    (tmp_path / "a.png").write_bytes(make_png())
    (tmp_path / "b.png").write_bytes(make_png((0, 0, 200)))
    rows = [{"image": "a.png", "caption": "red", "caption_id": "r", "annotator": n, "score": s}
            for n, s in (("u1", 0.2), ("u2", 0.3), ("u3", 0.25))]
    rows += [{"image": "b.png", "caption": "blue", "caption_id": "b", "annotator": n, "score": s}
             for n, s in (("u1", 0.9), ("u2", 0.8), ("u3", 1.0))]
    rows.append({"image": "b.png", "caption": "a blue square", "critical_objects": ["blue square"]})
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    imported = caplens("db", "import", str(tmp_path / "r.jsonl"), "--collection", "cli")
    assert imported.returncode == 0, imported.stderr
    counts = json.loads(imported.stdout)["counts"]
    assert counts["ratings"] == 6 and counts["critical_annotations"] == 1
    assert "writing 7/7" in imported.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text("image,caption\nmissing.png,x\na.png,\n")
    rejected = caplens("db", "import", str(bad))
    assert rejected.returncode == 2
    assert "line 2: image 'missing.png' not found next to the manifest (a zip of the manifest and its images" in rejected.stderr and "line 3: caption text is empty" in rejected.stderr
    # A CSV kept apart from its images names their folder with --image-dir
    (tmp_path / "elsewhere").mkdir()
    apart = tmp_path / "elsewhere" / "apart.csv"
    apart.write_text("image,caption\na.png,a red square\nb.png,a blue square\n")
    assert "not found next to the manifest" in caplens("db", "import", str(apart), "--collection", "apart").stderr
    found = caplens("db", "import", str(apart), "--collection", "apart", "--image-dir", str(tmp_path))
    assert found.returncode == 0 and json.loads(found.stdout)["counts"]["captions"] == 2, found.stderr
    missing = caplens("db", "import", str(apart), "--collection", "apart2", "--image-dir", str(tmp_path / "elsewhere"))
    assert "image 'a.png' not found in the image folder (--image-dir)" in missing.stderr
    out = tmp_path / "ratings.parquet"
    exported = caplens("db", "export", "--format", "parquet", "--what", "ratings", "--collection", "cli", str(out))
    assert exported.returncode == 0 and json.loads(exported.stdout)["rows"] == 6 and out.is_file()
    human = caplens("db", "export", "--format", "jsonl", "--what", "finetune-human", str(tmp_path / "h"))
    assert human.returncode == 0 and json.loads(human.stdout)["rows"] == 2
    assert "imported\tannotator  (no login)" in caplens("user", "list").stdout
    agreement = caplens("db", "agreement", "--collection", "cli")
    assert agreement.returncode == 0
    assert json.loads(agreement.stdout)["krippendorff_alpha_interval"] > 0.9
    ordered = caplens("db", "queue-order", "--collection", "cli", "disagreement-first")
    assert ordered.returncode == 0 and "rating queue order disagreement-first" in ordered.stdout
    wrong = caplens("db", "queue-order", "--collection", "cli", "random")
    assert wrong.returncode == 2 and "unknown queue order 'random'" in wrong.stderr
    with session_scope(get_engine(db_url)) as s:
        assert s.scalar(select(Collection.queue_order).where(Collection.name == "cli")) == "disagreement-first"
    denied = caplens("db", "export", "--format", "csv", "--user", "u1", str(tmp_path / "x.csv"))
    assert denied.returncode == 2 and "needs role researcher or admin" in denied.stderr
    unknown = caplens("db", "export", "--format", "csv", "--collection", "nope", str(tmp_path / "y.csv"))
    assert unknown.returncode == 2 and "no collection named 'nope'" in unknown.stderr


def test_empty_database_is_created_through_the_migrations(empty_db_url):
    assert caplens("db", "upgrade").returncode == 0
    assert caplens("db", "downgrade", "base").returncode == 0
    # an empty database is created through the migrations on first use
    assert caplens("user", "list").returncode == 0
    current = caplens("db", "current")
    head = head_revision()
    assert f"revision: {head} (code head: {head})" in current.stdout


def test_user_sessions_lists_and_revokes_an_accounts_logins(db_url):
    from annotation.people.auth_sessions import log_in, session_account

    assert caplens("user", "add", "amy", "--role", "annotator", "--password-stdin",
                   stdin="amy-password-1\n").returncode == 0
    none = caplens("user", "sessions", "amy")
    assert none.returncode == 0 and none.stdout.strip() == "amy has no session that has not expired"
    tokens = [log_in("amy", "amy-password-1", address).token for address in ("10.0.0.1", "10.0.0.2")]
    listed = caplens("user", "sessions", "amy")
    lines = listed.stdout.strip().splitlines()
    assert [line.split("\t")[1:2] + line.split("\t")[3:] for line in lines] == [["from 10.0.0.2", "live"],
                                                                                ["from 10.0.0.1", "live"]]
    revoked = caplens("user", "sessions", "amy", "--revoke")
    assert revoked.returncode == 0 and revoked.stdout.strip().endswith("ended 2 live session(s) of amy")
    assert revoked.stdout.count("\tended") == 2
    for token in tokens:
        with pytest.raises(PermissionError, match="log in again"):
            session_account(token)
    unknown = caplens("user", "sessions", "nobody")
    assert unknown.returncode == 2 and "no user named 'nobody'" in unknown.stderr


def test_a_one_megabyte_csv_field_is_one_line_naming_the_line_not_a_traceback(db_url, tmp_path, make_png):
    (tmp_path / "a.png").write_bytes(make_png())
    path = tmp_path / "big.csv"
    path.write_text("image,caption\na.png,a red square\na.png," + "x" * 1_000_000 + "\n", encoding="utf-8")
    result = caplens("db", "import", str(path), "--collection", "big")
    assert result.returncode == 2 and "Traceback" not in result.stderr and "_csv" not in result.stderr
    assert result.stderr.strip() == ("caplens db: error: line 3: a field is longer than 131,072 characters; "
                                     "a caption may have at most 5,000")


def test_world_study_rates_through_the_queue_and_exports_the_training_set(db_url, tmp_path):
    """`caplens world study`: two train-range scenes, three simulated annotators through the queue,
    the finetune-human set written; a second study into the same collection or with a language the
    world does not speak is refused before anything is written."""
    from scoring.world.sets import rated_rows, split_scenes

    done = caplens("world", "study", str(tmp_path / "set"), "--collection", "sim", "--scenes", "2", "--size", "32")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    rows = [json.loads(line) for line in (tmp_path / "set" / "data.jsonl").read_text().splitlines()]
    expected = {r["caption_id"] for r in rated_rows(split_scenes("train", 2), ("en",))}
    assert report["split"] == "train" and report["scenes"] == 2 and report["captions"] == len(rows) == len(expected)
    assert report["ratings"] == 3 * len(rows) and report["annotators"] == ["sim-annotator-0", "sim-annotator-1", "sim-annotator-2"]
    assert all(r["n_ratings"] == 3 for r in rows) and report["training_set"]["rows"] == len(rows)
    again = caplens("world", "study", str(tmp_path / "set2"), "--collection", "sim", "--scenes", "2")
    assert again.returncode == 2 and "a collection named 'sim' exists already" in again.stderr
    klingon = caplens("world", "study", str(tmp_path / "set3"), "--collection", "sim2", "--langs", "en,tlh")
    assert klingon.returncode == 2 and "a world study takes world languages: en, de" in klingon.stderr
    assert not (tmp_path / "set2").exists() and not (tmp_path / "set3").exists()
    with session_scope(get_engine(db_url)) as s:
        assert s.scalar(select(Collection).where(Collection.name == "sim2")) is None
