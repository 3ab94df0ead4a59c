"""The comparison as text: a pyperf-style table, the differences between the files, and the
combinations only one file holds. "Not significant" is said out loud, as pyperf does."""

from __future__ import annotations

from itertools import groupby

from ...analysis import busy
from ...analysis.memory_cost import cost_of, limit_of
from ...analysis.stats import describe_speedup
from ...results.file import ResultsFile
from ...results.kinds import Role
from ...results.memory import mib_text
from .best import best_per_target
from .differences import DiffKind
from .match import Match
from .view import CellState, Change, Comparison, FileCell

NOT_SIGNIFICANT_MEANS = ("not significant: the 95% interval does not lie wholly beyond the noise floor (above 1 + floor "
                         "or below 1 / (1 + floor); settings.noise_floor, 2% unless set)")


SAME_MEASUREMENTS = "same measurements"   # the file's row is the other's own requests (a copy): no change


def times(x: float) -> str:
    return f"{x:.2f}x"


def describe_change(c: Change | None) -> str:
    """'1.10x faster [1.05x, 1.15x]', '1.91x slower [1.61x, 2.27x]' (the point and its interval in the same
    direction), 'not significant (0.99x [0.95x, 1.03x])', or '1.93x faster (no CI)' where the data give no
    interval (see :func:`no_interval_reasons`)."""
    if c is None:
        return "—"
    r = c.ratio
    ratio = r.ratio
    low, high = r.ci95_low, r.ci95_high
    ci = f" [{times(low)}, {times(high) if high is not None else 'unbounded'}]" if r.has_interval and low is not None \
        else ""
    direction = f"{times(ratio)} faster" if ratio >= 1 else f"{times(1 / ratio)} slower"
    if c.significant is True:
        if ratio < 1 and low and high:
            # "slower" inverts the point: the interval is inverted with it (its ends swap)
            return direction + f" [{times(1 / high)}, {times(1 / low)}]"
        return direction + ci
    if c.significant is False:
        return f"not significant ({times(ratio)}{ci})"
    return f"{direction} (no CI)"


def no_interval_reasons(comparison: Comparison) -> list[str]:
    """Why some changes have no interval (a file without per-request data, too few requests)."""
    reasons = []
    for row in comparison.rows:
        for c in row.changes:
            if c.significant is None:
                why = (c.why_unpaired + " (a ratio of means)" if c.ratio.method == "ratio-of-means"
                       else "too few requests were measured")
                reasons.append(why)
    return list(dict.fromkeys(reasons))


def change_header(c_index: int, ref_index: int, letters: tuple[str, ...]) -> str:
    return f"{letters[c_index]} vs {letters[ref_index]}"


def tps_text(cell: FileCell) -> str:
    if cell.state is CellState.OK and cell.tps is not None:
        return f"{cell.tps:.2f}"
    return "—" if cell.state is CellState.ABSENT else cell.state.value


def speedup_text(cell: FileCell) -> str:
    if cell.row is None or cell.row.role is not Role.SPECULATIVE:
        return "—"
    if cell.state is not CellState.OK:
        return cell.state.value
    if cell.row.speculation_active is False:
        return "inactive"
    return describe_speedup(cell.speedup) if cell.speedup else "n/a"


def has_memory(comparison: Comparison) -> bool:
    """Some file's servers said what they held: the table gets a memory column per file."""
    return any(r.memory is not None and r.memory.has_figures for f in comparison.files for r in f.results.results)


def memory_text(cell: FileCell, results: ResultsFile) -> str:
    """What the cell's server held ('145 MiB'), and a candidate's cost over that file's target alone."""
    row = cell.row
    held = row.memory.total_mib() if row is not None and row.memory is not None else None
    if row is None or held is None:
        return "—"
    if row.role is not Role.SPECULATIVE:
        return mib_text(held)
    cost = cost_of(row, results.baseline_for(row.target, row.concurrency), limit_of(results))
    return f"{mib_text(held)} ({cost.text()})" if cost.extra_mib is not None else mib_text(held)


def change_columns(comparison: Comparison) -> list[tuple[int, int]]:
    """(file, reference) pairs that appear in the table, in a stable order (B vs A, C vs A, C vs B…)."""
    pairs = {(c.index, c.reference) for row in comparison.rows for c in row.changes}
    pairs |= {pair for row in comparison.rows for pair in row.copies}    # "same measurements" is said there
    return sorted(pairs, key=lambda p: (p[1], p[0]))


def table_rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the comparison table (shared by the console and the report)."""
    letters = comparison.letters
    pairs = change_columns(comparison)
    memory = has_memory(comparison)
    header = (["Combination"] + [f"{x} tok/s" for x in letters] + [change_header(i, r, letters) for i, r in pairs]
              + [f"{x} speed-up" for x in letters] + ([f"{x} memory (added)" for x in letters] if memory else []))
    body = []
    for row in comparison.rows:
        cells = [row.title] + [tps_text(c) for c in row.cells]
        for i, ref in pairs:
            c = row.change_for(i)
            cells.append(describe_change(c) if c is not None and c.reference == ref else
                         SAME_MEASUREMENTS if row.copy_of(i, ref) else "—")
        cells += [speedup_text(c) for c in row.cells]
        if memory:
            cells += [memory_text(c, f.results) for c, f in zip(row.cells, comparison.files)]
        body.append(cells)
    return header, body


def ascii_table(header: list[str], body: list[list[str]]) -> list[str]:
    """pyperf's table style: +---+ rules, = under the header."""
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]

    def rule(ch: str) -> str:
        return "+" + "+".join(ch * (w + 2) for w in widths) + "+"

    def line(cells: list[str]) -> str:
        return "|" + "|".join(f" {c:<{w}} " for c, w in zip(cells, widths)) + "|"

    out = [rule("-"), line(header), rule("=")]
    for cells in body:
        out += [line(cells), rule("-")]
    return out


