"""The common Plotly layout of every chart (dark theme, legend on top, automargins)."""

from __future__ import annotations

from typing import Any

from . import theme


def base_layout(**extra: Any) -> dict[str, Any]:
    """The common dark layout; ``xaxis``/``yaxis`` in ``extra`` are merged into the defaults."""
    axis = dict(gridcolor=theme.GRID, zerolinecolor=theme.GRID, linecolor=theme.GRID, automargin=True)
    layout: dict[str, Any] = dict(
        template="none", paper_bgcolor=theme.CARD, plot_bgcolor=theme.CARD,
        font=dict(family=theme.FONT, color=theme.TEXT, size=13),
        margin=dict(l=70, r=30, t=30, b=60),
        hoverlabel=dict(align="left", bgcolor=theme.HOVER_BG, font=dict(color=theme.TEXT)),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0, bgcolor="rgba(0,0,0,0)"),
        # the toolbar down the right edge: across the top it covered the legend's last entries (always shown
        # where the device has no hover, as on a tablet)
        modebar=dict(orientation="v"),
        xaxis=dict(axis), yaxis=dict(axis),
    )
    for key, value in extra.items():
        layout[key] = {**layout[key], **value} if key in ("xaxis", "yaxis") else value
    return layout


CELL_LINE_PX = 16        # a line of a heatmap cell's 12 px text
CELL_PAD_PX = 12
MIN_ROW_PX = 34


def heatmap_height(texts: list[list[str]], *, floor: int = 320) -> int:
    """A heatmap's height with every row tall enough for its cells' lines of text ("+5%", "acc 70%",
    "loops"), so that no cell's text runs into the next row's."""
    lines = max((t.count("<br>") + 1 for row in texts for t in row if t), default=1)
    return max(floor, 110 + max(MIN_ROW_PX, CELL_LINE_PX * lines + CELL_PAD_PX) * len(texts))
