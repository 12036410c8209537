"""The documentation: the site builds without a warning, and every code block of the guide (docs/) and of the
README runs as written, so that neither can drift from the code.

A page's code blocks run in page order, in a temporary folder of their own, outside the repository (the configs
that ship with distprice are found by name there, as by a user of the installed package):

- a block named after a file (reST ``:caption: book.csv``, Markdown info string ``csv book.csv``) is written to
  that file; a YAML file, and every YAML file a page includes with ``literalinclude``, must load as a
  distprice config (but for an example of a bad one, named ``broken*.yaml``, which must not);
- ``bash`` blocks run in ``bash -euo pipefail`` with the ``distprice`` command on PATH; a ``text`` block named
  ``output`` right after one lists lines its output must hold, in order (``...`` stands for any text);
- ``python`` blocks run with ``exec`` in one namespace per page, as ``__main__``; ``pycon`` blocks are doctests
  in that namespace;
- a file of ``deploy/`` that a page includes (an nginx site, say) is checked by the deployment tests
  (``tests/test_deploy_*.py``), not run here;
- a few setup commands cannot run inside a test (creating and activating a virtual environment, ``pip
  install``, the test suite itself): they are checked instead (:data:`SETUP`), and the README's install line
  must be the one CI runs.

The README's first block (its front door: the 100 000-instrument R1 portfolio on a local cluster) takes half a
minute to a minute on two cores and runs in a test of its own, marked slow.
"""

from __future__ import annotations

import doctest
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from utils import DEPLOY

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = sorted(p for p in DOCS.rglob("*.rst") if "_build" not in p.parts)
FILE_NAME = re.compile(r"(\w[\w.-]*/)*[\w.-]+\.(csv|yaml|yml|txt|json)")
"""A block's name that is a file (in the page's folder, or a folder below it)."""
SHELL, PYTHON, DOCTEST, YAML = ("bash", "sh", "shell"), ("python", "py"), ("pycon",), ("yaml", "yml")
OUTPUT = "output"
BLOCK_SECONDS = 300


@dataclass(frozen=True)
class Block:
    """One code block of a page: its language, its name (a file name, ``output``, or empty), its text, the
    line it starts on and, for an included file, its path."""

    language: str
    name: str
    text: str
    line: int
    source: Path | None = None

    def __str__(self) -> str:
        return f"line {self.line} ({self.language}{' ' + self.name if self.name else ''})"


def rst_blocks(path: Path) -> list[Block]:
    """The code blocks of a reST page: ``code-block`` directives (their ``:caption:`` is the name) and
    ``literalinclude`` directives (the included file's text, named after it)."""
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        line = lines[i]
        directive = re.match(r"(\s*)\.\. (code-block|code|sourcecode|literalinclude)::\s*(\S*)", line)
        if not directive:
            literal = line.rstrip().endswith("::") and not line.lstrip().startswith("..")
            assert not literal, f"{path.name} line {i + 1}: a literal block (::); use a code-block with a language"
            i += 1
            continue
        indent, kind, argument = directive.groups()
        options, i = {}, i + 1
        while i < len(lines) and re.match(rf"{indent}\s+:([\w-]+):", lines[i]):
            key, _, value = lines[i].strip()[1:].partition(":")
            options[key], i = value.strip(), i + 1
        if kind == "literalinclude":
            source = (path.parent / argument).resolve()
            language = options.get("language", source.suffix.lstrip("."))
            blocks.append(Block(language, source.name, source.read_text(), i, source))
            continue
        body, start = [], i + 1
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(indent)):
            body.append(lines[i])
            i += 1
        text = "\n".join(body).strip("\n")
        depth = min(len(b) - len(b.lstrip()) for b in body if b.strip())
        text = "\n".join(b[depth:] for b in text.splitlines()) + "\n"
        blocks.append(Block(argument, options.get("caption", ""), text, start))
    return blocks


def markdown_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page; the info string's second word is the name."""
    blocks, fence = [], None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if fence is None and line.startswith("```"):
            words = line[3:].split()
            fence, body, start = (words + ["", ""])[:2], [], number + 1
        elif fence is not None and line.startswith("```"):
            blocks.append(Block(fence[0], fence[1], "\n".join(body) + "\n", start))
            fence = None
        elif fence is not None:
            body.append(line)
    return blocks


def blocks_of(path: Path) -> list[Block]:
    return markdown_blocks(path) if path.suffix == ".md" else rst_blocks(path)


# ---- setup commands: checked, not run ----

PYPROJECT = (ROOT / "pyproject.toml").read_text()


