"""The machine's session spread, measured from the stages — with the degrees of freedom it really has.

One target's stages form a table: a row per candidate (its stage means against the target alone), a column per
stage. Everything a stage's candidates share — its baseline server's offset, its prompts' effect on every
draft — moves a whole column; a candidate's own server moves one cell. So, with R candidates and K stages,

    MS_stage = R·Σ_k (column mean − grand)² / (K − 1)                   (K − 1 degrees of freedom)
    MS_res   = Σ (cell − row − column + grand)² / ((R − 1)(K − 1))      ((R − 1)(K − 1) of them)

and the variance of one cell — what one more stage adds to a candidate's comparison with the target alone — is

    v = MS_stage / R + (1 − 1/R) · MS_res

an average of two independent mean squares with positive weights: never negative, with Satterthwaite's degrees
of freedom. They are about 2·(K − 1), not R·(K − 1): the candidates' comparisons share their column, and only
more stages (or more targets) replicate a column. The server pair's offset τ² (the *pair* spread) is v less the
prompts' part (the within-stage spread over the stage's prompts), by difference: where the difference is
below :data:`FLOOR_SE` of its own standard error τ² is taken at that value, and keeps the uncertainty of the
difference (:attr:`SessionVariance.uncertainty`), so no spread is ever 0, nor has full degrees of freedom where
it was not measured. Two candidates of one stage differ by 2·(their own servers'
offsets) — MS_res less the prompts' part that is not shared (the *between* spread). And the share of v the
column holds is the correlation between two candidates' comparisons with the target alone (:attr:`Spread.
correlation`): what lets their bounds be held together by Dunnett's rule instead of a union bound.

Only *fresh* stages enter (no prompt measured before by that comparison): past the prompt set (``--more``)
stages repeat prompts, whose effects then repeat too; the spread stays the one measured on the fresh stages.
A prompt set measured whole at every stage (too small for fresh ones) gives the same table on the prompts every
stage measured, its prompts' part the two-way residual (prompts × stages). Several targets pool their estimates,
weighted by their stages. Before any comparison has two stages, a 5% pair spread is assumed.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .replication import SessionVariance
from .stage_evidence import Series, StageSample, crossed, fresh, two_way_residual, within_spread

# Before the machine's session spread can be measured (no comparison has two stages yet), a server pair's
# offset is taken to be 5% (log sd, both servers' share): the top of what shared machines show.
ASSUMED_PAIR_SD = 0.05
ASSUMED = SessionVariance(ASSUMED_PAIR_SD ** 2, math.inf)
CORRELATION_STEP = 0.1      # the correlation used is the estimate rounded down to this, less one step
# A component measured below √(2/π) of its estimate's standard error is taken at that value: the mean of that
# estimate's distribution cut at 0 — what a spread measured at 0 may be. Kept at 0, a comparison much steadier
# than the table it was measured in (a draft model's −40%, measured to ±0.8%, beside a noisy n-gram method)
# carried the table's uncertainty against nothing of its own: 0.2 degrees of freedom, an interval from 0 to
# infinity, and a target that could never be shown to gain nothing (make demo, 2026-11-30, 241M).
FLOOR_SE = math.sqrt(2 / math.pi)


@dataclass(frozen=True)
class Spread:
    """The machine's session spread at a look: of one candidate's stage mean against the target alone
    (``pair``), of one stage's difference between two candidates (``between``), and the correlation of two
    candidates' comparisons with the target alone (their shared baseline server and prompts; 0 = not used)."""

    pair: SessionVariance
    between: SessionVariance
    correlation: float = 0.0


ASSUMED_SPREAD = Spread(ASSUMED, SessionVariance(2 * ASSUMED.variance, math.inf))


@dataclass(frozen=True)
class _Part:
    """One target's estimate of a component: its value (not truncated), the variance of that estimate, and the
    stages behind it (its weight in the pool)."""

    value: float
    uncertainty: float
    weight: float


@dataclass(frozen=True)
class _Row:
    cells: dict[int, tuple[float, int]]      # stage → (mean, prompts)
    noise: float                             # the prompts' part of one prompt's value (within-stage spread)
    noise_df: float
    stages: tuple[StageSample, ...]


