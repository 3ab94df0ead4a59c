#!/usr/bin/env python3
"""How far a reader walks: follow the calls from one function down to a measurement, statically.

    python tools/callgraph.py [START ...] [--to TARGET] [--via FUNC ...] [--package DIR] [--path]

The package's source is parsed as text (``ast``); nothing is imported or run. A call is followed when its
callee can be named without running anything:

- ``f(...)``: a function or class (its ``__init__``) defined in the module or imported into it (through
  re-exports in ``__init__.py`` files too);
- ``module.f(...)``: a function of an imported module;
- ``self.m(...)``, ``cls.m(...)``, ``super().m(...)``, ``Class.m(...)``: a method of that class or of a base
  class defined in the package;
- ``x.m(...)`` where ``x`` is a parameter or a variable annotated with a class of the package (``server:
  Server``), or a ``self`` attribute whose class the source states (``self.a, self.b = a, b`` and
  ``self.a = a if a else A()`` included): that class's method (the declared type, never an override chosen at
  run time).

Other calls (on values of unknown type, through callbacks) are not followed, so the numbers are a floor.

**The deepest path** is the chain of calls from START to TARGET with the most steps from one file into
another (ties: the most functions); when TARGET cannot be reached from START, the deepest chain from START
at all. Recursion is not unrolled: a call back to a function already on the chain is not followed. Each
function on the chain lives in a file; along the chain the tool counts

- **files entered**: the number of distinct files (START's file counts);
- **returns**: the steps that go into a file the chain had already left (A → B → A counts one: the reader
  is sent back to a room already visited).

It also prints how many files hold a function on *any* chain from START to TARGET (what a reader may
have to open to follow every branch).

**A route** (``--via FUNC``, repeatable): a reader following one thing — a request, a setting — from START through
each FUNC in order to TARGET: down the most direct chain (the fewest steps from one file into another) to each,
then back up to the nearest function on the way that leads to the next one, and down again. Climbing back into a
file already left is a return.

Issue 33's target for the sweep's CLI: at most 12 files and at most 3 returns (docs/architecture.md).
"""

from __future__ import annotations

import argparse
import ast
import heapq
import math
import sys
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

DEFAULT_STARTS = ("draftbench.cli.sweep_cli.main", "draftbench.report.page.write_report")
DEFAULT_TARGET = "draftbench.backends.http.client.stream_chat"     # the function that streams one request


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    names: dict[str, str] = field(default_factory=dict)    # a name bound at module level -> what it stands for


@dataclass(frozen=True)
class Walk:
    start: str
    target: str | None          # None: TARGET was not reached; the chain is the deepest from START at all
    chain: tuple[str, ...]
    files: tuple[str, ...]      # the file of each function on the chain
    files_on_any_chain: int = 0     # files holding a function on some chain from start to target

    @property
    def files_entered(self) -> int:
        return len(set(self.files))

    @property
    def returns(self) -> int:
        count, left = 0, set()
        for before, after in pairwise(self.files):
            if after != before:
                left.add(before)
                count += after in left
        return count


