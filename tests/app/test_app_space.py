"""The Hugging Face Space configuration: front matter, app file, requirements, GPU decorator."""
import re
import tomllib
from pathlib import Path

from app.gpu import gpu

ROOT = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!\[ ;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _front_matter() -> dict[str, str]:
    front = ROOT.joinpath("README.md").read_text(encoding="utf-8").split("---")[1]
    return {key.strip(): value.strip().strip('"') for key, value in
            (line.split(":", 1) for line in front.strip().splitlines())}


def test_readme_front_matter_points_at_the_space_app():
    front = _front_matter()
    assert front["sdk"] == "gradio"
    assert ROOT.joinpath(front["app_file"]).is_file()
    # Spaces default to Python 3.10; the code needs 3.11 (tomllib) and pyproject says so.
    assert front["python_version"] == "3.11"
    assert 0 < len(front["short_description"]) <= 60  # the Hub's limit
    assert front["suggested_hardware"]


def test_space_gradio_is_the_pinned_one_everywhere():
    """The Space's SDK, requirements.txt and pyproject name one Gradio release."""
    front = _front_matter()
    lines = ROOT.joinpath("requirements.txt").read_text().splitlines()
    assert f"gradio=={front['sdk_version']}" in [line.strip() for line in lines]
    project = tomllib.loads(ROOT.joinpath("pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert f"gradio=={front['sdk_version']}" in project["dependencies"]


def test_space_requirements_cover_every_project_dependency_from_pypi():
    project = tomllib.loads(ROOT.joinpath("pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = [line.strip() for line in ROOT.joinpath("requirements.txt").read_text().splitlines()]
    listed = {_name(line) for line in lines if line and not line.startswith("#")}
    assert {_name(dep) for dep in project["dependencies"]} <= listed
    # PyPI only: no URLs, local paths or editable installs.
    assert not [line for line in lines if line.startswith(("-e", ".", "git+", "http", "/", "--"))]


def test_gpu_decorator_is_identity_without_spaces():
    def work(x):
        return x + 1

    try:
        import spaces  # noqa: F401
    except ImportError:
        assert gpu(work) is work
    else:  # on a Space the decorator wraps but the function still answers
        assert gpu(work)(1) == 2
