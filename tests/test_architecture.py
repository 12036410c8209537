"""The developers' map (docs/develop/architecture.rst) against the code: its floor table names exactly the floors
of ``FLOORS`` (tests/test_floors.py), every module and kernel source has its line, the page names no module,
file or function that does not exist, and a room marked as used by the tests or benchmarks alone is imported by
no module of distprice."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from test_floors import FLOORS, MODULES, PACKAGE, imports

ROOT = PACKAGE.parent
PAGE = ROOT / "docs" / "develop" / "architecture.rst"
KERNELS = ROOT / "kernels"
LITERAL = re.compile(r"``([^`]+)``")
PATH = re.compile(r"[\w.-]+(/[\w.-]+)*(/|\.(py|cu|cuh|rst|md|toml|yaml|json|csv|txt|sh|png))")
"""A literal that names a file or a folder (of the repository, or under ``distprice/``)."""
DOTTED = re.compile(r"[a-z_]+(\.[A-Za-z_]\w*)+")
"""A literal that may name a module of distprice, or a name in one (``job.prepare_job``)."""
ROOM = re.compile(r"\s*- ``([\w/]+\.py)``:")
MARKED = re.compile(r"\((tests|tests and benchmarks) only\)")


def page() -> str:
    return PAGE.read_text()


def floor_table(text: str) -> dict[str, int]:
    """Module -> floor, from the page's ``list-table:: The floors``: each row's first cell is the floor, its
    second the modules, as literals (the cell may run over several lines)."""
    lines = text[text.index(".. list-table:: The floors") :].splitlines()[1:]
    floors: dict[str, int] = {}
    floor, cell = None, 0
    for line in lines:
        if line and not line.startswith(" "):  # the table's end
            break
        row = re.match(r"\s+\* - (.*)", line)
        if row:
            floor, cell = (int(row.group(1)) if row.group(1).strip().isdigit() else None), 1
            continue
        if re.match(r"\s+- ", line):
            cell += 1
        if floor is not None and cell == 2:
            for name in LITERAL.findall(line):
                assert name not in floors, f"{name} is in the floor table twice"
                floors[name] = floor
    return floors


def module_path(name: str) -> Path | None:
    """The file of a module of distprice (``distprice.job``, ``distprice.lattice``), or None."""
    base = ROOT / name.replace(".", "/")
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.exists()), None)


def defined(path: Path) -> set[str]:
    """The names a module defines or imports at its top level."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):  # a lazy module's names
                names.update(e.value for e in getattr(node.value, "elts", ()) if isinstance(e, ast.Constant))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def test_the_floor_table_is_floors():
    assert floor_table(page()) == FLOORS


def test_every_module_and_kernel_has_its_room():
    literals = set(LITERAL.findall(page()))
    rooms = [str(p.relative_to(PACKAGE)) for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts]
    rooms += [f"kernels/{p.name}" for p in sorted(KERNELS.iterdir()) if p.is_file() and p.name != "__init__.py"]
    missing = [room for room in rooms if room not in literals]
    assert not missing, f"docs/develop/architecture.rst has no line for {missing}"


def test_the_page_names_only_what_exists():
    top = {name.split(".")[1] for name in MODULES if name.count(".") >= 1}
    wrong = []
    for literal in set(LITERAL.findall(page())):
        if PATH.fullmatch(literal):
            if not ((ROOT / literal).exists() or (PACKAGE / literal).exists()):
                wrong.append(literal)
        elif DOTTED.fullmatch(literal) and (literal.startswith("distprice.") or literal.split(".")[0] in top):
            parts = (literal if literal.startswith("distprice.") else "distprice." + literal).split(".")
            depth = max(i for i in range(1, len(parts) + 1) if module_path(".".join(parts[:i])))
            if depth < len(parts) and parts[depth] not in defined(module_path(".".join(parts[:depth]))):
                wrong.append(literal)
    assert not wrong, f"docs/develop/architecture.rst names what does not exist: {sorted(wrong)}"


def test_rooms_marked_for_tests_are_imported_by_no_module():
    marked = [
        "distprice." + ROOM.match(line).group(1).removesuffix(".py").replace("/", ".")
        for line in page().splitlines()
        if ROOM.match(line) and MARKED.search(line)
    ]
    assert marked, "no room is marked as used by the tests or benchmarks alone"
    for module in marked:
        assert module in MODULES, f"{module} is marked but is no module"
        importers = [m for m in MODULES if m != module and module in imports(m)]
        assert not importers, f"{module} is marked as tests' or benchmarks' alone, but {importers} import it"


def test_every_package_is_installed():
    """A regular install (``pip install .``, the container images) ships every package of distprice: each
    folder of ``distprice/`` with an ``__init__.py`` is in pyproject.toml's ``packages``."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")}
    assert found - listed == set(), "packages missing from pyproject.toml"
