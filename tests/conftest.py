"""Suite-wide settings (no network, a throwaway data directory per run), and the database
fixtures of tests/database_fixtures.py where the database stack is installed (the GPU machine
has only the scoring stack, and its CUDA tests run there with this same conftest)."""
from __future__ import annotations

import importlib.util
import os
import tempfile

import pytest

# Nothing in the suite may reach a model hub; loading code must work from local files.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ.setdefault("CAPLENS_DATA_DIR", tempfile.mkdtemp(prefix="caplens-test-data-"))
# Gradio's upload cache too: tests that count files in it must not see an earlier run's.
os.environ.setdefault("GRADIO_TEMP_DIR", tempfile.mkdtemp(prefix="caplens-test-gradio-"))
# Under pytest-xdist each worker inherits the controller's folders; a worker of its own keeps
# two session servers from sharing one SQLite file and one upload cache.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for name in ("CAPLENS_DATA_DIR", "GRADIO_TEMP_DIR"):
        os.environ[name] = os.path.join(os.environ[name], os.environ["PYTEST_XDIST_WORKER"])
        os.makedirs(os.environ[name], exist_ok=True)

# Property tests: how fast inputs are drawn is the machine's load (2 shared cores, two workers),
# not the property's; a slow draw failed a health check under load. Explicit @settings still win.
if importlib.util.find_spec("hypothesis") is not None:
    from hypothesis import HealthCheck, settings

    settings.register_profile("caplens", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("caplens")

pytest_plugins = []
if importlib.util.find_spec("sqlalchemy") is not None:
    pytest_plugins.append("tests.database_fixtures")
if importlib.util.find_spec("xdist") is not None:
    pytest_plugins.append("tests.xdist_scheduling")


def _module_rank(item) -> int:
    """0: the Space's install and boot, 1: a module that drives the browser, 2: one with a test
    marked slow (Ray clusters), 3: the rest. Under xdist the Space and the browser group start
    at once, on a worker each, and the Ray tests follow the Space on its worker: started beside
    the Space's pip install, Ray's two-actor test took 157 s against 27 s alone."""
    if item.get_closest_marker("space_boot"):
        return 0
    return 1 if item.get_closest_marker("browser") else 2 if item.get_closest_marker("slow") else 3


def pytest_collection_modifyitems(config, items):
    """Longest modules first, each module's tests kept together and in order, so that under
    pytest-xdist the long ones start at once instead of ending the run alone on one worker. A
    browser test must live in a module named *browser*: that name puts it in the one browser
    group of tests/xdist_scheduling.py."""
    # Imported here, after pytest_plugins registered the module: a top-level import came first
    # and pytest warned on every run that it could not rewrite the module's asserts.
    from tests.xdist_scheduling import BROWSER_GROUP, scope_of

    rank: dict[str, int] = {}
    for item in items:
        rank[item.module.__name__] = min(rank.get(item.module.__name__, 3), _module_rank(item))
        if item.get_closest_marker("browser") and scope_of(item.nodeid) != BROWSER_GROUP:
            raise pytest.UsageError(f"{item.nodeid} drives the browser: move it to a module whose name says "
                                    "'browser', so that browser tests run one module at a time")
    items.sort(key=lambda item: rank[item.module.__name__])
