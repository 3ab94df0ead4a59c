"""The power curve as a small SVG: the chance that a sweep has decided (recommended, or shown that nothing
gains) by the number of stages measured, per scenario and strategy, from ``benchmarks/verdicts.py --json``
files; or (``--cost``) the share of sweeps that recommend against what they cost — requests and server loads per
sweep over those of today's exhaustive sweep (``--today REQUESTS LOADS``), the larger of the two — one point
per file (a planned horizon). A file's optional ``model`` and ``label`` keys name its noise model and its rule
("before", "after").

    python benchmarks/simulation/power_svg.py OUT.svg RUN.json [RUN.json …]
    python benchmarks/simulation/power_svg.py --cost --today 432 42 OUT.svg RUN.json [RUN.json …]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from html import escape
from pathlib import Path

WIDTH, HEIGHT, LEFT, BOTTOM, TOP, RIGHT = 820, 420, 60, 50, 30, 310
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#ff7f0e", "#17becf"]
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM


def curves(files: list[Path]) -> dict[str, dict[float, float]]:
    """'best10/today (race)' → {stages: share decided by then} (the longest plan wins for a name)."""
    out: dict[str, dict[float, float]] = {}
    for path in files:
        data = json.loads(path.read_text())
        for name, by_strategy in data["scenarios"].items():
            for strategy, figures in by_strategy.items():
                points = {float(k): v for k, v in figures.get("decided_by_stage", {}).items()}
                key = f"{name} ({strategy})"
                if points and len(points) > len(out.get(key, {})):
                    out[key] = {0.0: 0.0, **points}
    return out


def cost_points(files: list[Path], today: tuple[float, float]) -> dict[str, dict[float, float]]:
    """'best10/harsh, session3 after (race)' → {cost: share recommended}: one point per file."""
    out: dict[str, dict[float, float]] = {}
    for path in files:
        data = json.loads(path.read_text())
        model = data.get("model") or (data.get("world") or "").rpartition(":")[2]
        label = data.get("label") or ""
        for name, by_strategy in data["scenarios"].items():
            for strategy, f in by_strategy.items():
                cost = max(f["requests"] / today[0], f["loads"] / today[1])
                key = f"{name.split('/')[0]}{', ' + model if model else ''}{', ' + label if label else ''} ({strategy})"
                out.setdefault(key, {})[round(cost, 3)] = f["recommends"]
    return out


def _y(v: float) -> float:
    return TOP + PLOT_H * (1 - v)


def svg(lines: dict[str, dict[float, float]], title: str, *, cost: bool = False) -> str:
    """The curves on one frame: shares (0–100%) against stages, or against cost with the 2× budget marked."""
    top = max((max(p) for p in lines.values()), default=1.0)
    top = max(2.5, top) if cost else top

    def x(k: float) -> float:
        return LEFT + PLOT_W * (k / top)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" '
             f'font-size="12"><rect width="100%" height="100%" fill="white"/>',
             f'<text x="{LEFT}" y="18" font-size="14">{escape(title)}</text>']
    for v in (0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{_y(v):.1f}" y2="{_y(v):.1f}" '
                     f'stroke="{"#999" if cost and v == 0.5 else "#ddd"}"/>'
                     f'<text x="{LEFT - 8}" y="{_y(v) + 4:.1f}" text-anchor="end">{v:.0%}</text>')
    ticks = [i * 0.5 for i in range(int(top * 2) + 1)] if cost else range(0, int(top) + 1, max(1, int(top) // 6))
    parts += [f'<text x="{x(k):.1f}" y="{TOP + PLOT_H + 18}" text-anchor="middle">{k:g}{"×" if cost else ""}</text>'
              for k in ticks]
    if cost:
        parts.append(f'<line x1="{x(2):.1f}" x2="{x(2):.1f}" y1="{TOP}" y2="{TOP + PLOT_H}" stroke="#999" '
                     'stroke-dasharray="2,3"/>')
    axis = ("cost: requests and server loads per sweep over today's exhaustive sweep's (the larger)" if cost else
            "stages measured (each: 6 fresh prompts on a fresh server pair per candidate)")
    parts.append(f'<text x="{LEFT + PLOT_W / 2}" y="{HEIGHT - 10}" text-anchor="middle">{axis}</text>')
    parts += _lines(lines, x, dots=cost)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _lines(lines: dict[str, dict[float, float]], x: Callable[[float], float], *, dots: bool) -> list[str]:
    parts = []
    for i, (name, points) in enumerate(sorted(lines.items())):
        colour = COLOURS[i % len(COLOURS)]
        dash = ' stroke-dasharray="5,3"' if "race" in name else ""
        path = " ".join(f"{x(k):.1f},{_y(v):.1f}" for k, v in sorted(points.items()))
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{path}"/>')
        if dots:
            parts += [f'<circle cx="{x(k):.1f}" cy="{_y(v):.1f}" r="3" fill="{colour}"/>' for k, v in points.items()]
        parts.append(f'<line x1="{WIDTH - RIGHT + 12}" x2="{WIDTH - RIGHT + 32}" y1="{TOP + 16 * i + 6}" '
                     f'y2="{TOP + 16 * i + 6}" stroke="{colour}" stroke-width="2"{dash}/>'
                     f'<text x="{WIDTH - RIGHT + 38}" y="{TOP + 16 * i + 10}">{escape(name)}</text>')
    return parts


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cost", action="store_true", help="the share that recommends against the cost, one point a file")
    p.add_argument("--today", nargs=2, type=float, default=(432.0, 42.0), metavar=("REQUESTS", "LOADS"),
                   help="today's exhaustive sweep's requests and server loads (default 432 42)")
    p.add_argument("out", type=Path, metavar="OUT.svg")
    p.add_argument("files", nargs="+", type=Path, metavar="RUN.json", help="benchmarks/verdicts.py --json files")
    args = p.parse_intermixed_args(argv)
    if min(args.today) <= 0:
        p.error("--today REQUESTS LOADS must both be above 0")
    if not args.out.resolve().parent.is_dir():
        p.error(f"{args.out}: no folder {args.out.resolve().parent} to write it in")
    read = (lambda files: cost_points(files, tuple(args.today))) if args.cost else curves
    for path in args.files:                 # each file alone first, so that a bad one is named
        try:
            read([path])
        except OSError as exc:
            p.error(f"{path}: cannot read it ({exc.strerror})")
        except (ValueError, KeyError, TypeError, AttributeError, ZeroDivisionError) as exc:
            why = f"has no {exc}" if isinstance(exc, KeyError) else f"({type(exc).__name__}: {exc})"
            p.error(f"{path}: not a file benchmarks/verdicts.py --json wrote {why}")
    title = ("Share of sweeps that recommend, against what they cost" if args.cost
             else "Chance that the verdict has decided, by stages measured")
    args.out.write_text(svg(read(args.files), title, cost=args.cost))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
