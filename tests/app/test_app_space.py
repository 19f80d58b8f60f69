"""The Hugging Face Space configuration: front matter, app file, requirements, GPU decorator."""
import re
import tomllib
from pathlib import Path

from app.gpu import gpu

ROOT = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!\[ ;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_readme_front_matter_points_at_the_space_app():
    front = ROOT.joinpath("README.md").read_text(encoding="utf-8").split("---")[1]
    assert re.search(r"^sdk: gradio$", front, re.M)
    app_file = re.search(r"^app_file: (\S+)$", front, re.M).group(1)
    assert ROOT.joinpath(app_file).is_file()


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