def _extras() -> set[str]:
    """The extras pyproject.toml declares (``name = [`` lines of its optional-dependencies table)."""
    table = PYPROJECT.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([\w-]+)\s*=\s*\[", table, flags=re.MULTILINE))


def check_pip(words: list[str]) -> None:
    """``pip install [-e] .[extra,...]``: this checkout, with extras pyproject.toml declares."""
    targets = [w for w in words[2:] if not w.startswith("-")]
    assert len(targets) == 1, f"pip install of one target, not {targets}"
    match = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", targets[0])
    assert match, f"pip install of this checkout ('.' or '.[extras]'), not {targets[0]!r}"
    unknown = set((match.group(1) or "").split(",")) - {""} - _extras()
    assert not unknown, f"pip install names extras pyproject.toml lacks: {sorted(unknown)}"


def check_tests(words: list[str]) -> None:
    """``python -m pytest ...``: the command CI runs (``.ci/run``), with markers pyproject.toml declares."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"python3? -m pytest -q\b", ci), "CI no longer runs python -m pytest -q"
    assert words[1:4] == ["-m", "pytest", "-q"], f"the tests run as CI runs them, not {shlex.join(words)}"
    for option, value in zip(words[4:], words[5:]):
        if option == "-m":
            assert f'"{value}:' in PYPROJECT, f"pyproject.toml declares no pytest marker {value!r}"


def check_activate(words: list[str]) -> None:
    """``. DIR/bin/activate``: only a virtual environment is sourced."""
    assert len(words) == 2 and words[1].endswith("/bin/activate"), f"sources {shlex.join(words)}"


SETUP = {
    ("python", "-m", "venv"): lambda words: None,
    ("python3", "-m", "venv"): lambda words: None,
    (".",): check_activate,
    ("source",): check_activate,
    ("pip", "install"): check_pip,
    ("python", "-m", "pip"): lambda words: check_pip(words[2:]),
    ("python3", "-m", "pip"): lambda words: check_pip(words[2:]),
    ("python", "-m", "pytest"): check_tests,
    ("python3", "-m", "pytest"): check_tests,
}
"""Commands a test cannot run (they install, or would run the test suite from inside it), by their first words,
and the check each gets instead."""


def setup_check(command: str):
    """The check of a setup command (a callable taking its words), or None for a command that runs."""
    words = shlex.split(command)
    return next((check for prefix, check in SETUP.items() if tuple(words[: len(prefix)]) == prefix), None)


def shell_commands(text: str) -> list[str]:
    """The commands of a bash block, one per line (continuations joined, comments dropped), with its setup
    commands checked and replaced by ``true``."""
    commands = []
    for line in re.sub(r"\\\n\s*", " ", text).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = []
        for command in line.split(" && "):
            check = setup_check(command.strip())
            if check is not None:
                check(shlex.split(command))
            parts.append(command if check is None else "true")
        commands.append(" && ".join(parts))
    return commands


SHELL_SYNTAX = re.compile(r"[|;&<>$`()]")


def run_shell(text: str, folder: Path, label: str) -> str:
    """Runs a bash block in ``folder``; returns its output (stdout and stderr). A block of plain ``distprice``
    commands runs them in this process, through click's test runner (as the installed command would, without
    starting Python and importing numba again for each); any other block runs in bash."""
    commands = [c for c in shell_commands(text) if c != "true"]
    if all(c.startswith("distprice ") and not SHELL_SYNTAX.search(c) for c in commands):
        from click.testing import CliRunner

        from distprice.cli import main

        output = ""
        for command in commands:
            done = CliRunner().invoke(main, shlex.split(command)[1:], prog_name="distprice")
            output += done.output
            if done.exit_code != 0:
                error = "".join(traceback.format_exception(done.exception)) if done.exc_info else ""
                pytest.fail(f"{label}: {command} exited {done.exit_code}:\n{output}{error}")
        return output
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", "\n".join(shell_commands(text))],
        cwd=folder,
        env=shell_env(folder),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=BLOCK_SECONDS,
    )
    output = done.stdout
    assert done.returncode == 0, f"{label} exited {done.returncode}:\n{text}\n{output}"
    return output


# ---- running a page ----


COMPILED = r", compiled in \d+\.\d\d s \(numba, once\)"
"""The note a summary line ends its engines with on a job's first run (:class:`distprice.job.Summary`)."""


def expect_output(expected: str, output: str, where: str) -> None:
    """Each line of ``expected`` matches a line of ``output``, in order; ``...`` stands for any text. The pages
    show a run whose kernels were compiled before: a summary's note of a first run's compilation is left out."""
    lines = [re.sub(COMPILED, "", line.rstrip()) for line in output.splitlines()]
    at = 0
    for wanted in (w.rstrip() for w in expected.splitlines() if w.strip()):
        pattern = ".*".join(re.escape(part) for part in wanted.split("..."))
        found = next((i for i in range(at, len(lines)) if re.fullmatch(pattern, lines[i])), None)
        assert found is not None, f"{where}: no line matching {wanted!r} in the output:\n{output}"
        at = found + 1


