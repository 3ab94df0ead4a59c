"""The measurement schedule: which server measures which request, in what order — as pure functions.

The sweep (``sweep/passes.py``), the race (``sweep/race.py``) and the simulator
(``benchmarks/verdicts.py``) all take their order from here, so the simulator measures the design
the sweep runs.

**Blocks.** A candidate's requests are split into blocks, each measured on a server session of its
own: with ``runs`` ≥ 2, block k is repetition k (every prompt once); with one run, the prompts
alternate between two blocks (categories interleaved, so each block covers them). A block never
sends a prompt twice, so a method that remembers answers across requests (``ngram-mod``,
``ngram-cache``, ``ngram-map-*``: ``/slots`` erase does not reset them) always answers a prompt it
has not seen; the warm-up uses a prompt outside the measured set. Two or more sessions per row let
the session-to-session spread be measured (``analysis/replication.py``).

**Designs.** Everything that differs between two server sessions (machine load, clocks, thermal
state) must hit both sides of every comparison:

* ``interleaved`` — for each (candidate, block) a fresh baseline server and the candidate's server
  are up together and requests alternate prompt by prompt in ABBA order (B C, C B, B C, …), so each
  pair is measured seconds apart. Needs memory for both (a CPU or Apple Silicon maps the same GGUF
  once).
* ``bracketed`` — one server at a time: a baseline block before and after every candidate block
  (B C1 B C2 B …, neighbours share the baseline between them); each candidate is compared with
  the mean of the baselines around it.
* ``sequential`` — upstream's order: the baseline once, then each candidate on one server (a
  stateful method still gets a server per block). Drift-prone: kept for parity with upstream.

Passes run block 0 for every candidate, then block 1, …, alternating the candidates' order
(forward, backward) so that a drift over the sweep hits early and late candidates alike. A race
runs the same passes on the candidates still in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum


class Design(str, Enum):
    INTERLEAVED = "interleaved"
    BRACKETED = "bracketed"
    SEQUENTIAL = "sequential"

    @property
    def drift_prone(self) -> bool:
        return self is Design.SEQUENTIAL

    @property
    def label(self) -> str:
        return {Design.INTERLEAVED: "interleaved (baseline and candidate servers up together, requests in ABBA "
                                    "order)",
                Design.BRACKETED: "bracketed (a baseline block before and after every candidate block)",
                Design.SEQUENTIAL: "sequential (upstream's order: the baseline once, then each candidate; "
                                   "drift-prone)"}[self]


DESIGNS = tuple(d.value for d in Design)
# Methods whose state remembers earlier requests' answers on the same server (llama.cpp spec types).
STATEFUL_METHODS = frozenset({"ngram-mod", "ngram-cache", "ngram-map-k", "ngram-map-k4v"})


def is_stateful(methods: Sequence[str]) -> bool:
    """Whether a candidate's method remembers answers across requests on one server."""
    return any(m in STATEFUL_METHODS for m in methods)


class Side(str, Enum):
    BASELINE = "baseline"
    CANDIDATE = "candidate"


class Kind(str, Enum):
    PAIRED = "paired"            # baseline and candidate servers up together
    BASELINE = "baseline"        # a baseline server alone
    CANDIDATE = "candidate"      # a candidate server alone


@dataclass(frozen=True)
class Request:
    side: Side
    run: int
    prompt: int                  # index into the prompt list


@dataclass(frozen=True)
class Step:
    """One or two server sessions and the requests they answer, in order."""

    kind: Kind
    candidate: str | None        # None: a baseline step
    block: int | None            # None: every block on one server (the sequential design)
    requests: tuple[Request, ...]

    @property
    def loads(self) -> int:
        return 2 if self.kind is Kind.PAIRED else 1

    def baseline_alone(self) -> Step:
        """A paired step's baseline side on its own: the target's speed in that block is still measured
        when the candidate beside it cannot run (a broken model, a candidate that failed or stopped)."""
        return Step(Kind.BASELINE, None, self.block, tuple(r for r in self.requests if r.side is Side.BASELINE))


