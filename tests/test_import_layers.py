"""The one-way import rules of docs/architecture.md, checked on the code as it is.

`lint-imports` reads every import statement, those inside functions included, against the
contracts in pyproject.toml. The second test imports each `scoring` module in a fresh
interpreter where the database and Gradio stacks cannot be imported at all, so a module that
needs them (even through a third package) fails here rather than in a notebook.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BLOCKED = ("sqlalchemy", "alembic", "gradio", "annotation", "db", "app")


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def test_import_contracts_hold():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert lint, "import-linter is not installed (it is in the `test` extra)"
    result = subprocess.run([lint, "--no-cache"], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout
    # "No ignored imports": a contract that tolerates exceptions would hide a broken layer.
    assert "ignore_imports" not in (REPO / "pyproject.toml").read_text()


IMPORT_EVERY_SCORING_MODULE = f"""
import importlib, importlib.abc, json, pkgutil, sys

BLOCKED = {BLOCKED!r}

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is blocked: scoring must not need it")
        return None

sys.meta_path.insert(0, Blocked())
import scoring
failures, imported = {{}}, []

def record_package_failure(name):
    failures[name] = repr(sys.exc_info()[1])

for module in pkgutil.walk_packages(scoring.__path__, "scoring.", onerror=record_package_failure):
    try:
        importlib.import_module(module.name)
        imported.append(module.name)
    except Exception as exc:
        failures[module.name] = f"{{type(exc).__name__}}: {{exc}}"
print(json.dumps({{"imported": imported, "failures": failures}}))
"""


def test_scoring_imports_without_database_or_gradio():
    result = subprocess.run([sys.executable, "-c", IMPORT_EVERY_SCORING_MODULE], cwd=REPO, env=_env(),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["failures"] == {}
    # The walk really reached the library, subpackages included.
    for module in ("scoring.api", "scoring.registry", "scoring.perturb.ops", "scoring.analysis.tables",
                   "scoring.world.demo", "scoring.metrics.coco"):
        assert module in report["imported"]
