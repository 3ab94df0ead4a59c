"""The report's "Topology" table: where each measured combination's models ran — a target split over
llama.cpp RPC endpoints (bytes per endpoint, as llama-server logged them), where its draft was, the
links' measured round trip — or vLLM's parallelism. Shown only when some row recorded a topology."""

from __future__ import annotations

from ..results.file import Row, combination_title
from ..results.topology import is_parallelism, links, parallelism, where
from .text import esc
from .view import ReportData


def _title(row: Row, multi_k: bool) -> str:
    return combination_title(row.role, row.target, row.draft, row.draft_max, show_k=multi_k,
                             concurrency=row.concurrency, synthetic=(row.synthetic or {}).get("level"))


def _cells(row: Row) -> list[str]:
    topology = row.topology or {}
    if is_parallelism(topology):
        return [parallelism(topology), "—", "—"]
    draft = "—"
    if topology.get("draft"):
        placement = topology.get("draft_placement") or "llama-server's default"
        draft = f"{placement}: {where(topology.get('draft'))}"
    proven = "" if topology.get("split_proven") else " (not proven)"
    return [where(topology.get("target")) + proven, draft, links(topology) or "—"]


def topology_section(data: ReportData) -> str:
    rows = [r for r in data.results.results if isinstance(r.topology, dict)]
    if not rows:
        return ""
    body = "".join("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in [_title(r, data.multi_k), r.status, *_cells(r)])
                   + "</tr>" for r in rows)
    return ("<section id=\"topology\"><h2>Topology</h2><p class=\"lead\">Where the models ran. For a target split "
            "over llama.cpp RPC endpoints, the bytes on each endpoint are llama-server's own load log (its buffer "
            "sizes: the proof that the split happened), and the round trip is a probe of each endpoint with the RPC "
            "protocol just before the server started. vLLM rows show the parallelism the server was started "
            "with.</p><div class=\"table-wrap\"><table id=\"topology-table\"><thead><tr><th>Combination</th>"
            "<th>Status</th><th>Target</th><th>Draft</th><th>Link round trip</th></tr></thead><tbody>"
            + body + "</tbody></table></div></section>")