def _row(series: Series) -> _Row | None:
    """A comparison's cells: fresh stages' means and their within-stage spread; for a prompt set measured whole at
    every stage, the means over the prompts every stage measured and the two-way residual."""
    first = fresh(series)
    if len(first) >= 2:
        within, df = within_spread(first)
        return _Row({s.stage: (s.mean, s.n) for s in first}, within, df, first) if df > 0 else None
    if len(series) < 2 or not crossed(series):
        return None
    common = set.intersection(*(set(s.prompts) for s in series))
    residual = two_way_residual(series)
    if residual is None:
        return None
    cells = {s.stage: (statistics.fmean(v for p, v in zip(s.prompts, s.values) if p in common), len(common))
             for s in series}
    return _Row(cells, residual[0], residual[1], tuple(series))


@dataclass(frozen=True)
class _Table:
    rows: list[_Row]
    stages: list[int]

    def means(self) -> list[list[float]]:
        return [[r.cells[k][0] for k in self.stages] for r in self.rows]

    @property
    def size(self) -> float:
        """The stages' prompts, harmonic mean over the cells."""
        sizes = [r.cells[k][1] for r in self.rows for k in self.stages]
        return len(sizes) / sum(1.0 / n for n in sizes)


def _tables(rows: Sequence[_Row]) -> list[_Table]:
    """Complete sub-tables: for each k, the largest group of rows sharing their first k stages."""
    out = []
    for k in range(2, max((len(r.cells) for r in rows), default=0) + 1):
        groups: dict[tuple[int, ...], list[_Row]] = {}
        for r in rows:
            stages = tuple(sorted(r.cells))[:k]
            if len(stages) == k:
                groups.setdefault(stages, []).append(r)
        stages, members = max(groups.items(), key=lambda g: len(g[1]))
        out.append(_Table(members, list(stages)))
    return out


def _cell_variance(table: _Table) -> tuple[float, float, float, float, float]:
    """(v, its variance, MS_res, its df, the column's share of v)."""
    means = table.means()
    r_n, k_n = len(means), len(table.stages)
    grand = statistics.fmean(m for row in means for m in row)
    cols = [statistics.fmean(row[k] for row in means) for k in range(k_n)]
    ms_stage = r_n * sum((c - grand) ** 2 for c in cols) / (k_n - 1)
    if r_n < 2:
        return ms_stage, 2 * ms_stage ** 2 / (k_n - 1), 0.0, 0.0, 0.0
    rows = [statistics.fmean(row) for row in means]
    df_res = (r_n - 1) * (k_n - 1)
    ms_res = sum((means[r][k] - rows[r] - cols[k] + grand) ** 2 for r in range(r_n) for k in range(k_n)) / df_res
    v = ms_stage / r_n + (1 - 1 / r_n) * ms_res
    uncertainty = 2 * (ms_stage / r_n) ** 2 / (k_n - 1) + 2 * ((1 - 1 / r_n) * ms_res) ** 2 / df_res
    column = (ms_stage - ms_res) / r_n / v if v > 0 else 0.0
    return v, uncertainty, ms_res, float(df_res), column


def _own_noise(table: _Table) -> tuple[float, float] | None:
    """The prompts' part that the stage's candidates do not share: the residual of prompts × candidates within each
    stage, pooled over the stages (per prompt), and its degrees of freedom."""
    ss, df = 0.0, 0
    for k in table.stages:
        found = [dict(zip(s.prompts, s.values)) for r in table.rows for s in r.stages if s.stage == k]
        common = sorted(set.intersection(*(set(f) for f in found))) if found else []
        if len(found) < 2 or len(common) < 2:
            continue
        grid = [[f[p] for p in common] for f in found]
        grand = statistics.fmean(x for row in grid for x in row)
        rows = [statistics.fmean(row) for row in grid]
        cols = [statistics.fmean(row[j] for row in grid) for j in range(len(common))]
        ss += sum((grid[i][j] - rows[i] - cols[j] + grand) ** 2 for i in range(len(grid)) for j in range(len(common)))
        df += (len(grid) - 1) * (len(common) - 1)
    return (ss / df, float(df)) if df else None


