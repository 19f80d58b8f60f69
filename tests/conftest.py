"""Suite-wide settings (no network, a throwaway data directory per run), and the database
fixtures of tests/database_fixtures.py where the database stack is installed (the GPU machine
has only the scoring stack, and its CUDA tests run there with this same conftest)."""
from __future__ import annotations

import importlib.util
import os
import tempfile

# Nothing in the suite may reach a model hub; loading code must work from local files.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ.setdefault("CAPLENS_DATA_DIR", tempfile.mkdtemp(prefix="caplens-test-data-"))
# Gradio's upload cache too: tests that count files in it must not see an earlier run's.
os.environ.setdefault("GRADIO_TEMP_DIR", tempfile.mkdtemp(prefix="caplens-test-gradio-"))

if importlib.util.find_spec("sqlalchemy") is not None:
    pytest_plugins = ["tests.database_fixtures"]
