"""The examples run exactly as their docstrings say, from a checkout whose .venv is the one
`make install` makes (here: this interpreter's), and the README points to them the same way."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from doc_pages import documented

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
RUNNABLE = [path for path in EXAMPLES if '__name__ == "__main__"' in path.read_text()]


def run_lines(path: Path) -> list[str]:
    """The indented command lines of the docstring's "Run it" paragraph (without flags)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return [
        line.strip()
        for line in doc.splitlines()
        if line.startswith("    ") and "examples/" in line and "--" not in line
    ]


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda path: path.name)
def test_an_examples_docstring_says_to_run_it_with_the_virtualenvs_python(path: Path) -> None:
    lines = run_lines(path)
    assert lines == [f".venv/bin/python examples/{path.name}"]


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda path: path.name)
def test_an_example_runs_as_its_docstring_says_in_a_fresh_checkout(
    path: Path, tmp_path: Path
) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent, target_is_directory=True)
    (command,) = run_lines(path)
    # a PATH without this virtualenv: what the command names is what runs
    path_dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if ".venv" not in d]
    done = subprocess.run(
        ["sh", "-c", command],
        cwd=tmp_path,
        env={**os.environ, "PATH": os.pathsep.join(path_dirs)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def test_the_readme_names_the_extras_the_agent_loops_need() -> None:
    readme = documented()
    for name, extra in (("agent_loop_openai", "openai"), ("agent_loop_anthropic", "anthropic")):
        assert f".venv/bin/python examples/{name}.py" in readme
        doc = ast.get_docstring(ast.parse((ROOT / "examples" / f"{name}.py").read_text()))
        assert doc is not None and re.search(rf"strictcall\[{extra}\]", doc)