class Package:
    """Every module, function and class of one package, read from its source."""

    def __init__(self, root: Path):
        self.root = root
        self.modules: dict[str, Module] = {}
        self.functions: dict[str, tuple[Module, ast.FunctionDef | ast.AsyncFunctionDef, str | None]] = {}
        self.classes: dict[str, tuple[Module, ast.ClassDef]] = {}
        self._callees: dict[str, list[str]] = {}
        self._attributes: dict[str, dict[str, str]] = {}
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root.parent).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            self.modules[name] = Module(name, path, ast.parse(path.read_text(encoding="utf-8")))
        for module in self.modules.values():
            self._index(module)

    def _index(self, module: Module) -> None:
        package = module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
        # imports inside functions too (a lazy import still names what is called); module-level ones first
        nested = [n for n in ast.walk(module.tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                  and n not in module.tree.body]
        for node in [*module.tree.body, *nested]:
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                for alias in node.names:
                    module.names[alias.asname or alias.name] = f"{base}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:     # `import a.b` binds a; `import a.b as c` binds c to a.b
                    bound = alias.name if alias.asname else alias.name.split(".")[0]
                    module.names[alias.asname or bound] = bound
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qualified = f"{module.name}.{node.name}"
                module.names[node.name] = qualified
                self.functions[qualified] = (module, node, None)
            elif isinstance(node, ast.ClassDef):
                qualified = f"{module.name}.{node.name}"
                module.names[node.name] = qualified
                self.classes[qualified] = (module, node)
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.functions[f"{qualified}.{item.name}"] = (module, item, qualified)

    def canonical(self, name: str, seen: int = 0) -> str:
        """``name`` with re-exports followed to where it is defined."""
        if name in self.functions or name in self.classes or name in self.modules or seen > 20:
            return name
        module, _, attr = name.rpartition(".")
        if module in self.modules and attr in self.modules[module].names:
            return self.canonical(self.modules[module].names[attr], seen + 1)
        return name

    def method(self, cls: str, name: str, seen: int = 0) -> str | None:
        """``cls.name`` or the first base class's (in the package) that defines it."""
        if f"{cls}.{name}" in self.functions:
            return f"{cls}.{name}"
        if cls not in self.classes or seen > 20:
            return None
        module, node = self.classes[cls]
        for base in node.bases:
            found = self.resolve_name(module, base)
            if found in self.classes and (hit := self.method(found, name, seen + 1)):
                return hit
        return None

    def resolve_name(self, module: Module, expr: ast.expr) -> str | None:
        """What a (dotted) name in ``module`` stands for, followed to its definition."""
        if isinstance(expr, ast.Name):
            bound = module.names.get(expr.id)
            return self.canonical(bound) if bound else None
        if isinstance(expr, ast.Attribute):
            owner = self.resolve_name(module, expr.value)
            return self.canonical(f"{owner}.{expr.attr}") if owner in self.modules else None
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):     # a quoted annotation
            try:
                return self.resolve_name(module, ast.parse(expr.value, mode="eval").body)
            except SyntaxError:
                return None
        return None

    def class_of(self, module: Module, expr: ast.expr | None, typed: dict[str, str] | None = None) -> str | None:
        """The package class an annotation or an assigned value states: ``C``, ``C | None``,
        ``Optional[C]``, ``"C"``, ``C(…)``, ``p`` (a typed name), ``a or C(…)``."""
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
            return self.class_of(module, expr.left, typed) or self.class_of(module, expr.right, typed)
        if isinstance(expr, ast.BoolOp):
            return next((c for v in expr.values if (c := self.class_of(module, v, typed))), None)
        if isinstance(expr, ast.IfExp):            # a if test else C(): either branch's class
            return self.class_of(module, expr.body, typed) or self.class_of(module, expr.orelse, typed)
        if isinstance(expr, ast.Subscript):        # Optional[C]
            return self.class_of(module, expr.slice, typed)
        if isinstance(expr, ast.Call):
            return self.class_of(module, expr.func, typed)
        if isinstance(expr, ast.Name) and typed and expr.id in typed:
            return typed[expr.id]
        found = self.resolve_name(module, expr) if expr is not None else None
        return found if found in self.classes else None

    def callees(self, qualified: str) -> list[str]:
        if qualified not in self._callees:
            self._callees[qualified] = self._find_callees(qualified)
        return self._callees[qualified]

    def _find_callees(self, qualified: str) -> list[str]:
        module, node, cls = self.functions[qualified]
        typed = self._typed_names(module, node)
        found: set[str] = set()
        for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
            callee = self._callee(module, cls, typed, call.func)
            if callee in self.classes:
                callee = self.method(callee, "__init__")
            if callee in self.functions and callee != qualified:
                found.add(callee)
        return sorted(found)

    def _typed_names(self, module: Module, node: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
        """Parameters and variables annotated with a class of the package: name -> class."""
        annotated = [(a.arg, a.annotation) for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
        annotated += [(n.target.id, n.annotation) for n in ast.walk(node)
                      if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
        # x = SomeClass(...): x is a SomeClass
        annotated += [(target.id, value) for n in ast.walk(node) if isinstance(n, ast.Assign) and len(n.targets) == 1
                      for target, value in _unpacked(n.targets[0], n.value)
                      if isinstance(target, ast.Name) and isinstance(value, ast.Call)]
        typed: dict[str, str] = {}
        for name, annotation in annotated:
            if cls := self.class_of(module, annotation):
                typed[name] = cls
        return typed

    def attribute_types(self, cls: str) -> dict[str, str]:
        """``self.x`` of a class whose type the source states: a field ``x: C``, ``self.x: C = …``,
        ``self.x = C(…)``, or ``self.x = p`` for a parameter ``p: C``."""
        if cls in self._attributes:
            return self._attributes[cls]
        module, node = self.classes[cls]
        found: dict[str, str] = {}
        for s in node.body:
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) \
                    and (held := self.class_of(module, s.annotation)):
                found[s.target.id] = held
        for method in (m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))):
            typed = self._typed_names(module, method)
            target: ast.expr
            stated: ast.expr
            for n in ast.walk(method):
                if isinstance(n, ast.AnnAssign):
                    pairs = [(n.target, n.annotation)]
                elif isinstance(n, ast.Assign) and len(n.targets) == 1:
                    pairs = _unpacked(n.targets[0], n.value)
                else:
                    continue
                for target, stated in pairs:
                    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                            and target.value.id == "self" and (held := self.class_of(module, stated, typed)):
                        found.setdefault(target.attr, held)
        self._attributes[cls] = found
        return found

    def _callee(self, module: Module, cls: str | None, typed: dict[str, str], func: ast.expr) -> str | None:
        if isinstance(func, ast.Name):
            return self.resolve_name(module, func)
        if not isinstance(func, ast.Attribute):
            return None
        owner = func.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls") and cls:
            return self.method(cls, func.attr)
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super" and cls:
            bases = [self.resolve_name(module, b) for b in self.classes[cls][1].bases]
            return next((m for b in bases if b in self.classes and (m := self.method(b, func.attr))), None)
        if isinstance(owner, ast.Name) and owner.id in typed:
            return self.method(typed[owner.id], func.attr)
        if isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) and owner.value.id == "self" \
                and cls and (held := self.attribute_types(cls).get(owner.attr)):
            return self.method(held, func.attr)
        if isinstance(owner, ast.Call):         # SomeClass(...).method()
            made = self.resolve_name(module, owner.func)
            return self.method(made, func.attr) if made in self.classes else None
        resolved = self.resolve_name(module, owner)
        if resolved in self.classes:
            return self.method(resolved, func.attr)
        return self.resolve_name(module, func)

    def file_of(self, qualified: str) -> str:
        return self.functions[qualified][0].path.relative_to(self.root.parent).as_posix()


