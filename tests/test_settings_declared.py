"""Each setting is declared once (draftbench/config/settings.py and each backend's settings.py) and read
as a typed attribute everywhere else: no string-keyed reads of a settings dict, and no default stated
a second time (a literal fallback, an option's default, a dataclass default)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from draftbench.backends import REGISTRY
from draftbench.config.settings import COMMON_SETTINGS

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("draftbench", "benchmarks", "tools")
# The config layer: the declarations, their checks, and the loader of a config's raw JSON.
CONFIG_LAYER = ("draftbench/config/", "draftbench/sweep/config_file.py")
DECLARATIONS = ("draftbench/config/settings.py", "draftbench/config/field.py", "draftbench/backends/llamacpp/settings.py",
                "draftbench/backends/vllm/settings.py", "draftbench/backends/lmstudio/settings.py")
SETTINGS_LIKE = re.compile(r"(^|[._])settings( or \{\})?$")     # settings, config.settings, raw_settings, … or {}


def schemas() -> dict[str, object]:
    fields = dict(COMMON_SETTINGS)
    for backend in REGISTRY.values():
        fields.update(backend.settings_class.schema())
    return fields


def sources(skip: tuple[str, ...]):
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if not rel.startswith(skip) and rel not in skip:
                yield rel, ast.parse(path.read_text(encoding="utf-8"))


def settings_names(tree: ast.AST) -> set[str]:
    """Names bound to a settings value (``s = self.config.settings``; ``settings = …``)."""
    names = {"settings"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and SETTINGS_LIKE.search(ast.unparse(node.value)):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def is_settings(node: ast.expr, names: set[str]) -> bool:
    return (isinstance(node, ast.Name) and node.id in names) or bool(SETTINGS_LIKE.search(ast.unparse(node)))


def string_keyed_reads(tree: ast.AST) -> list[str]:
    names = settings_names(tree)
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and \
                isinstance(node.slice.value, str) and is_settings(node.value, names)) or (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and \
                node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) and \
                is_settings(node.func.value, names)):
            found.append(ast.unparse(node))
    return found


def test_no_string_keyed_settings_read_outside_the_config_layer():
    reads = [f"{rel}: {text}" for rel, tree in sources(CONFIG_LAYER) for text in string_keyed_reads(tree)]
    assert reads == [], "read settings as typed attributes (settings.noise_floor), not by key:\n" + "\n".join(reads)


def test_the_scan_finds_string_keyed_reads():
    tree = ast.parse("def f(config, results):\n    s = config.settings\n    a = s.get('runs') or 1\n"
                     "    b = config.settings['max_tokens']\n    c = (results.settings or {}).get('noise_floor')\n"
                     "    d = entry.get('draft_max')\n")
    assert sorted(string_keyed_reads(tree)) == ["(results.settings or {}).get('noise_floor')",
                                                "config.settings['max_tokens']", "s.get('runs')"]


def distinctive(value: object) -> bool:
    """A default worth finding a second time (0, 1, True or None are everywhere for other reasons)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and value not in (0, 1)) or \
        (isinstance(value, str) and bool(value))


def same(node: ast.AST, value: object) -> bool:
    if not isinstance(node, ast.Constant) or isinstance(node.value, bool):
        return False
    if isinstance(value, str):
        return node.value == value
    return isinstance(node.value, (int, float)) and node.value == value


def option_key(call: ast.Call, fields: dict) -> str | None:
    """The settings key an argparse option stands for (``--max-tokens`` → max_tokens, ``--request-timeout`` →
    request_timeout_s)."""
    for arg in call.args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
            name = arg.value[2:].replace("-", "_")
            for key in (name, f"{name}_s"):
                if key in fields:
                    return key
    return None


def restated_defaults(tree: ast.AST, fields: dict) -> list[str]:
    defaults = {key: f.default for key, f in fields.items() if distinctive(f.default)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            found += [f"{ast.unparse(node)} ({key})" for key, d in defaults.items() if same(node.values[-1], d)
                      and key in ast.unparse(node)]
        elif isinstance(node, ast.IfExp):
            found += [f"{ast.unparse(node)} ({key})" for key, d in defaults.items() if same(node.orelse, d)
                      and key in ast.unparse(node)]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute):
            if node.func.attr == "get" and len(node.args) == 2 and isinstance(node.args[0], ast.Constant) and \
                    node.args[0].value in defaults and same(node.args[1], defaults[node.args[0].value]):
                found.append(ast.unparse(node))
            key = option_key(node, fields) if node.func.attr == "add_argument" else None
            if key in defaults:
                found += [ast.unparse(node) for kw in node.keywords if kw.arg == "default"
                          and same(kw.value, defaults[key])]
        elif isinstance(node, ast.ClassDef):
            found += [f"{node.name}.{ast.unparse(item)}" for item in node.body if isinstance(item, ast.AnnAssign)
                      and isinstance(item.target, ast.Name) and item.target.id in defaults and item.value is not None
                      and same(item.value, defaults[item.target.id])]
    return found


def test_each_settings_default_is_declared_once():
    fields = schemas()
    found = [f"{rel}: {text}" for rel, tree in sources(DECLARATIONS) for text in restated_defaults(tree, fields)]
    assert found == [], "use the declared default (DEFAULTS.max_tokens, settings.noise_floor), not a literal:\n" + \
        "\n".join(found)


def test_the_scan_finds_restated_defaults():
    tree = ast.parse("def f(s, p):\n    a = s.max_tokens or 512\n    b = noise_floor if ok else 0.02\n"
                     "    p.add_argument('--max-tokens', type=int, default=512)\n"
                     "    p.add_argument('--request-timeout', default=900.0)\n    c = d.get('design', 'auto')\n"
                     "class Options:\n    ctx_size: int = 4096\n")
    assert len(restated_defaults(tree, schemas())) == 6
