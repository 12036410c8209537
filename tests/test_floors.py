"""The house's one-way floors: every module imports only from its own floor or below, never in a circle, and
only ``distprice.cluster`` imports dask or distributed. Imports inside functions count too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "distprice"

FLOORS = {
    "distprice.errors": 0,
    "distprice.choices": 1,
    "distprice.compiling": 1,
    "distprice.precision": 1,
    "distprice.tables": 1,
    "distprice.join": 1,
    "distprice.curves": 1,
    "distprice.compounding": 1,
    "distprice.bootstrap": 1,
    "distprice.curve_quotes": 1,
    "distprice.scenarios": 1,
    "distprice.priced": 1,
    "distprice.dates": 1,
    "distprice.progress": 1,
    "distprice.stopwatch": 1,
    "distprice.cuda": 1,
    "distprice.lattice": 2,
    "distprice.montecarlo": 2,
    "distprice.models": 2,
    "distprice.inspector": 3,
    "distprice.tuning": 3,
    "distprice.planner": 3,
    "distprice.execute": 4,
    "distprice.job": 4,
    "distprice.timing": 4,
    "distprice.families": 4,
    "distprice.bench": 4,
    "distprice.cluster": 5,
    "distprice.report": 6,
    "distprice.api": 7,
    "distprice.cli": 7,
    "distprice": 7,
}
"""Floor of each module or package (a module takes the floor of its longest listed prefix)."""
FAMILIES = ("distprice.lattice", "distprice.montecarlo", "distprice.models")
DASK = ("dask", "distributed", "dask_jobqueue")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def floor(module: str) -> int:
    prefix = max((name for name in FLOORS if module == name or module.startswith(name + ".")), key=len)
    return FLOORS[prefix]


def family(module: str) -> str | None:
    return next((f for f in FAMILIES if module == f or module.startswith(f + ".")), None)


def imports(module: str, source: str | None = None) -> set[str]:
    """Every module ``module`` imports (absolute names; a ``from package import name`` of a submodule names
    the submodule), from its file or from ``source``."""
    path = MODULES.get(module)
    package = module if path is not None and path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source if source is not None else path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return found


def test_every_module_has_a_floor():
    assert "distprice.errors" in MODULES and len(MODULES) > 20
    for module in MODULES:
        floor(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_or_stay_on_the_floor(module):
    for target in imports(module):
        if target.split(".")[0] in DASK:
            assert module.startswith("distprice.cluster"), f"{module} imports {target}: only distprice.cluster may"
        if not target.startswith("distprice"):
            continue
        assert floor(target) <= floor(module), (
            f"{module} (floor {floor(module)}) imports {target} (floor {floor(target)})"
        )
        if family(module) and family(target):
            assert family(module) == family(target), f"{module} imports another family's {target}"


def test_no_import_cycles():
    graph = {m: {t for t in imports(m) if t in MODULES and t != m} for m in MODULES}
    state: dict[str, int] = {}

    def visit(module, path):
        state[module] = 1
        for target in graph[module]:
            if state.get(target) == 1:
                cycle = path[path.index(target) :] + [target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target, path + [target])
        state[module] = 2

    for module in graph:
        if module not in state:
            visit(module, [module])


def test_the_walker_resolves_relative_imports():
    """An upward import written relatively (a lattice module importing the job layer) is seen as such."""
    targets = imports("distprice.lattice.fake", "from ..job import Job\nfrom . import cpu\nimport dask\n")
    assert targets == {"distprice.job", "distprice.lattice.cpu", "dask"}
    assert floor("distprice.job") > floor("distprice.lattice.fake")