def prompt_order(categories: Sequence[str]) -> list[int]:
    """Prompt indexes with categories interleaved (one of each in turn), so any prefix covers them."""
    queues: dict[str, list[int]] = {}
    for index, category in enumerate(categories):
        queues.setdefault(category, []).append(index)
    order: list[int] = []
    lists = list(queues.values())
    while any(lists):
        order += [q.pop(0) for q in lists if q]
    return order


def blocks(categories: Sequence[str], runs: int, groups: Sequence[str] | None = None) -> list[list[tuple[int, int]]]:
    """(run, prompt index) of every block: a block per repetition, or two halves of the prompts with one run.
    ``groups``: prompts that must share a server, in order (a conversation's turns, the session workload):
    halves split whole groups."""
    order = prompt_order(categories)
    if runs >= 2:
        return [[(run, i) for i in order] for run in range(runs)]
    keys = list(groups) if groups is not None else [str(i) for i in range(len(categories))]
    first_seen = list(dict.fromkeys(keys[i] for i in order))
    if len(first_seen) < 2:
        return [[(0, i) for i in order]]
    half = {key: n % 2 for n, key in enumerate(first_seen)}
    return [[(0, i) for i in order if half[keys[i]] == h] for h in (0, 1)]


def abba(pairs: Sequence[tuple[int, int]]) -> tuple[Request, ...]:
    """Baseline and candidate requests for the same (run, prompt), alternating who goes first."""
    out: list[Request] = []
    for j, (run, prompt) in enumerate(pairs):
        first, second = (Side.BASELINE, Side.CANDIDATE) if j % 2 == 0 else (Side.CANDIDATE, Side.BASELINE)
        out += [Request(first, run, prompt), Request(second, run, prompt)]
    return tuple(out)


def _alone(side: Side, pairs: Sequence[tuple[int, int]]) -> tuple[Request, ...]:
    return tuple(Request(side, run, prompt) for run, prompt in pairs)


def pass_steps(design: Design, block: int, pairs: Sequence[tuple[int, int]], candidates: Sequence[str]) -> list[Step]:
    """The steps of one pass: block ``block`` for every candidate (backward on odd blocks)."""
    names = list(candidates) if block % 2 == 0 else list(reversed(candidates))
    if design is Design.INTERLEAVED:
        return [Step(Kind.PAIRED, name, block, abba(pairs)) for name in names]
    base = Step(Kind.BASELINE, None, block, _alone(Side.BASELINE, pairs))
    out = [base]
    for name in names:
        out += [Step(Kind.CANDIDATE, name, block, _alone(Side.CANDIDATE, pairs)), base]
    return out


def sweep_steps(design: Design, block_pairs: Sequence[Sequence[tuple[int, int]]], candidates: Sequence[str],
                stateful: frozenset[str] = frozenset()) -> list[Step]:
    """Every step of an exhaustive sweep of one target (``stateful``: candidates that need a server per block)."""
    if design is Design.SEQUENTIAL:
        every = sorted(pair for pairs in block_pairs for pair in pairs)   # run after run, prompts in order (upstream)
        out = [Step(Kind.BASELINE, None, None, _alone(Side.BASELINE, every))]
        for name in candidates:
            if name in stateful:
                out += [Step(Kind.CANDIDATE, name, k, _alone(Side.CANDIDATE, pairs)) for k, pairs in enumerate(block_pairs)]
            else:
                out.append(Step(Kind.CANDIDATE, name, None, _alone(Side.CANDIDATE, every)))
        return out
    return [step for k, pairs in enumerate(block_pairs) for step in pass_steps(design, k, pairs, candidates)]


@dataclass(frozen=True)
class Cost:
    """What a schedule costs: server loads, measured requests, and warm-up requests (one per load)."""

    loads: int
    requests: int
    warmups: int


def cost(steps: Sequence[Step], warmup: int = 1) -> Cost:
    loads = sum(s.loads for s in steps)
    return Cost(loads, sum(len(s.requests) for s in steps), loads * warmup)


