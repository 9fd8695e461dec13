"""The `trainwarden` command line: one module per command group; `main` is the console script."""

from trainwarden.cli.entry import main

__all__ = ["main"]
