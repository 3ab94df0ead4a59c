"""Placeholder report (the real one lands with issue 5)."""

from __future__ import annotations

import html
import json
from pathlib import Path


def render_report(results, *, cdn: bool = False) -> str:
    return "<html><body><pre>" + html.escape(json.dumps(results.to_dict(), indent=1)[:20000]) + "</pre></body></html>"


def write_report(results, path, *, cdn: bool = False) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(render_report(results, cdn=cdn), encoding="utf-8")
    return p
