"""The measurement schedule: which server measures which request, in what order — as pure functions.

The sweep's stages (``sweep/run.py``) and so the simulator (``benchmarks/verdicts.py``, which
runs the sweep) take their order from here.

**Stages.** Every stage measures its prompts (``sweep/stage_plan.py``: fresh ones, or the whole set
when it is small) once for every candidate still in, on servers started for that stage. A candidate's
server never gets a prompt twice, so a method that remembers answers across requests (``ngram-mod``,
``ngram-cache``, ``ngram-map-*``: ``/slots`` erase does not reset them) always answers a prompt it
has not seen; the warm-up uses a prompt outside the measured set.

**Designs.** Everything that differs between two server sessions (machine load, clocks, thermal
state) must hit both sides of every comparison:

* ``interleaved`` — one baseline server for the stage and each candidate's server beside it in turn;
  requests alternate prompt by prompt in ABBA order (B C, C B, B C, …), so each pair is measured
  seconds apart, and what the stage's baseline server shares cancels between candidates. Needs memory
  for both servers (a CPU or Apple Silicon maps the same GGUF once).
* ``bracketed`` — one server at a time: a baseline server before and after every candidate's
  (B C1 B C2 B …, neighbours share the baseline between them); each candidate is compared with the
  mean of the baselines around it.
* ``sequential`` — upstream's order within a stage: the baseline, then each candidate. Drift-prone.

The candidates' order alternates from stage to stage (forward, backward), so that a drift over the
sweep hits early and late candidates alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
        return {Design.INTERLEAVED: "interleaved (a baseline server per stage, each candidate's server beside it "
                                    "in turn, requests in ABBA order)",
                Design.BRACKETED: "bracketed (a baseline server before and after every candidate's)",
                Design.SEQUENTIAL: "sequential (upstream's order: the baseline, then each candidate; "
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


@dataclass(frozen=True)
class Request:
    side: Side
    run: int
    prompt: int                  # index into the prompt list


def abba(pairs: Sequence[tuple[int, int]]) -> tuple[Request, ...]:
    """Baseline and candidate requests for the same (run, prompt), alternating who goes first."""
    out: list[Request] = []
    for j, (run, prompt) in enumerate(pairs):
        first, second = (Side.BASELINE, Side.CANDIDATE) if j % 2 == 0 else (Side.CANDIDATE, Side.BASELINE)
        out += [Request(first, run, prompt), Request(second, run, prompt)]
    return tuple(out)


def _alone(side: Side, pairs: Sequence[tuple[int, int]]) -> tuple[Request, ...]:
    return tuple(Request(side, run, prompt) for run, prompt in pairs)


@dataclass(frozen=True)
class Cost:
    """What a schedule costs: server loads, measured requests, and warm-up requests (one per load)."""

    loads: int
    requests: int
    warmups: int


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


def stage_steps(design: Design, stage: int, prompts: Sequence[int], run: int, candidates: Sequence[str],
                owed: Mapping[str, Sequence[int]] | None = None) -> list[StageStep]:
    """One stage's steps: every candidate measures ``prompts`` once (repetition ``run``), in the design's order,
    the candidates' order reversed on odd stages (a drift over the stage hits early and late ones alike).
    ``owed``: the prompts each candidate still owes the stage (a stage a stop cut: only the rest is measured,
    in the stage's order; the baseline servers measure what the candidates beside or around them owe).

    * interleaved: one baseline server for the stage; each candidate's server beside it in turn, requests in
      ABBA order (each candidate request has a baseline request for the same prompt seconds apart, and what
      the stage's baseline server shares cancels between candidates);
    * bracketed: one server at a time, a baseline server before and after every candidate (B C1 B C2 B);
    * sequential: one baseline server, then each candidate (drift-prone: upstream's order).
    """
    names = list(candidates) if stage % 2 == 0 else list(reversed(candidates))

    def pairs_of(name: str | None) -> list[tuple[int, int]]:
        wanted = set(prompts) if owed is None else \
            {p for n in ([name] if name is not None else names) for p in owed.get(n, prompts)}
        return [(run, p) for p in prompts if p in wanted]
    if not names:                       # a target without candidates: its baseline alone, every prompt
        return [StageStep(None, 0, _alone(Side.BASELINE, [(run, p) for p in prompts]))]
    if design is Design.INTERLEAVED:
        return [StageStep(name, 0, abba(pairs_of(name)), (0,)) for name in names]
    steps = [StageStep(None, 0, _alone(Side.BASELINE, pairs_of(None) if design is Design.SEQUENTIAL
                                       else pairs_of(names[0])))]
    for i, name in enumerate(names):
        cand = _alone(Side.CANDIDATE, pairs_of(name))
        if design is Design.BRACKETED:
            after = sorted(set(pairs_of(name)) | set(pairs_of(names[i + 1]) if i + 1 < len(names) else ()),
                           key=lambda pair: list(prompts).index(pair[1]))
            steps += [StageStep(name, None, cand, (i, i + 1)), StageStep(None, i + 1, _alone(Side.BASELINE, after))]
        else:
            steps.append(StageStep(name, None, cand, (0,)))
    return steps


def stage_cost(steps: Sequence[StageStep], warmup: int = 1) -> Cost:
    """Server loads (each baseline slot once, each candidate step once), measured requests, warm-ups."""
    loads = len({s.baseline for s in steps if s.baseline is not None}) + sum(1 for s in steps if s.candidate)
    return Cost(loads, sum(len(s.requests) for s in steps), loads * warmup)
