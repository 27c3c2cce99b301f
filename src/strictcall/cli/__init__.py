"""The command line: `strictcall` and its commands (the face: it may import every layer)."""

from strictcall.cli.parser import main

__all__ = ["main"]
