"""The package's shape, checked: the layer rule (which packages may import which), no import cycles,
no private names imported across modules, modules that fit on a few screens. See docs/architecture.md.

The scripts beside the package (``benchmarks/``, ``tools/``) sit above every layer: they may import the
package, the package never imports them, and the cycle and private-name rules hold for them too."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "draftbench"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
MAX_LINES = 420
# The layers, bottom up: a package may import itself, the package root (its version) and the packages
# before it, never one after it. Imports inside functions count: a lazy import still couples the two.
LAYERS = ("common", "lifetime", "config", "results", "backends", "analysis", "measure", "share", "report",
          "sweep", "cli")


# Script folders: each is on the import path of its scripts (benchmarks import ``simulation.grids``, the
# tests ``forge``), so their modules are named relative to the folder.
SCRIPTS = (PACKAGE.parent / "benchmarks", PACKAGE.parent / "tools")


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def script_modules() -> dict[str, Path]:
    out = {}
    for folder in SCRIPTS:
        for path in folder.rglob("*.py"):
            name = ".".join(path.relative_to(folder).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, str]]:
    """(imported module, imported name) for every draftbench import in a module, at any depth
    (imports inside functions count: a cycle through a lazy import is still a cycle)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                found.append((target, alias.name))
        elif isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names]
    tops = {"draftbench"} | {m.split(".")[0] for m in known}
    return [(t, n) for t, n in found if t.split(".")[0] in tops]


def test_every_top_level_entry_is_a_layer():
    entries = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
               if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.name != "__init__.py"}
    assert entries == set(LAYERS), f"place each new package in LAYERS (and docs/architecture.md): {entries ^ set(LAYERS)}"


def test_layers_import_only_downwards():
    known = modules()
    wrong = []
    for module, path in known.items():
        parts = module.split(".")
        if len(parts) < 2:
            continue
        mine = LAYERS.index(parts[1])
        for target, _ in imports(module, path, known):
            other = target.split(".")
            if len(other) >= 2 and other[1] in LAYERS and LAYERS.index(other[1]) > mine:
                wrong.append(f"{module} imports {target} ({parts[1]} is below {other[1]})")
    assert not wrong, "imports that go up a layer:\n" + "\n".join(wrong)


def test_the_package_never_imports_the_scripts_beside_it():
    """benchmarks/ and tools/ import the package (each one through any layer); the package imports neither."""
    known = modules() | script_modules()
    scripts = set(script_modules())
    wrong = [f"{m} imports {t}" for m, p in modules().items() for t, _ in imports(m, p, known)
             if t in scripts or t.split(".")[0] in {s.split(".")[0] for s in scripts}]
    assert not wrong, "the package must not import benchmarks/ or tools/:\n" + "\n".join(wrong)
    assert any(t.startswith("draftbench.") for m, p in script_modules().items()
               for t, _ in imports(m, p, known)), "the scripts' imports of the package were not seen"


def test_no_module_imports_the_report_at_import_time():
    # The CLIs and the sweep import it inside the function that writes a report: plotly loads only then.
    known = modules()
    for module, path in known.items():
        if module.startswith("draftbench.report"):
            continue
        top = [node for node in ast.parse(path.read_text()).body if isinstance(node, ast.ImportFrom)]
        for node in top:
            level_base = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
            base = node.module or ""
            if node.level:
                anchor = level_base.split(".")[: len(level_base.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            assert not (base == "draftbench.report" or base.startswith("draftbench.report.")), module


def test_no_import_cycles():
    known = modules() | script_modules()
    edges = {m: {t for t, _ in imports(m, p, known) if t in known and t != m and not m.startswith(t + ".")}
             for m, p in known.items()}

    def reaches(start: str, goal: str) -> list[str] | None:
        stack, seen = [(start, [start])], set()
        while stack:
            node, trail = stack.pop()
            for nxt in edges[node]:
                if nxt == goal:
                    return [*trail, nxt]
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
        return None

    cycles = [" -> ".join(trail) for m in known if (trail := reaches(m, m))]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_private_names_imported_across_modules():
    known = modules() | script_modules()
    private = [f"{m} imports {n} from {t}" for m, p in known.items() for t, n in imports(m, p, known)
               if n.startswith("_") and not n.startswith("__")]
    assert not private, "\n".join(private)


def test_modules_fit_on_a_few_screens():
    long = {m: n for m, p in modules().items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by concern): {long}"


def test_docs_architecture_names_every_module_and_no_module_that_is_gone():
    """Each module by its path under draftbench/ in backticks (`results/row.py`; a package as `results/`),
    so the map of the package cannot drift from the package."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    missing = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "__init__.py":
            continue
        names = (f"`{rel}`", f"`{rel.removesuffix('__init__.py')}`") if path.name == "__init__.py" else (f"`{rel}`",)
        if not any(name in text for name in names):
            missing.append(rel)
    assert not missing, f"name these modules in {ARCHITECTURE.name} (one line each, in their layer): {sorted(missing)}"
    gone = [name for name in re.findall(r"`([\w/]+\.py)`", text)
            if not (PACKAGE / name).exists() and not (PACKAGE.parent / name).exists()]
    assert not gone, f"{ARCHITECTURE.name} names modules that do not exist: {gone}"