def confirmation_pairs(block_pairs: Sequence[Sequence[tuple[int, int]]]) -> list[tuple[int, int]]:
    """The confirmation block (``analysis/decision.py``): every prompt once more, as repetition ``runs``
    (new seeds), in the first block's order — fresh requests on fresh servers for the selected candidate."""
    runs = max((run for pairs in block_pairs for run, _ in pairs), default=-1) + 1
    return [(runs, prompt) for prompt in dict.fromkeys(prompt for pairs in block_pairs for _, prompt in pairs)]


def confirmation_steps(design: Design, block: int, pairs: Sequence[tuple[int, int]], name: str) -> list[Step]:
    """The confirmation's steps: as a pass of one candidate; the sequential design measures its own
    baseline block first (so the fresh requests have fresh counterparts)."""
    if design is Design.SEQUENTIAL:
        return [Step(Kind.BASELINE, None, block, _alone(Side.BASELINE, pairs)),
                Step(Kind.CANDIDATE, name, block, _alone(Side.CANDIDATE, pairs))]
    return pass_steps(design, block, pairs, [name])


def block_of(block_pairs: Sequence[Sequence[tuple[int, int]]]) -> dict[tuple[int, int], int]:
    """(run, prompt index) -> its block."""
    return {pair: k for k, pairs in enumerate(block_pairs) for pair in pairs}


def complete_blocks(measured: set[tuple[int, int]], block_pairs: Sequence[Sequence[tuple[int, int]]]) -> set[int]:
    """The blocks every (run, prompt index) of which is in ``measured``."""
    return {k for k, pairs in enumerate(block_pairs) if pairs and all(p in measured for p in pairs)}



# --------------------------------------------------------------------------- stages (sweep/stages.py)

@dataclass(frozen=True)
class StageStep:
    """Servers up together during part of a stage, and the requests they answer in order. ``baseline``: which
    of the stage's baseline servers is up (a slot, numbered from 0 in the stage; None: none); ``compared_with``:
    the baseline slots a candidate's requests are compared with."""

    candidate: str | None
    baseline: int | None
    requests: tuple[Request, ...]
    compared_with: tuple[int, ...] = ()


def stage_steps(design: Design, stage: int, prompts: Sequence[int], run: int,
                candidates: Sequence[str]) -> list[StageStep]:
    """One stage's steps: every candidate measures ``prompts`` once (repetition ``run``), in the design's order,
    the candidates' order reversed on odd stages (a drift over the stage hits early and late ones alike).

    * interleaved: one baseline server for the stage; each candidate's server beside it in turn, requests in
      ABBA order (each candidate request has a baseline request for the same prompt seconds apart, and what
      the stage's baseline server shares cancels between candidates);
    * bracketed: one server at a time, a baseline server before and after every candidate (B C1 B C2 B);
    * sequential: one baseline server, then each candidate (drift-prone: upstream's order).
    """
    names = list(candidates) if stage % 2 == 0 else list(reversed(candidates))
    pairs = [(run, p) for p in prompts]
    if design is Design.INTERLEAVED:
        return [StageStep(name, 0, abba(pairs), (0,)) for name in names]
    base = _alone(Side.BASELINE, pairs)
    cand = _alone(Side.CANDIDATE, pairs)
    steps = [StageStep(None, 0, base)]
    for i, name in enumerate(names):
        if design is Design.BRACKETED:
            steps += [StageStep(name, None, cand, (i, i + 1)), StageStep(None, i + 1, base)]
        else:
            steps.append(StageStep(name, None, cand, (0,)))
    return steps


def stage_cost(steps: Sequence[StageStep], warmup: int = 1) -> Cost:
    """Server loads (each baseline slot once, each candidate step once), measured requests, warm-ups."""
    loads = len({s.baseline for s in steps if s.baseline is not None}) + sum(1 for s in steps if s.candidate)
    return Cost(loads, sum(len(s.requests) for s in steps), loads * warmup)
