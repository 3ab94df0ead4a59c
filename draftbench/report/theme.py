"""The report's dark theme: one palette for the figures and the page's CSS."""

from __future__ import annotations

import math
from typing import Any

BG, CARD, GRID, TEXT, MUTED = "#0f1117", "#171a23", "#2a2f3a", "#e6e6e6", "#9aa0a6"
BASELINE_COLOR = "#8d99ae"
CLASS_COLORS = ("#4cc9f0", "#f72585", "#7bd389", "#ffb703", "#b388eb", "#ff7f50", "#2ec4b6", "#e9c46a",
                "#f4a261", "#90be6d")
UNKNOWN_COLOR = "#adb5bd"
# Diverging: red = slower than the baseline, neutral at 0, blue = faster.
DIVERGING = [[0.0, "#b2182b"], [0.25, "#ef8a62"], [0.5, "#f2f2f2"], [0.75, "#67a9cf"], [1.0, "#2166ac"]]
# Speed-up heatmaps use one fixed scale, so a colour means the same speed-up in every report: log2 of
# the ratio, centred on 1.0× (no change), saturating at half and at twice the target's speed.
# Cells whose speed-up is not significant (or rests on too few requests) are drawn in NEUTRAL_COLOR.
SPEEDUP_LOG2_RANGE = 1.0
SPEEDUP_TICKS = (0.5, 0.71, 1.0, 1.41, 2.0)
# Dark at both ends and in the middle, so a cell's white text reads on every colour.
SPEEDUP_COLORS = [[0.0, "#a50f25"], [0.25, "#b85a4c"], [0.5, "#3a3f4b"], [0.75, "#3f78ad"], [1.0, "#1f5fa8"]]
NEUTRAL_COLOR = "#6b717e"
PROBLEM_COLOR = "#3b3f4a"
MISSING_COLOR = "#23262f"
HOVER_BG = "#262a36"
PROBLEM_TEXT = "#c9ccd1"
FONT = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"



def speedup_colour(ratio: float) -> float:
    """Where a speed-up ratio sits on the fixed heatmap scale (log2, clipped)."""
    if ratio <= 0:
        return -SPEEDUP_LOG2_RANGE
    return round(max(-SPEEDUP_LOG2_RANGE, min(SPEEDUP_LOG2_RANGE, math.log2(ratio))), 4)


def speedup_scale(title: str = "tok/s vs the target alone") -> dict[str, Any]:
    """A heatmap trace's colour settings for :func:`speedup_colour` values, with a colour bar in ×."""
    return dict(zmid=0, zmin=-SPEEDUP_LOG2_RANGE, zmax=SPEEDUP_LOG2_RANGE, colorscale=SPEEDUP_COLORS,
                colorbar=dict(title=dict(text=title, side="right"), outlinewidth=0, tickfont=dict(color=TEXT),
                              tickvals=[round(math.log2(t), 4) for t in SPEEDUP_TICKS],
                              ticktext=[f"{t:g}×" for t in SPEEDUP_TICKS]))


CSS = f"""
:root {{ color-scheme: dark; }}
* {{ box-sizing: border-box; }}
body {{ margin: 0; background: {BG}; color: {TEXT};
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }}
main {{ max-width: 1280px; margin: 0 auto; padding: 24px 28px 48px; }}
h1 {{ font-size: 1.7rem; margin: 0 0 12px; font-weight: 650; }}
h2 {{ font-size: 1.2rem; margin: 0 0 10px; font-weight: 600; }}
section, header {{ background: {CARD}; border: 1px solid {GRID}; border-radius: 10px; padding: 18px 20px;
  margin: 0 0 18px; }}
.meta {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(280px, 1fr)); gap: 6px 24px; margin: 0; }}
.meta dt {{ color: {MUTED}; font-size: .8rem; text-transform: uppercase; letter-spacing: .04em; }}
.meta dd {{ margin: 0; overflow-wrap: anywhere; }}
.muted {{ color: {MUTED}; }}
.small {{ font-size: .85rem; margin-top: 4px; }}
.good {{ color: #7bd389; font-weight: 600; }}
.lead {{ margin: 4px 0 10px; color: {MUTED}; }}
table {{ border-collapse: collapse; width: 100%; font-size: .92rem; }}
.table-wrap {{ overflow-x: auto; }}
th, td {{ text-align: left; padding: 7px 10px; border-bottom: 1px solid {GRID}; vertical-align: top; }}
th {{ white-space: normal; overflow-wrap: normal; hyphens: none; }}
td {{ overflow-wrap: break-word; }}
#summary-table td:first-child, #summary-table td:nth-child(3) {{ min-width: 7em; }}
#summary-table td:last-child {{ min-width: 18em; }}
#summary-table td:nth-child(4), #theory-table td.num {{ white-space: normal; overflow-wrap: normal; }}
#problems-table td:first-child {{ min-width: 14em; }}
#theory-table td:first-child {{ min-width: 9em; }}
#problems-table td:last-child {{ min-width: 20em; }}
th {{ color: {MUTED}; font-weight: 600; font-size: .8rem; text-transform: uppercase; letter-spacing: .03em; }}
td.num {{ white-space: nowrap; font-variant-numeric: tabular-nums; }}
td.state {{ color: #ef8a62; white-space: nowrap; }}
tbody tr:hover {{ background: #1d212c; }}
details summary {{ cursor: pointer; color: {MUTED}; margin: 8px 0; }}
ul {{ padding-left: 1.3em; margin: 6px 0; }}
li {{ margin: 3px 0; }}
.chart {{ width: 100%; }}
footer {{ color: {MUTED}; font-size: .85rem; text-align: center; }}
a {{ color: #4cc9f0; }}
h3 {{ font-size: 1rem; margin: 14px 0 4px; font-weight: 600; }}
pre.command {{ background: {BG}; border: 1px solid {GRID}; border-radius: 6px; padding: 8px 10px; margin: 2px 0 8px;
  white-space: pre-wrap; overflow-wrap: anywhere; font-size: .85rem; }}
"""