def shell_env(folder: Path) -> dict[str, str]:
    """The environment of the shell blocks: ``distprice`` on PATH, tuning files kept in ``folder``."""
    scripts = sysconfig.get_path("scripts")
    path = os.pathsep.join([scripts, os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    return {
        **os.environ,
        "PATH": path,
        "DISTPRICE_CONFIG_DIR": str(folder / ".distprice"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }


def check_config(path: Path, where: str) -> None:
    """A YAML file of the docs is a distprice config that loads, unless its name says it is broken
    (``broken*.yaml``, an example of a bad config): that one must not load."""
    from distprice.cluster.config import load_config
    from distprice.errors import ConfigError

    sections = yaml.safe_load(path.read_text())
    assert isinstance(sections, dict) and {"cluster", "job"} & set(sections), (
        f"{where}: a YAML block that is no distprice config (no cluster or job section)"
    )
    if path.name.startswith("broken"):
        with pytest.raises(ConfigError):
            load_config(path)
    else:
        load_config(path)


def run_blocks(blocks: list[Block], folder: Path, where: str) -> None:
    """Runs a page's blocks in ``folder`` (the working directory), one after the other."""
    namespace = {"__name__": "__main__"}
    last_output = None
    for block in blocks:
        label = f"{where} {block}"
        if block.name == OUTPUT:
            assert last_output is not None, f"{label}: an output block follows no shell block"
            expect_output(block.text, last_output, label)
            last_output = None
            continue
        last_output = None
        if block.source is not None and DEPLOY in block.source.parents:
            continue  # checked by tests/test_deploy_*.py
        if FILE_NAME.fullmatch(block.name):
            target = block.source or folder / block.name  # an included repository file is read where it is
            if block.source is None:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.text)
            if block.language in YAML:
                check_config(target, label)
        elif block.language in SHELL:
            last_output = run_shell(block.text, folder, label)
        elif block.language in PYTHON:
            exec(compile(block.text, label, "exec"), namespace)
        elif block.language in DOCTEST:
            test = doctest.DocTestParser().get_doctest(block.text, namespace, label, where, block.line)
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
            report = []
            runner.run(test, out=report.append, clear_globs=False)
            namespace.update(test.globs)  # a doctest works on a copy of the page's namespace
            assert not runner.failures, f"{label}:\n{''.join(report)}"
        elif block.language in YAML:
            path = folder / "block.yaml"
            path.write_text(block.text)
            check_config(path, label)
        else:
            pytest.fail(
                f"{label}: a code block the example test cannot run (name it after a file, 'output', "
                f"or use bash, python, pycon or yaml)"
            )


def page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_guide_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DISTPRICE_CONFIG_DIR", str(tmp_path / ".distprice"))
    run_blocks(blocks_of(page), tmp_path, page_id(page))


def test_readme_examples_run(tmp_path, monkeypatch):
    """Every block of the README but its front door (:func:`test_readme_front_door`)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DISTPRICE_CONFIG_DIR", str(tmp_path / ".distprice"))
    run_blocks(blocks_of(README)[1:], tmp_path, "README.md")


@pytest.mark.slow
def test_readme_front_door(tmp_path):
    """The README's first command: set up (checked against CI's install line) and price the papers' R1
    portfolio on a local Dask cluster."""
    front = blocks_of(README)[0]
    assert front.language == "bash"
    install = re.search(r"pip install [^&\n]+", (ROOT / ".ci" / "run").read_text()).group(0)
    assert install.replace("--quiet --disable-pip-version-check ", "") in front.text, "the README installs as CI does"
    run_blocks([front], tmp_path, "README.md front door")
    import pandas as pd

    priced = pd.read_parquet(tmp_path / "priced.parquet")
    assert len(priced) == 100_000 and priced["error"].isna().all()


def test_pages_name_nothing_outside_the_repository():
    """A reader has the repository only: no page points outside it."""
    for path in [README, *PAGES]:
        text = path.read_text()
        for banned in ("../shared", "SPEC"):
            assert banned not in text, f"{page_id(path)} names {banned!r}"


def test_readme_links_resolve():
    for target in re.findall(r"\]\(([^)#\s]+)", README.read_text()):
        if "://" not in target:
            assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


def test_site_builds_without_warnings(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("sphinx_click")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            "-d",
            str(tmp_path / "doctrees"),
            str(DOCS),
            str(tmp_path / "html"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    cli = (tmp_path / "html" / "reference" / "cli.html").read_text()
    import click

    from distprice.cli import main

    def paths(group, prefix):
        for name, command in group.commands.items():
            yield f"{prefix}-{name}"
            if isinstance(command, click.Group):
                yield from paths(command, f"{prefix}-{name}")

    for anchor in paths(main, "distprice"):  # every command of the CLI has its section
        assert f'id="{anchor}"' in cli, f"the CLI reference lacks {anchor.replace('-', ' ', 1)}"