@dataclass(frozen=True)
class _TargetSpread:
    pair: _Part
    between: _Part | None
    correlation: float | None


def _target(comparisons: Iterable[Series]) -> _TargetSpread | None:
    """One target's spread from its best table (the most degrees of freedom for v)."""
    rows = [r for s in comparisons if (r := _row(s)) is not None]
    best: tuple[float, _Table, tuple] | None = None
    for table in _tables(rows):
        found = _cell_variance(table)
        df = 2 * found[0] ** 2 / found[1] if found[1] > 0 else math.inf
        if best is None or df > best[0]:
            best = (df, table, found)
    if best is None or len(best[1].rows) * (len(best[1].stages) - 1) < 2:
        return None             # one comparison's two stages: one degree of freedom — the assumed spread stays
    _, table, (v, v_unc, ms_res, df_res, column) = best
    size = table.size
    noise = statistics.fmean(r.noise for r in table.rows) / size
    weight = len(table.stages) - 1.0
    # The uncertainty kept is v's alone: a comparison's estimate adds back its own prompts' part (whose spread it
    # counts with its own degrees of freedom) for the average part subtracted here, so the two nearly cancel.
    pair = _Part(v - noise, v_unc, weight)
    own = _own_noise(table) if len(table.rows) >= 2 else None
    between = None
    if own is not None and df_res > 0:
        between = _Part(2 * (ms_res - own[0] / size), 4 * 2 * ms_res ** 2 / df_res, weight)
    return _TargetSpread(pair, between, column if len(table.rows) >= 2 else None)


def _target_of(target: str, comparisons: Sequence[Series],
               known: dict[str, tuple[tuple[Series, ...], _TargetSpread | None]] | None) -> _TargetSpread | None:
    if known is None:
        return _target(comparisons)
    key = tuple(comparisons)
    if target not in known or known[target][0] != key:
        known[target] = (key, _target(comparisons))
    return known[target][1]


def _pooled(parts: Sequence[_Part]) -> SessionVariance:
    """Targets' estimates pooled by their stages, with the uncertainty of the estimate; never taken below
    :data:`FLOOR_SE` of its own standard error (see there)."""
    total = sum(p.weight for p in parts)
    value = sum(p.value * p.weight for p in parts) / total
    uncertainty = sum(p.uncertainty * p.weight ** 2 for p in parts) / total ** 2
    kept = max(0.0, value, FLOOR_SE * math.sqrt(uncertainty))
    df = 2 * kept ** 2 / uncertainty if uncertainty > 0 else math.inf
    return SessionVariance(kept, df, uncertainty)


def conservative(correlation: float) -> float:
    """The correlation a decision uses: the estimate rounded down to a tenth, less a tenth, within [0, 0.8] — an
    overestimate would hold the candidates' bounds together less tightly than promised."""
    step = CORRELATION_STEP
    return min(0.8, max(0.0, math.floor(correlation / step) * step - step))


def spread_of(by_target: Mapping[str, Sequence[Series]],
              known: dict[str, tuple[tuple[Series, ...], _TargetSpread | None]] | None = None) -> Spread:
    """The pooled spread of every target's stages (the assumed one while no comparison has two fresh stages);
    ``known``: each target's spread as last computed, on which stages (a target whose stages are the same is not
    computed again, and what is computed is kept there)."""
    found = [t for target, s in by_target.items() if (t := _target_of(target, s, known)) is not None]
    if not found:
        return ASSUMED_SPREAD
    pair = _pooled([t.pair for t in found])
    betweens = [t.between for t in found if t.between is not None]
    between = _pooled(betweens) if betweens else SessionVariance(
        2 * pair.variance, pair.df, 4 * pair.uncertainty if pair.uncertainty is not None else None)
    weights = [(t.correlation, t.pair.weight) for t in found if t.correlation is not None]
    correlation = sum(c * w for c, w in weights) / sum(w for _, w in weights) if weights else 0.0
    return Spread(pair, between, conservative(correlation))


