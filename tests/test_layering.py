"""The import rules, read from the source (no module is imported): the engine never imports the dashboard
or the benchmarks (the CLI's lazy hand-off to them is the one allowed place), the dashboard and the
benchmarks never import each other (what both use lives in the engine, below both), no module imports
itself back through a chain of module-level imports, and the config's modules not even through an import
inside a function."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("zerolock_core", "app", "benchmarks", "theory")
# the one place the engine reaches the dashboard and the benchmarks: inside the functions that register them
ALLOWED = {("zerolock_core.cli", "app"), ("zerolock_core.cli", "benchmarks")}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def imported(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules (and `from m import name` candidates m.name) an import statement names, absolute."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        package = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
        base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    return [base, *(f"{base}.{a.name}" for a in node.names)]


def module_level_imports(module: str) -> set[str]:
    """What `module` imports when it is imported: its top-level statements (under if / try too), not
    the imports inside functions, nor those under `if TYPE_CHECKING:`."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.update(imported(module, node))
            for block in ("body", "orelse", "finalbody"):
                if isinstance(node, (ast.If, ast.Try)):
                    visit(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                visit(handler.body)

    visit(ast.parse(MODULES[module].read_text()).body)
    return {m for m in found if m in MODULES and m != module}


def runtime_imports(module: str) -> set[str]:
    """What `module` may import while it runs: every import statement, inside functions too, but not
    those under `if TYPE_CHECKING:` (they never run)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update(imported(module, node))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(MODULES[module].read_text()))
    return {m for m in found if m in MODULES and m != module}


def every_import(module: str) -> list[tuple[str, int]]:
    tree = ast.parse(MODULES[module].read_text())
    return [(name, node.lineno) for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
            for name in imported(module, node)]


def import_cycles(imports: Callable[[str], set[str]] | None = None) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), module-level imports unless
    told otherwise."""
    graph = {m: sorted((imports or module_level_imports)(m)) for m in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                cycles.append(sorted([v, *component]))

    for v in graph:
        if v not in index:
            visit(v)
    return cycles


def test_the_import_graph_sees_every_package_and_relative_imports():
    assert {m.split(".")[0] for m in MODULES} == set(PACKAGES)
    assert "zerolock_core.config.run_config" in module_level_imports("zerolock_core.cli")  # `from .config import ...`
    assert "zerolock_core.train.threads" in module_level_imports("zerolock_core.runtime.stage_process")  # `from ..threads`


@pytest.mark.parametrize("outside", ["app", "benchmarks"])
def test_the_engine_never_imports_the_dashboard_or_the_benchmarks(outside):
    offending = [f"{m}:{line} imports {name}" for m in MODULES if m.startswith("zerolock_core")
                 for name, line in every_import(m) if name.split(".")[0] == outside and (m, outside) not in ALLOWED]
    assert offending == []


@pytest.mark.parametrize("importer, imported_package", [("app", "benchmarks"), ("benchmarks", "app")])
def test_the_dashboard_and_the_benchmarks_never_import_each_other(importer, imported_package):
    """Every import, inside functions too."""
    offending = [f"{m}:{line} imports {name}" for m in MODULES if m.split(".")[0] == importer
                 for name, line in every_import(m) if name.split(".")[0] == imported_package]
    assert offending == []


def test_an_import_inside_a_function_is_seen(monkeypatch, tmp_path):
    """What the rules read: a lazy `from benchmarks.x import y` in an app function is an import of benchmarks."""
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def f():\n    from benchmarks.common.prediction import predict\n    return predict\n")
    monkeypatch.setitem(MODULES, "app.lazy", lazy)
    assert ("benchmarks.common.prediction", 2) in every_import("app.lazy")


def test_the_clis_hand_off_to_the_dashboard_and_benchmarks_is_lazy():
    """`zerolock --help` must not import them: the CLI names them only inside functions."""
    assert not {m for m in module_level_imports("zerolock_core.cli") if m.split(".")[0] in ("app", "benchmarks")}


def test_no_module_imports_itself_back():
    assert import_cycles() == []


def test_a_cycle_is_found_when_there_is_one(monkeypatch):
    """The cycle finder itself: two modules importing each other at module level are reported."""
    fake = {"zerolock_core.a": {"zerolock_core.b"}, "zerolock_core.b": {"zerolock_core.a"}, "zerolock_core.c": set()}
    monkeypatch.setitem(globals(), "MODULES", dict.fromkeys(fake, Path("unused")))
    monkeypatch.setitem(globals(), "module_level_imports", lambda m: fake[m])
    assert import_cycles() == [["zerolock_core.a", "zerolock_core.b"]]


def test_no_import_circle_exists_not_even_through_an_import_inside_a_function():
    """Among every module of the engine, the dashboard and the benchmarks, lazy imports included (an
    import inside a function hides a cycle from the module-level check: config.validate once imported
    preflight, which imports config)."""
    assert import_cycles(runtime_imports) == []


def test_an_import_inside_a_function_closes_a_cycle(tmp_path, monkeypatch):
    """The finder itself, on source: a module importing another inside a function, the other importing it
    at the top, is a cycle; the same import under `if TYPE_CHECKING:` is none."""
    def write(name: str, text: str) -> Path:
        (tmp_path / name).write_text(text)
        return tmp_path / name

    checks = write("checks.py", "from .settings import RunConfig\n")
    lazy = write("lazy.py", "def validate(cfg):\n    from . import checks\n    return checks\n")
    typing_only = write("typing_only.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                          "    from .checks import Field\n")
    for settings, cycles in [(lazy, [["zerolock_core.room.checks", "zerolock_core.room.settings"]]), (typing_only, [])]:
        monkeypatch.setitem(globals(), "MODULES", {"zerolock_core.room.settings": settings,
                                                   "zerolock_core.room.checks": checks})
        assert import_cycles() == []  # no module-level cycle either way
        assert import_cycles(runtime_imports) == cycles


# The engine's rooms, bottom up: a module may import (lazily too) its own room, any room of a lower
# level, and a leaf (a module that imports nothing of the engine: the vocabularies, balance's DP, the
# atomic file writes, the thread policy). The folder list is the map; this order is its reading.
ROOM_LEVELS: tuple[frozenset[str], ...] = tuple(frozenset(level.split()) for level in (
    "schedule viz",  # schedules as data and their simulator; what every view shares
    "config",  # the run's settings: nothing above it, not even lazily
    "data",
    "models",  # presets, loading; the tiny model is pretrained on data/'s corpus
    "rundir method",
    "telemetry",
    "train",  # a chunk's training, the run's set-up, preflight and measured costs
    "runtime analysis export",  # the pipeline's processes; studies; what a run gives back
    "jobs",  # the lifecycle over both runtimes: runtime/ never imports jobs/
    "cli",  # the entry points at the root
))
ENTRY_POINTS = {"zerolock_core", "zerolock_core.__main__", "zerolock_core.cli"}
MAX_ROOT_MODULES = 12


def engine_room(module: str) -> str:
    """The room of an engine module: its subpackage, or the module's own name at the root."""
    return "cli" if module in ENTRY_POINTS else module.split(".")[1]


def is_leaf(module: str) -> bool:
    return not any(m.startswith("zerolock_core") for m in runtime_imports(module))


def level_of(room: str) -> int | None:
    return next((i for i, level in enumerate(ROOM_LEVELS) if room in level), None)


def engine_modules() -> list[str]:
    return [m for m in MODULES if m.split(".")[0] == "zerolock_core"]


def test_every_room_of_the_engine_has_a_level_or_is_a_leaf():
    unplaced = sorted({engine_room(m) for m in engine_modules()
                       if level_of(engine_room(m)) is None and not is_leaf(m)})
    assert unplaced == []


def test_the_engines_root_holds_the_entry_points_and_a_few_leaves():
    root = [m for m in engine_modules() if m.count(".") == 1 and MODULES[m].name != "__init__.py"]
    assert len(root) <= MAX_ROOT_MODULES, root
    assert [m for m in root if m not in ENTRY_POINTS and not is_leaf(m)] == []


def test_every_room_says_what_lives_there():
    rooms = sorted({p.parent for p in (ROOT / "zerolock_core").rglob("*.py")} - {ROOT / "zerolock_core"})
    silent = [str(r.relative_to(ROOT)) for r in rooms if not ast.get_docstring(ast.parse((r / "__init__.py").read_text()))]
    assert silent == []


def test_no_room_imports_a_room_above_it_not_even_lazily():
    offending = []
    for m in engine_modules():
        here = level_of(engine_room(m))
        for target in runtime_imports(m):
            if target.split(".")[0] != "zerolock_core" or engine_room(target) == engine_room(m) or is_leaf(target):
                continue
            there = level_of(engine_room(target))
            if here is None or there is None or there >= here:
                offending.append(f"{m} ({engine_room(m)}) imports {target} ({engine_room(target)})")
    assert offending == []


@pytest.mark.parametrize("importer, imported_room", [("config", room) for room in
                                                     ("rundir", "method", "train", "runtime", "jobs", "data", "models")]
                         + [("runtime", "jobs"), ("train", "jobs"), ("train", "runtime"), ("method", "train")])
def test_the_rooms_rules_named_in_the_issue(importer, imported_room):
    """The rules a newcomer reads first, spelled out: config/ imports nothing else of the engine but leaves;
    runtime/ never imports jobs/; a chunk's training knows nothing of the processes that run it."""
    offending = [f"{m} imports {t}" for m in engine_modules() if engine_room(m) == importer
                 for t in runtime_imports(m) if t.startswith("zerolock_core.") and engine_room(t) == imported_room
                 and not is_leaf(t)]
    assert offending == []


def test_a_room_that_imports_upward_is_found(monkeypatch, tmp_path):
    """The rule itself: a runtime module importing the jobs, even inside a function, is reported."""
    upward = tmp_path / "upward.py"
    upward.write_text("def f():\n    from ..jobs.job import make_job\n    return make_job\n")
    monkeypatch.setitem(MODULES, "zerolock_core.runtime.upward", upward)
    assert "zerolock_core.jobs.job" in runtime_imports("zerolock_core.runtime.upward")
    assert level_of("jobs") > level_of("runtime")
