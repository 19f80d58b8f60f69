"""What a user is told when something fails, in one place.

Errors the libraries raise for users (`PermissionError`, `ValueError`, `LookupError`,
`OSError`, a bad zip) keep their message, with server paths reduced to names a user knows. Anything
else (a database error, a bug) becomes "Something went wrong (error id …)"; the full
traceback goes to the log under that id, so an operator can find it from what the user saw.
Database errors never show their text: it carries SQL. A database that stayed busy past the
busy timeout (a long import's publishing step, another writer) gives `BUSY_MESSAGE`: nothing
was saved, and trying again in a moment works.
"""
from __future__ import annotations

import logging
import re
import secrets
import zipfile

from sqlalchemy.exc import SQLAlchemyError

from db.session import DatabaseBusy, is_busy
from scoring.paths import data_dir

LOG = logging.getLogger(__name__)

BUSY_MESSAGE = "The database is busy right now (an import is being saved); nothing was changed. Try again in a few seconds."

EXPECTED = (PermissionError, ValueError, LookupError, OSError, zipfile.BadZipFile)

# An absolute path of two or more parts (not part of a URL, a word or a relative path).
_SERVER_PATH = re.compile(r"(?<![\w$:/.~])/(?:[\w.+-]+/)+([\w.+-]+)")


def public_text(text: str) -> str:
    """`text` with server paths replaced: the data directory by `$CAPLENS_DATA_DIR`, any other
    absolute path by its last part (the file name a user uploaded or knows)."""
    text = text.replace(str(data_dir()), "$CAPLENS_DATA_DIR")
    return _SERVER_PATH.sub(r"\1", text)


def is_expected(exc: BaseException) -> bool:
    """Whether `exc` is one of the errors whose message is written for users."""
    return isinstance(exc, EXPECTED) and not isinstance(exc, SQLAlchemyError)


def user_message(exc: BaseException) -> str:
    """The message a user sees for `exc`. An unexpected error is logged here, with its
    traceback, under the error id the message gives."""
    if is_expected(exc):
        return public_text(str(exc).strip()) or type(exc).__name__
    if isinstance(exc, (SQLAlchemyError, DatabaseBusy)) and is_busy(exc):
        LOG.warning("database busy: %s: %s", type(exc).__name__, exc)
        return BUSY_MESSAGE
    error_id = secrets.token_hex(4)
    LOG.error("error id %s: %s: %s", error_id, type(exc).__name__, exc, exc_info=exc)
    return f"Something went wrong (error id {error_id}); the server log has the details."
