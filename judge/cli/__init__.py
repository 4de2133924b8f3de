"""The `judge` command line."""

from judge.cli.main import main

__all__ = ["main"]