@dataclass(frozen=True)
class _Group:
    """One target's comparisons with stages and the sessions their stages started in; ``source``: the mapping
    they were read from (a sweep's look passes the same mapping again for a target that did not change)."""

    series: tuple[Series, ...]
    orders: frozenset[int]
    source: object

    def by(self, cut: int) -> tuple[Series, ...]:
        """Its comparisons as they stood after session ``cut`` (those with no stage by then left out)."""
        if max(self.orders) <= cut:
            return self.series
        return tuple(known for series in self.series if (known := tuple(s for s in series if s.order <= cut)))


def _grouped(by_target: Mapping[str, Mapping[str, Series]], before: Mapping[str, _Group]) -> dict[str, _Group]:
    """Each target's comparisons with stages; a target given the same mapping as ``before`` keeps its group (a
    sweep's look changes one target: the others cost a comparison of references)."""
    out = {}
    for target, comparisons in by_target.items():
        old = before.get(target)
        if old is not None and old.source is comparisons:
            out[target] = old
        elif found := tuple(s for s in comparisons.values() if s):
            out[target] = _Group(found, frozenset(s.order for series in found for s in series), comparisons)
    return out


def _orders(groups: Mapping[str, _Group], before: Mapping[str, _Group], orders: list[int]) -> list[int]:
    """Every session with a stage, in order: ``orders`` (those of ``before``) with the new ones added where no
    session of ``before`` went away, else read afresh."""
    if all(target in groups and (groups[target] is old or old.orders <= groups[target].orders)
           for target, old in before.items()):
        known = set(orders)
        added = {o for target, g in groups.items() if g is not before.get(target) for o in g.orders if o not in known}
        return sorted(orders + list(added)) if added else orders
    return sorted(frozenset().union(*(g.orders for g in groups.values())))


class MachineSpread:
    """The session spread pooled over every comparison a sweep measured, as it stood after any server session:
    ``at(order)`` uses only stages whose servers started by session ``order`` — what the sweep knew at that look —
    so a look replayed from the file decides as it did live. ``comparisons``: each (target, candidate)'s stages
    against the target alone."""

    def __init__(self, comparisons: Mapping[tuple[str, str], Series]):
        by_target: dict[str, dict[str, Series]] = {}
        for (target, name), series in comparisons.items():
            by_target.setdefault(target, {})[name] = series
        self._groups = _grouped(by_target, {})
        self._orders = _orders(self._groups, {}, [])
        self._cache: dict[int, Spread] = {}
        # each target's spread on the stages it was last computed on: a look's new cut recomputes only the targets
        # whose stages it changes (a sweep's finished targets keep theirs)
        self._targets: dict[str, tuple[tuple[Series, ...], _TargetSpread | None]] = {}

    def grown(self, by_target: Mapping[str, Mapping[str, Series]]) -> MachineSpread:
        """The spread over ``by_target`` (per target, each candidate's stages), which a sweep grew from this one's by
        stages measured after it (the sweep's next look; a target whose mapping is the same object is taken as
        unchanged): what :meth:`at` said of the sessions this one knew is kept, not computed again, where those
        sessions' stages are the same; anything else is computed afresh — the numbers are those of a spread built
        at once."""
        new = MachineSpread({})
        new._groups = _grouped(by_target, self._groups)
        new._orders = _orders(new._groups, self._groups, self._orders)
        new._targets = self._targets
        if self._cache:
            last = max(self._cache)
            old, now = self._groups, new._groups
            if all(old.get(t) is now.get(t) or _by(old.get(t), last) == _by(now.get(t), last)
                   for t in set(old) | set(now)):
                new._cache = dict(self._cache)      # every cut it knew is one of the new orders
        return new

    def at(self, order: int | None = None) -> Spread:
        """The pooled spread from the stages measured by session ``order`` (None: all)."""
        if not self._orders:
            return ASSUMED_SPREAD
        index = len(self._orders) - 1 if order is None else bisect.bisect_right(self._orders, order) - 1
        if index < 0:
            return ASSUMED_SPREAD
        cut = self._orders[index]
        if cut not in self._cache:
            by_target = {target: known for target, group in self._groups.items() if (known := group.by(cut))}
            self._cache[cut] = spread_of(by_target, self._targets)
        return self._cache[cut]


def _by(group: _Group | None, cut: int) -> tuple[Series, ...]:
    return group.by(cut) if group is not None else ()
