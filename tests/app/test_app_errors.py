"""What users see when something fails: a short message (with an error id for the unexpected),
never SQL, a traceback or a server path; the log has the details under that id."""
from __future__ import annotations

import logging
import re
import zipfile

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError
from sqlalchemy.exc import OperationalError

from annotation.errors import public_text, user_message

SQL = "SELECT captions.id, captions.text FROM captions WHERE captions.collection_id = ?"


def database_failure() -> OperationalError:
    """A database error the user cannot act on (a busy database has its own retry message,
    tests/db/test_lock_free_reads.py)."""
    return OperationalError(SQL, (7,), Exception("disk I/O error"))


def test_an_unexpected_error_becomes_an_id_and_the_log_has_the_details(caplog):
    with caplog.at_level(logging.ERROR, logger="annotation.errors"):
        shown = user_message(database_failure())
    match = re.fullmatch(r"Something went wrong \(error id ([0-9a-f]{8})\); the server log has the details\.", shown)
    assert match, shown
    [record] = caplog.records
    assert match.group(1) in record.getMessage() and "disk I/O error" in record.getMessage()
    assert record.exc_info and SQL in caplog.text  # the traceback with the statement, for the operator


def test_expected_errors_keep_their_words_without_server_paths(monkeypatch, tmp_path):
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    assert user_message(ValueError("/tmp/gradio/4f1c/upload.zip: not a zip file")) == "upload.zip: not a zip file"
    assert user_message(PermissionError("Wrong user name or password.")) == "Wrong user name or password."
    assert user_message(zipfile.BadZipFile("File is not a zip file")) == "File is not a zip file"
    assert (public_text(f"cannot write {tmp_path / 'data' / 'runs' / 'x.toml'}")
            == "cannot write $CAPLENS_DATA_DIR/runs/x.toml")
    assert public_text("see https://huggingface.co/openai/clip and/or 0/1") == "see https://huggingface.co/openai/clip and/or 0/1"
    # A database error is never "expected", whatever it inherits: its text carries SQL.
    assert "SELECT" not in user_message(database_failure())


@pytest.fixture(scope="module")
def client(server):
    return Client(server.url, verbose=False)


def test_a_handler_hit_by_a_database_error_answers_with_an_id_and_no_sql(server, monkeypatch, caplog):
    import app.api

    def failing(*args, **kwargs):
        raise database_failure()

    from app.session import TOKEN_HEADER

    monkeypatch.setattr(app.api, "rating_screen", failing)
    token = Client(server.url, verbose=False).predict(*server.annotator, api_name="/login")["token"]
    client = Client(server.url, verbose=False, headers={TOKEN_HEADER: token})
    with caplog.at_level(logging.ERROR, logger="annotation.errors"):
        with pytest.raises(AppError, match=r"^Something went wrong \(error id [0-9a-f]{8}\); the server log has the details\.$") as raised:
            client.predict(server.collection, api_name="/next_item")
    shown = str(raised.value)
    match = re.search(r"error id ([0-9a-f]{8})", shown)
    assert match, shown
    assert "SELECT" not in shown and "captions" not in shown and "/" not in shown
    logged = [r for r in caplog.records if match.group(1) in r.getMessage()]
    assert logged and "disk I/O error" in logged[0].getMessage() and SQL in caplog.text


def test_a_wrong_password_is_a_message_not_a_traceback(client, server, capfd):
    capfd.readouterr()
    with pytest.raises(AppError, match=r"^Wrong user name or password\.$"):
        client.predict(server.annotator[0], "not-the-password", api_name="/login")
    assert "Traceback" not in capfd.readouterr().err


def test_metric_statuses_and_the_banner_name_no_server_folder(monkeypatch, tmp_path):
    from app import engine
    from scoring.api import MetricResult

    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    missing = f"checkpoint not found: {tmp_path / 'data' / 'checkpoints' / 'pacs' / 'clip.pth'} (download it)"
    monkeypatch.setattr(engine, "score_items", lambda profile, items, metrics: {
        "PAC-S": MetricResult("PAC-S", [None], missing)})
    monkeypatch.setattr(engine, "get_scorer", lambda profile: object())
    result = engine.AppScorer("tiny").score([], ["PAC-S"])["PAC-S"]
    assert result.unavailable == "checkpoint not found: $CAPLENS_DATA_DIR/checkpoints/pacs/clip.pth (download it)"
    banner = engine._plain("weights under /srv/models/clip/model.bin are unreadable")
    assert "srv" not in banner and "model.bin" in banner.replace("\\", "")
