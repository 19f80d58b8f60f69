import argparse
import subprocess
import sys

import pytest

from app.cli import build_parser

# What the README and docs promise, written out by hand: a module that stops registering its
# commands (or a command renamed) fails here. Commands added later need no change.
TOP_LEVEL = {"serve", "score", "score-corpus", "perturb", "world", "analyze", "db", "user", "finetune"}
NESTED = {
    "world": {"show", "sets", "train", "measure", "seed", "study"},
    "analyze": {"reproduce", "fetch", "correlation", "robustness", "specificity", "retrieval", "pascal50s", "foil",
                "length", "load"},
    "db": {"upgrade", "downgrade", "current", "import", "import-scores", "export", "agreement", "perturb",
           "queue-order", "gc"},
    "user": {"add", "passwd", "set-role", "list"},
}


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], str]:
    """Every command path of `parser`, nested ones too, with the help line its parent lists."""
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found[path + (name,)] = listed.get(name)
                found.update(_commands(sub, path + (name,)))
    return found


def test_every_promised_subcommand_is_registered():
    commands = _commands(build_parser())
    assert TOP_LEVEL <= {path[0] for path in commands}
    for parent, children in NESTED.items():
        assert children <= {path[1] for path in commands if len(path) == 2 and path[0] == parent}, parent


@pytest.mark.parametrize("path", sorted(_commands(build_parser())), ids=" ".join)
def test_every_subcommand_answers_help(path, capsys):
    """`caplens <command> [<subcommand>] --help` exits 0 and prints that command's own usage;
    `caplens --help` (or its parent's) lists it with a line saying what it does."""
    help_line = _commands(build_parser())[path]
    assert help_line and help_line.strip(), f"{' '.join(path)} has no help line in its parent's list"
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*path, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: caplens {' '.join(path)}"), out[:200]
    assert "-h, --help" in out


def test_unknown_command_fails():
    proc = subprocess.run([sys.executable, "-m", "app.cli", "no-such-command"], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "invalid choice" in proc.stderr


def test_building_the_command_line_and_a_database_command_load_neither_torch_nor_pandas(tmp_path):
    """`caplens --help`, `caplens user list` and every other database command start in well under
    a second: the recipes, the trainer and the corpus engines load only when a command uses them."""
    probe = ("import sys; from app.cli import main; main(['user', 'list']); "
             "print(sorted(m for m in ('torch', 'pandas', 'gradio', 'transformers') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "CAPLENS_DATA_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_recipe_names_the_command_line_offers_are_the_recipes():
    from scoring.training import RECIPE_NAMES, RECIPES

    assert RECIPE_NAMES == tuple(RECIPES)
    finetune = build_parser()._subparsers._group_actions[0].choices["finetune"]
    recipe = next(a for a in finetune._actions if a.dest == "recipe")
    assert recipe.choices == [*RECIPES, "list", "register"]
