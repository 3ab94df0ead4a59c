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
        xaxis=dict(axis), yaxis=dict(axis),
    )
    for key, value in extra.items():
        layout[key] = {**layout[key], **value} if key in ("xaxis", "yaxis") else value
    return layout
