"""The adaptive search's record: each target's outcome (the console's sentence) and each candidate's race —
every look with its bounds and standing, the decision and why, the servers and requests it took.
Everything comes from the target's verdict (``TargetVerdict.race``, built by :mod:`draftbench.analysis.before_stages.race`),
so the report and the console say the same thing."""

from __future__ import annotations

from ..analysis.before_stages.race import RaceLook
from ..analysis.summary import verdicts_of
from .text import esc
from .view import ReportData


def _pct(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{(ratio - 1) * 100:+.1f}%".replace("-", "\u2212")


def _look(look: RaceLook) -> str:
    bounds = f" [{_pct(look.low)}, {_pct(look.high)}]" if look.low is not None and look.high is not None else ""
    return f"after {look.requests}: {_pct(look.ratio)}{bounds} — {look.standing}"


def race_section(data: ReportData) -> str:
    outcomes = [v.race for v in verdicts_of(data.results) if v.race is not None]
    if not outcomes:
        return ""
    parts = []
    for outcome in outcomes:
        rows = "".join(
            "<tr>" + f"<td>{esc(entry.name)}</td><td>{esc(entry.decision)}</td><td>{esc(entry.why)}</td>"
            + "<td>" + ("<br>".join(esc(_look(lk)) for lk in entry.looks) or "—") + "</td>"
            + f"<td class=\"num\">{esc(entry.loads if entry.loads is not None else '—')}</td>"
            + f"<td class=\"num\">{entry.requests}" + (f" of {entry.planned}" if entry.planned else "") + "</td></tr>"
            for entry in outcome.entries)
        parts.append(f"<h3>{esc(outcome.target)}</h3><p>{esc(outcome.sentence())}</p>"
                     "<div class=\"table-wrap\"><table class=\"race-table\"><thead><tr><th>Candidate</th>"
                     "<th>Decision</th><th>Why</th><th>Looks: speed-up vs the target alone [race bounds] — standing"
                     "</th><th>Servers</th><th>Requests</th></tr></thead><tbody>" + rows + "</tbody></table></div>")
    return ("<section id=\"race\"><h2>The adaptive search</h2><p class=\"lead\">Each candidate's race: at every "
            "look, its speed-up over the target alone with the race's bounds (each wrong with the small "
            "probability the race allows) and where it stood against the leader; then what the race decided and "
            "why. The best of the race is the verdict's choice: one decision.</p>" + "".join(parts) + "</section>")