def _unpacked(target: ast.expr, value: ast.expr) -> list[tuple[ast.expr, ast.expr]]:
    """``a = x`` → [(a, x)]; ``self.a, self.b = x, y`` → [(self.a, x), (self.b, y)] (element by element)."""
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        return list(zip(target.elts, value.elts))
    return [(target, value)]


def depth(package: Package, chain: tuple[str, ...]) -> tuple[int, int]:
    """How deep a chain reads: (steps from one file into another, functions)."""
    files = [package.file_of(fn) for fn in chain]
    return sum(a != b for a, b in pairwise(files)), len(chain)


def on_any_chain(package: Package, start: str, goal: str) -> set[str]:
    """The files of every function that is called, directly or not, from ``start`` and leads to ``goal``."""
    reachable, todo = {start}, [start]
    while todo:
        for callee in package.callees(todo.pop()):
            if callee not in reachable:
                reachable.add(callee)
                todo.append(callee)
    callers: dict[str, set[str]] = {}
    for fn in reachable:
        for callee in package.callees(fn):
            callers.setdefault(callee, set()).add(fn)
    leads, todo = {goal} & reachable, [goal] if goal in reachable else []
    while todo:
        for caller in callers.get(todo.pop(), ()):
            if caller not in leads:
                leads.add(caller)
                todo.append(caller)
    return {package.file_of(fn) for fn in leads}


def deepest(package: Package, start: str, target: str | None) -> Walk:
    """The deepest chain from ``start`` to ``target`` (or from ``start`` at all when it cannot be reached)."""
    start, goal = package.canonical(start), package.canonical(target) if target else None
    if start not in package.functions:
        raise SystemExit(f"{start}: no such function in {package.root}")
    memo: dict[str, tuple[str, ...] | None] = {}

    def longest(fn: str, on_chain: frozenset[str], reach: bool) -> tuple[str, ...] | None:
        # each function's deepest tail is computed once; a tail that would loop back onto the chain is redone
        if fn in memo and not on_chain.intersection((memo[fn] or ())[1:]):
            return memo[fn]
        if reach and fn == goal:
            return (fn,)
        tails = [t for c in package.callees(fn) if c not in on_chain and (t := longest(c, on_chain | {c}, reach))]
        memo[fn] = (fn, *max(tails, key=lambda tail: depth(package, (fn, *tail)))) if tails else \
            (None if reach else (fn,))
        return memo[fn]

    chain = longest(start, frozenset({start}), reach=goal is not None)
    reached = chain is not None
    if chain is None:
        memo.clear()
        chain = longest(start, frozenset({start}), reach=False) or (start,)
    return Walk(start, goal if reached else None, chain, tuple(package.file_of(fn) for fn in chain),
                len(on_any_chain(package, start, goal)) if reached and goal else 0)


