"""Issue 33's shape rules, checked on the source (AST, nothing imported or run):

- every function in the package is at most ``MAX_FUNCTION_LINES`` long (``end_lineno - lineno + 1``,
  decorators not counted, nested functions counted inside their parent and on their own);
- every explicit ``__init__`` takes at most ``MAX_PARAMETERS`` parameters besides ``self`` (``*args`` and
  ``**kwargs`` that only forward to a base class are not counted), and so does every ``@dataclass`` whose
  name ends in Runner/Launcher/Executor (its fields are its constructor's parameters).

The sweep floor is being rebuilt on another branch (issue 33's verdict and loops); its offenders are
listed in ``PENDING_OTHER_BRANCH`` with their size today, and the list may only shrink: an entry that
now fits, or is gone, fails here so that it is removed. Everything else gets no allowance.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "draftbench"
MAX_FUNCTION_LINES = 60
MAX_PARAMETERS = 6
BUILT_WITH_MANY = ("Runner", "Launcher", "Executor")     # dataclasses whose instances are built with many values

# Where the other branch works: offenders there are listed below instead of fixed here (they would conflict).
OTHER_BRANCH = ("sweep/", "analysis/", "cli/sweep_cli.py", "config/prompts.py")
# "module.qualified.name" -> its size today: lines for a function, parameters for an __init__ or dataclass.
# The lead empties this when the other branch lands.
PENDING_OTHER_BRANCH: dict[str, int] = {
}


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
        if name == "dataclass":
            return True
    return False


def definitions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.AST]]:
    """(qualified name, node) for every function and class, nested ones included."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = prefix + child.name
            yield name, child
            yield from definitions(child, name + ".")
        else:
            yield from definitions(child, prefix)


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = node.args
    return len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs) - 1     # less self


def sizes(source: str) -> dict[str, tuple[str, int, int]]:
    """Qualified name -> (what, size, cap) for every function, ``__init__`` and many-valued dataclass."""
    found: dict[str, tuple[str, int, int]] = {}
    for name, node in definitions(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1 if node.end_lineno else 0
            found[name] = ("lines", lines, MAX_FUNCTION_LINES)
            if node.name == "__init__":
                found[name + "#parameters"] = ("parameters", parameter_count(node), MAX_PARAMETERS)
        elif isinstance(node, ast.ClassDef) and _is_dataclass(node) and node.name.endswith(BUILT_WITH_MANY):
            fields = sum(isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                         and "ClassVar" not in ast.unparse(s.annotation) for s in node.body)
            found[name] = ("fields", fields, MAX_PARAMETERS)
    return found


def offenders(package: Path = PACKAGE) -> dict[str, tuple[str, int, int]]:
    """"module:qualified.name" -> (what, size, cap) for everything over its cap."""
    over = {}
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        for name, (what, size, cap) in sizes(path.read_text(encoding="utf-8")).items():
            if size > cap:
                over[f"{module}:{name.removesuffix('#parameters')}"] = (what, size, cap)
    return over


def test_every_function_and_constructor_fits_outside_the_other_branchs_floor():
    found = {k: v for k, v in offenders().items() if k not in PENDING_OTHER_BRANCH}
    described = [f"{name}: {size} {what} (at most {cap})" for name, (what, size, cap) in sorted(found.items())]
    assert not described, ("split these by concern (a function), or group related parameters into a small frozen "
                           "dataclass (a constructor):\n" + "\n".join(described))


def test_the_pending_list_names_only_the_other_branchs_files_and_only_shrinks():
    outside = [name for name in PENDING_OTHER_BRANCH if not name.startswith(OTHER_BRANCH)]
    assert not outside, f"only the other branch's files may be allowed to wait: {outside}"
    found = offenders()
    fixed = [name for name in PENDING_OTHER_BRANCH if name not in found]
    assert not fixed, f"these now fit (or are gone): remove them from PENDING_OTHER_BRANCH: {fixed}"
    grown = [f"{name}: {found[name][1]} (listed at {size})" for name, size in PENDING_OTHER_BRANCH.items()
             if found[name][1] > size]
    assert not grown, f"these grew since they were listed: {grown}"


def test_the_rules_measure_what_they_say(tmp_path):
    """The counting itself: a 61-line function, a 7-parameter __init__ and a 7-field Runner are caught;
    decorators, forwarded **kwargs and class variables are not counted."""
    body = "\n".join(f"    x{i} = {i}" for i in range(59))       # with def and return: 61 lines
    fits = "\n".join(f"    x{i} = {i}" for i in range(58))       # 60 lines
    (tmp_path / "m.py").write_text(
        "from dataclasses import dataclass\nfrom typing import ClassVar\n\n"
        f"@staticmethod\ndef long():\n{body}\n    return 0\n\n"
        f"def short():\n{fits}\n    return 0\n\n"
        "class A:\n    def __init__(self, a, b, c, *, d, e, f, g): pass\n\n"
        "class B(A):\n    def __init__(self, a, b, c, d, e, f, *args, **kwargs): pass\n\n"
        "@dataclass(frozen=True)\nclass StepRunner:\n" + "".join(f"    f{i}: int\n" for i in range(7))
        + "\n@dataclass\nclass ShortRunner:\n    LIMIT: ClassVar[int] = 3\n"
        + "".join(f"    f{i}: int\n" for i in range(6)))
    found = offenders(tmp_path)
    assert found == {"m.py:long": ("lines", 61, 60), "m.py:A.__init__": ("parameters", 7, 6),
                     "m.py:StepRunner": ("fields", 7, 6)}
