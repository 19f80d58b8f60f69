import subprocess
import sys

from app.cli import build_parser


def test_every_subcommand_module_registers():
    parser = build_parser()
    help_text = parser.format_help()
    assert "serve" in help_text


def test_unknown_command_fails():
    proc = subprocess.run([sys.executable, "-m", "app.cli", "no-such-command"], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "invalid choice" in proc.stderr