def shortest(package: Package, start: str, goal: str) -> tuple[str, ...] | None:
    """The most direct chain from ``start`` to ``goal``: the fewest steps from one file into another (ties: the
    fewest functions); None when ``goal`` cannot be reached."""
    best = {start: (0, 1)}
    heap: list[tuple[int, int, str, tuple[str, ...]]] = [(0, 1, start, (start,))]
    while heap:
        steps, count, fn, chain = heapq.heappop(heap)
        if fn == goal:
            return chain
        if (steps, count) > best[fn]:
            continue
        for callee in package.callees(fn):
            cost = (steps + (package.file_of(callee) != package.file_of(fn)), count + 1)
            if callee not in chain and cost < best.get(callee, (math.inf, math.inf)):
                best[callee] = cost
                heapq.heappush(heap, (*cost, callee, (*chain, callee)))
    return None


def route(package: Package, start: str, stops: list[str]) -> Walk:
    """The walk of a reader who follows one thing from ``start`` through ``stops`` in order: down the most direct
    chain to the first stop, back up to the nearest function on the way there that leads to the next (into its
    file again: a return when that file had been left), down to it, and so on. Files entered and returns are
    counted along the whole walk."""
    start = package.canonical(start)
    if start not in package.functions:
        raise SystemExit(f"{start}: no such function in {package.root}")
    walked, stack = [start], [start]
    for stop in (package.canonical(s) for s in stops):
        for i in range(len(stack) - 1, -1, -1):
            leg = shortest(package, stack[i], stop)
            if leg is not None:
                break
        else:
            raise SystemExit(f"{stop} cannot be reached from {start} (or is no function of {package.root})")
        if i != len(stack) - 1:
            walked.append(stack[i])         # back up to the caller that leads on
        stack = [*stack[: i + 1], *leg[1:]]
        walked += leg[1:]
    return Walk(start, package.canonical(stops[-1]), tuple(walked), tuple(package.file_of(fn) for fn in walked))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("starts", nargs="*", default=list(DEFAULT_STARTS), help=f"functions to start from (default: "
                   f"{', '.join(DEFAULT_STARTS)})")
    p.add_argument("--to", default=DEFAULT_TARGET, help=f"the measurement to reach (default {DEFAULT_TARGET})")
    p.add_argument("--package", type=Path, default=Path(__file__).resolve().parent.parent / "draftbench")
    p.add_argument("--path", action="store_true", help="print the chain itself")
    p.add_argument("--via", action="append", default=[], metavar="FUNC",
                   help="follow one thing through these functions in order, then to TARGET: the reader's route "
                        "(the most direct chain to each, back up to the nearest caller that leads on)")
    args = p.parse_args(argv)
    if not (args.package / "__init__.py").is_file():
        p.error(f"--package {args.package}: not a Python package (a folder with __init__.py)")
    package = Package(args.package.resolve())
    if args.via:
        for start in args.starts:
            walk = route(package, start, [*args.via, args.to])
            print(f"{walk.start} via {', '.join(args.via)} to {walk.target}: {walk.files_entered} files entered, "
                  f"{walk.returns} returns to a file already left, {len(walk.chain)} functions on the way")
            if args.path:
                for fn, path in zip(walk.chain, walk.files):
                    print(f"    {fn}  ({path})")
        return 0
    for start in args.starts:
        walk = deepest(package, start, args.to)
        end = f"to {walk.target}" if walk.target else f"({args.to} not reached: the deepest chain at all)"
        print(f"{walk.start} {end}: {walk.files_entered} files entered, {walk.returns} returns to a file "
              f"already left, {len(walk.chain)} functions deep"
              + (f"; {walk.files_on_any_chain} files on any chain" if walk.target else ""))
        if args.path:
            for fn, path in zip(walk.chain, walk.files):
                print(f"    {fn}  ({path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
