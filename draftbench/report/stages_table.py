"""The stages of each target measured in stages: the verdict in words, then each candidate — how many stages
it was measured in, its own speed-up (95%, this candidate alone), and where it ended (recommended, in the
shortlist, left at a look and why, not probed, left out and why). Everything comes from the target's
verdict (``TargetVerdict.stages``, built by :mod:`draftbench.analysis.stage_verdict`) and the rows, so the report
and the console say the same thing."""

from __future__ import annotations

from ..analysis.categories import candidate_name
from ..analysis.stage_verdict import StagedVerdict
from ..analysis.stats import describe_speedup
from ..analysis.summary import verdicts_of
from ..results.file import ResultsFile, Row
from ..results.kinds import Role
from .text import esc
from .view import ReportData


def _ended(name: str, stages: StagedVerdict) -> str:
    if name == stages.pick:
        return "recommended"
    if name in stages.shortlist:
        return "in the shortlist" + (" (its leader)" if name == stages.best else "")
    if name in stages.eliminated:
        return stages.eliminated[name]
    if name in stages.not_probed:
        return "not probed: the budget ran out first"
    if name in stages.left_out:
        return f"not in the decision: {stages.left_out[name]}"
    if name == stages.best:
        return "best so far"
    return "still in (not separated)"


def _rows(results: ResultsFile, target: str) -> list[Row]:
    return [r for r in results.rows_of(target) if r.role is Role.SPECULATIVE and r.concurrency == 1]


def stages_section(data: ReportData) -> str:
    parts: list[str] = []
    for verdict in verdicts_of(data.results):
        stages = verdict.stages
        if stages is None:
            continue
        rows = "".join(
            f"<tr><td>{esc(candidate_name(r))}</td><td class=\"num\">{len({q.block for q in r.requests})}</td>"
            f"<td>{esc(describe_speedup(r.speedup) if r.speedup else '—')}</td>"     # wraps: a long interval
            f"<td>{esc(_ended(candidate_name(r), stages))}</td></tr>" for r in _rows(data.results, verdict.target))
        settle = stages.settle.describe(stages.stage_size or 1) if stages.settle is not None else None
        power = stages.power
        parts.append(f"<h3>{esc(verdict.target)}</h3><p>{esc(verdict.verdict)}</p>"
                     + (f"<p class=\"muted\">{esc(settle)}.</p>" if settle else "")
                     + (f"<p class=\"muted power\">Power: {esc(power)}</p>" if power else "")
                     + f"<div class=\"table-wrap\"><table class=\"stages-table\" id=\"stages-table-{len(parts) + 1}\">"
                     "<thead><tr><th>Candidate</th><th>Stages</th><th>Its speed-up (95%, this candidate alone)</th><th>Where it ended</th>"
                     "</tr></thead><tbody>" + rows + "</tbody></table></div>")
    if not parts:
        return ""
    return ("<section id=\"stages\"><h2>The stages</h2><p class=\"lead\">Each stage measured fresh prompts on fresh "
            "servers for every candidate still in; after each, the verdict looked at everything so far with bounds "
            "that hold at 95% over every candidate and look together. The interval beside each candidate is its "
            "own (not corrected for choosing among many); the verdict quotes the corrected one.</p>"
            + "".join(parts) + "</section>")
