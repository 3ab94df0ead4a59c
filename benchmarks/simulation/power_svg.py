"""The power curve as a small SVG: the chance that a sweep has decided (recommended, or shown that nothing
gains) — and that it has said at least whether speculation pays (a shortlist too) — by the number of stages
measured, per scenario and strategy, from ``benchmarks/verdicts.py --json`` files.

    python benchmarks/simulation/power_svg.py OUT.svg RUN.json [RUN.json …]
"""

from __future__ import annotations

import json
import sys
from html import escape
from pathlib import Path

WIDTH, HEIGHT, LEFT, BOTTOM, TOP, RIGHT = 760, 420, 60, 50, 30, 250
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#ff7f0e", "#17becf"]


def curves(files: list[Path]) -> dict[str, dict[int, float]]:
    """'best10/today (race)' → {stages: share decided by then} (the longest plan wins for a name)."""
    out: dict[str, dict[int, float]] = {}
    for path in files:
        data = json.loads(path.read_text())
        for name, by_strategy in data["scenarios"].items():
            for strategy, figures in by_strategy.items():
                points = {int(k): v for k, v in figures.get("decided_by_stage", {}).items()}
                key = f"{name} ({strategy})"
                if points and len(points) > len(out.get(key, {})):
                    out[key] = points
    return out


def svg(lines: dict[str, dict[int, float]], title: str) -> str:
    stages = max((max(p) for p in lines.values()), default=1)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(k: float) -> float:
        return LEFT + plot_w * (k / stages)

    def y(v: float) -> float:
        return TOP + plot_h * (1 - v)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" '
             f'font-size="12"><rect width="100%" height="100%" fill="white"/>',
             f'<text x="{LEFT}" y="18" font-size="14">{escape(title)}</text>']
    for v in (0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>'
                     f'<text x="{LEFT - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.0%}</text>')
    for k in range(0, stages + 1, max(1, stages // 6)):
        parts.append(f'<text x="{x(k):.1f}" y="{TOP + plot_h + 18}" text-anchor="middle">{k}</text>')
    parts.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 10}" text-anchor="middle">stages measured '
                 f'(each: 6 fresh prompts on a fresh server pair per candidate)</text>')
    for i, (name, points) in enumerate(sorted(lines.items())):
        colour = COLOURS[i % len(COLOURS)]
        dash = ' stroke-dasharray="5,3"' if "race" in name else ""
        path = " ".join(f"{x(k):.1f},{y(v):.1f}" for k, v in sorted({0: 0.0, **points}.items()))
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{path}"/>')
        parts.append(f'<line x1="{WIDTH - RIGHT + 12}" x2="{WIDTH - RIGHT + 32}" y1="{TOP + 16 * i + 6}" '
                     f'y2="{TOP + 16 * i + 6}" stroke="{colour}" stroke-width="2"{dash}/>'
                     f'<text x="{WIDTH - RIGHT + 38}" y="{TOP + 16 * i + 10}">{escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    out, files = Path(argv[0]), [Path(a) for a in argv[1:]]
    out.write_text(svg(curves(files), "Chance that the verdict has decided, by stages measured"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
