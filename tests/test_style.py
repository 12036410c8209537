"""House style that ruff does not check: no backslash line continuations (a bracket continues a line instead).

Lines over 120 columns are ruff's E501 (``ruff check``), run by .ci/run beside the tests."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("distprice", "kernels", "tests", "benchmarks", "docs")
"""The folders whose Python files are checked."""

pytestmark = pytest.mark.style


def python_files() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def backslash_continuations(source: str) -> list[int]:
    """The lines (1-based) of ``source`` that end in a backslash joining them to the next line: where two tokens
    in a row lie on different lines with no NEWLINE or NL token between them, and the first one's line ends in
    ``\\``. A backslash ending a line inside a string or a comment is not one."""
    lines = source.splitlines()
    if not any(line.endswith("\\") for line in lines):  # most files: nothing to tokenize
        return []
    found = []
    previous = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if (
            previous is not None
            and previous.type not in (tokenize.NEWLINE, tokenize.NL)
            and token.start[0] > previous.end[0]
        ):
            row = previous.end[0]
            if row <= len(lines) and lines[row - 1].endswith("\\"):
                found.append(row)
        previous = token
    return found


def test_no_backslash_continuations():
    found = []
    for path in python_files():
        try:
            rows = backslash_continuations(path.read_text(encoding="utf-8"))
        except (SyntaxError, tokenize.TokenError) as error:  # a file being edited: its line is the finding
            found.append(f"{path.relative_to(ROOT)}: cannot be tokenized ({error})")
            continue
        found += [f"{path.relative_to(ROOT)}:{row}" for row in rows]
    assert not found, "backslash line continuations (continue the line inside brackets):\n  " + "\n  ".join(found)


def test_the_finder_sees_continuations_only():
    source = (
        "x = 1 + \\\n"
        "    2\n"
        "if x and \\\n"
        "        x:\n"
        '    y = "a \\\n'
        'b"  # a string going on: not a continuation\n'
        '    z = """\\\n'
        '"""  # nor here \\\n'
        "w = (1 +\n"
        "     2)\n"
        'v = f"{x}" \\\n'
        '    "s"\n'
    )
    assert backslash_continuations(source) == [1, 3, 11]
    assert python_files() and all(p.suffix == ".py" for p in python_files())
