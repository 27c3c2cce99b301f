"""The documentation a user reads, for the tests that hold it to the code: the README (the
front door) and the docs site's pages that carry its reference, in reading order."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# The pages whose examples run as written, in the order a reader meets them (the console blocks
# of all of them run in one directory, in this order).
REFERENCE_PAGES = (
    "install.md",
    "library.md",
    "serve.md",
    "proxy.md",
    "federation.md",
    "mcp.md",
    "agent-loop.md",
    "counterexamples.md",
    "policy.md",
    "operations.md",
    "speed.md",
    "development.md",
)


def page(name: str) -> str:
    """One page of the docs site, as written."""
    return (DOCS / name).read_text(encoding="utf-8")


def pages(*names: str) -> str:
    """Several pages, one after the other."""
    return "\n".join(page(name) for name in names)


def every_page() -> dict[str, str]:
    """The README and every page of the docs site, by path from the repository's root."""
    paths = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
    return {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8") for path in paths}


def documented() -> str:
    """The README and the reference pages, in reading order."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return "\n".join((readme, pages(*REFERENCE_PAGES)))


def code_block(name: str, first_line: str) -> str:
    """The code block of page `name` whose first line is `first_line` (`# federation.toml`), as
    written, without its fences."""
    text = page(name)
    for opening in re.finditer(r"^```\w*\n", text, re.MULTILINE):
        body, _, _ = text[opening.end() :].partition("\n```")
        if body.split("\n", 1)[0] == first_line:
            return body + "\n"
    raise AssertionError(f"docs/{name} has no code block beginning {first_line!r}")
