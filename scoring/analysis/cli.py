"""Subcommands of this package (filled in by its issue)."""


def register(subparsers, parents) -> None:
    """Add this package's subcommands to the `caplens` parser."""