def wrap_names(head: str, names: list[str], width: int = 100) -> list[str]:
    """``head: a, b, c`` over several lines, breaking only between names (a label holds spaces)."""
    lines, current = [], f"  {head}: "
    for i, name in enumerate(names):
        piece = name + (", " if i < len(names) - 1 else "")
        if len(current) + len(piece.rstrip()) > width and current.strip():
            lines.append(current.rstrip())
            current = "    "
        current += piece
    lines.append(current.rstrip())
    return lines


def short_name(match: Match) -> str:
    """A combination without its target's name: 'baseline', '0.5B Q8_0 (k=8)', 'baseline [temperature 0.7]'."""
    if match.role is Role.BASELINE:    # with the axis point its title ends in: "baseline [temperature 0.7]"
        return "baseline" + match.title.partition("(baseline)")[2]
    rest = match.title[len(match.target):].lstrip(" +") if match.title.startswith(match.target) else match.title
    return rest or match.title


def _only_lines(letter: str, matches: tuple[Match, ...]) -> list[str]:
    lines = [f"Only in {letter} ({len(matches)} combination{'s' if len(matches) != 1 else ''}):"]
    for target, group in groupby(matches, key=lambda m: m.target):
        lines += wrap_names(target, [short_name(m) for m in group])
    return lines


BEST_TITLE = "Each file's own verdict, per target (speed-up over that file's own baseline):"


def best_table(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the per-file best-candidate table (shared by the console and the report)."""
    memory = has_memory(comparison)
    header = ["File", "Target", "Baseline tok/s", "Best candidate", "Speed-up", "Acceptance"] + \
        (["Memory added"] if memory else [])
    body = []
    for b in best_per_target(comparison.files):
        if b.baseline_tps is None:
            best = "no baseline measured"
        elif b.best is None:
            best = "none pays"
        else:
            best = b.best + (f" (k={b.draft_max})" if b.draft_max else "")
        body.append([b.letter, b.target, f"{b.baseline_tps:.2f}" if b.baseline_tps else "—", best,
                     describe_speedup(b.speedup) if b.speedup else "—",
                     f"{b.acceptance_rate:.1%}" if b.acceptance_rate is not None else "—"]
                    + ([b.memory or "—"] if memory else []))
    return header, body


def difference_lines(comparison: Comparison) -> list[str]:
    letters = comparison.letters
    measured = [d for d in comparison.differences if d.kind is DiffKind.MEASUREMENT]
    other = [d for d in comparison.differences if d.kind is not DiffKind.MEASUREMENT]
    out = []
    if measured:
        out.append("Warning: the files differ in what was measured — these rows do not compare like for like:")
        out += [f"  - {d.message(letters)}" for d in measured]
    if other:
        out.append("The files also differ in:")
        out += [f"  - {d.message(letters)}" for d in other]
    if not comparison.differences:
        out.append(agreement(comparison))
    return out


def agreement(comparison: Comparison) -> str:
    """What is said when no difference was found: never "every … detail" about a load nobody recorded."""
    unrecorded = [f.letter for f in comparison.files if busy.describe(f.results) is None]
    if not unrecorded:
        return "The files agree in every recorded setting, build and hardware detail, and in the machine's load."
    return ("The files agree in every recorded setting, build and hardware detail; the machine's load was not "
            f"recorded in {', '.join(unrecorded)} (files older than draftbench's load readings), so a busy "
            "machine would not show here.")


def render(comparison: Comparison) -> str:
    """Everything ``sweep.py --compare`` prints."""
    letters = comparison.letters
    out = [f"Comparing {len(comparison.files)} results files (each change is against the first file that has "
           "the combination):"]
    out += [f"  {f.describe()}" for f in comparison.files]
    out.append("")
    out += difference_lines(comparison)
    out.append("")
    if comparison.rows:
        header, body = table_rows(comparison)
        out += ascii_table(header, body)
        if any(c.significant is False for row in comparison.rows for c in row.changes):
            out.append(NOT_SIGNIFICANT_MEANS)
        reasons = no_interval_reasons(comparison)
        if reasons:
            out.append("no CI: significance unknown because " + "; ".join(reasons) + ".")
        unpaired = sorted({c.why_unpaired for row in comparison.rows for c in row.changes
                           if not c.paired and c.ratio.method != "ratio-of-means" and c.why_unpaired and not c.repeated})
        if unpaired:
            out.append("Requests compared unpaired (Welch) because " + "; ".join(unpaired) + ".")
        repeated = [(row.title, c) for row in comparison.rows for c in row.changes if c.repeated]
        copied = [row.title for row in comparison.rows if row.copies]
        if repeated or copied:
            said = ([f"{title}: {c.why_unpaired}" for title, c in repeated]
                    + [f"{title}: {SAME_MEASUREMENTS} (no change to show)" for title in copied])
            more = f"; and {len(said) - 3} more combination(s)" if len(said) > 3 else ""
            out.append("Some files hold the same measurements as an earlier file (a copy of it, or a results file "
                       "resumed from it): a request is measured once, so those are left out of the change — "
                       + "; ".join(said[:3]) + more + ".")
    else:
        out.append("No combination is in more than one file: nothing to compare row by row "
                   "(rows match on target, candidate and settings; check the labels).")
    header, body = best_table(comparison)
    if body:
        out += ["", BEST_TITLE]
        out += ascii_table(header, body)
    for letter, matches in zip(letters, comparison.only_in):
        if matches:
            out.append("")
            out += _only_lines(letter, matches)
    return "\n".join(out)
