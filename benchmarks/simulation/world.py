"""Known truth and a machine that blurs it: the simulated servers a sweep measures.

A :class:`Grid` says what each candidate really does (its speed-up over the target alone, "on
prompts like these": the geometric mean over the population of prompts). Each trial draws, from
it, a :class:`Truth` for the prompts of one sweep: every prompt's difficulty (shared with the
baseline, so pairing cancels it), a speculation effect per prompt shared by the drafts (code drafts
better than prose), each candidate's own effect per prompt — fixed across the runs of that prompt,
so runs of one prompt are correlated — and, for model-free methods, on which prompts they draft at
all (the others are plain decoding: speed-up exactly 1, nothing drafted).

A :class:`Machine` says how requests scatter around that truth: run-to-run noise (optionally
Student-t heavy tails, and outliers slowed by another program), a multiplicative offset per
server session shared by all its requests, and drift over the sweep's wall clock (linear, or a
step at half of the sweep's expected duration). :class:`World` is one sweep on that machine: a
simulated clock, the sessions opened so far, and :class:`SimBackend`, which plugs into the
backend contract (``draftbench.backends.base``), so the sweep's own runner, request records and
analysis measure it.

Counters are consistent with the truth: a verify step costs at least one target step, so a
request's speed-up never exceeds tokens / (tokens − accepted); the bound is the true speed-up
times the candidate's overhead (1 + acceptance × k over its speed-up).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from draftbench.backends.base import Backend, CountsSource, DraftCounts, Launched, LaunchSpec, Server, SpeculationStatus
from draftbench.backends.http.client import StreamedResponse
from draftbench.config.prompts import Prompt
from draftbench.measure.sequential import request_seed

K = 4   # draft tokens per verify step the counters assume (a draft's k)


@dataclass(frozen=True)
class Cand:
    """One candidate's truth. ``drafts_on`` < 1: a model-free method that drafts on that share of
    prompts (its gain there is what makes ``speedup`` the geometric mean over all prompts)."""

    name: str
    speedup: float
    acceptance: float = 0.6
    drafts_on: float = 1.0
    model_free: bool = False
    # its own helper load (a process of its own outside its server's process tree, so the machine's reading
    # counts it as another program's): busy during this share of its requests (1.0: steadily), which then run
    # ``helper_factor`` times their speed and record ``helper_share`` more of the machine as others'. The
    # helper is part of the candidate: ``speedup`` is what a user gets with it (the method's own gain where
    # the helper is idle is ``speedup / helper_factor ** helper_rate``)
    helper_rate: float = 0.0
    helper_factor: float = 1.0
    helper_share: float = 0.30


@dataclass(frozen=True)
class Grid:
    name: str
    candidates: tuple[Cand, ...]
    base_tps: float = 30.0
    prompt_sd: float = 0.10      # a prompt's difficulty: shared with the baseline (pairing cancels it)
    shared_sd: float = 0.0       # a prompt's speculation effect, shared by every draft
    own_sd: float = 0.0          # a candidate's own effect per prompt (runs of one prompt share it)
    hetero: float = 1.0          # run noise × this on the prompts where a model-free method drafts
    category_sd: float = 0.0     # a prompt category's speculation effect, shared by every draft (code drafts better)


@dataclass(frozen=True)
class Machine:
    run_sd: float = 0.03         # log sd between repetitions of one request
    tail_df: float | None = None  # heavy tails: Student-t with this many degrees of freedom (same sd)
    outlier_rate: float = 0.0    # share of requests slowed by another program
    outlier_factor: float = 0.5
    session_sd: float = 0.0      # log sd of a server session's offset, shared by all its requests
    drift: float = 0.0           # relative change of the machine's speed over the sweep's expected duration
    step: bool = False           # the drift comes as one step at half the expected duration (else linear)
    load_s: float = 5.0          # model load per server session
    step_drift: float = 0.0      # besides ``drift``: a step of this size at half the expected duration
    wander_sd: float = 0.0       # and a random walk: log sd of the speed's wander over the expected duration
    # bursts of another program's load (make demo on 2 shared cores, 2026-11-27: 7% of requests at 0.05–0.3×):
    # a request hit runs ``burst_factor`` times its speed and records other programs' CPU share as
    # ``burst_share`` (``quiet_share`` otherwise); without bursts no share is recorded (an older file)
    burst_rate: float = 0.0
    burst_factor: float = 0.15
    burst_share: float = 0.45
    quiet_share: float = 0.02


@dataclass(frozen=True)
class Truth:
    """One trial's truth for the sweep's prompts (indices into its prompt list)."""

    base_tps: tuple[float, ...]                    # the target alone, per prompt
    speedup: dict[str, tuple[float, ...]]          # per candidate, per prompt
    bound: dict[str, tuple[float, ...]]            # tokens / (tokens − accepted), per candidate, per prompt
    acceptance: dict[str, float]
    population: dict[str, float]                   # per candidate: "prompts like these" (this workload's categories)

    def on_prompts(self, name: str, prompts: list[int]) -> float:
        """The geometric-mean speed-up over these prompt indices (one per request measured)."""
        return math.exp(sum(math.log(self.speedup[name][p]) for p in prompts) / len(prompts))


def draw_truth(grid: Grid, n_prompts: int, rng: random.Random, categories: list[str] | None = None) -> Truth:
    difficulty = [rng.gauss(0, grid.prompt_sd) for _ in range(n_prompts)]
    by_category = {c: rng.gauss(0, grid.category_sd) for c in dict.fromkeys(categories or ())}
    shared = [rng.gauss(0, grid.shared_sd) + (by_category[categories[p]] if categories else 0.0)
              for p in range(n_prompts)]
    speedup, bound, acceptance = {}, {}, {}
    for c in grid.candidates:
        own = [rng.gauss(0, grid.own_sd) for _ in range(n_prompts)]
        if c.model_free:
            drafting = max(1, round(c.drafts_on * n_prompts))
            active = set(rng.sample(range(n_prompts), drafting))
            gain = c.speedup ** (1 / c.drafts_on)          # so that the population mean is c.speedup
            s = [gain * math.exp(own[p]) if p in active else 1.0 for p in range(n_prompts)]
            overhead = 1.05                                  # n-gram lookups cost almost nothing
        else:
            s = [c.speedup * math.exp(shared[p] + own[p]) for p in range(n_prompts)]
            overhead = max(1.05, (1 + c.acceptance * K) / c.speedup)
        speedup[c.name] = tuple(s)
        bound[c.name] = tuple(1.0 if c.model_free and x == 1.0 else x * overhead for x in s)
        acceptance[c.name] = c.acceptance
    # "Prompts like these" are prompts of this workload's categories: a category's effect (code drafts better
    # than prose) is a fact of the workload, so the truth holds it, weighted as the prompt set weighs the
    # categories; the per-prompt effects average out over the population of such prompts.
    workload = sum(by_category[categories[p]] for p in range(n_prompts)) / n_prompts if categories else 0.0
    return Truth(tuple(grid.base_tps * math.exp(d) for d in difficulty), speedup, bound, acceptance,
                 {c.name: c.speedup * (1.0 if c.model_free else math.exp(workload)) for c in grid.candidates})


class World:
    """One sweep on the simulated machine: its clock, its sessions, its noise (from ``rng``)."""

    def __init__(self, grid: Grid, machine: Machine, truth: Truth, prompts: list[Prompt], *, seed: int, runs: int,
                 warmup: int, expected_s: float, rng: random.Random):
        self.grid, self.machine, self.truth, self.rng = grid, machine, truth, rng
        self.expected_s = expected_s
        self.now = 0.0
        self.sessions: list[str] = []                     # the candidate (or "" for the target) of each load
        self.requests = 0                                 # measured and warm-up
        self.burst = False                                # the last request was hit by a burst of other load
        self.helper = 0.0                                 # … and the share its candidate's own helper took
        self.helpers = {c.name: c for c in grid.candidates if c.helper_rate > 0}
        # which request a server is asked for, from its seed (as the sweep derives it): warm-ups have run -1
        # (repetition ``runs`` is the confirmation block a sweep measures for its selected candidate)
        self.by_seed = {request_seed(seed, run, i): (run, i) for i in range(len(prompts))
                        for run in range(max(runs + 1, 64))}
        self.by_seed.update({request_seed(seed, -1, i): (-1, i % len(prompts)) for i in range(warmup)})
        self.model_free = {c.name for c in grid.candidates if c.model_free}

    def clock(self) -> float:
        return self.now

    def drift_factor(self, t: float) -> float:
        m = self.machine
        if m.step:
            return 1.0 + m.drift if t >= self.expected_s / 2 else 1.0
        factor = (1.0 + m.drift * t / self.expected_s) * (1.0 + m.step_drift if t >= self.expected_s / 2 else 1.0)
        return factor * math.exp(self._wander(t)) if m.wander_sd else factor

    def _wander(self, t: float) -> float:
        """The random walk's value at ``t`` (times only move forward: a step per request)."""
        last_t, last_w = getattr(self, "_walk", (0.0, 0.0))
        dt = max(0.0, t - last_t)
        w = last_w + self.rng.gauss(0, self.machine.wander_sd * math.sqrt(dt / self.expected_s)) if dt else last_w
        self._walk = (t, w)
        return w

    def open_session(self, candidate: str) -> float:
        """A server load: the session's offset (shared by all its requests)."""
        self.sessions.append(candidate)
        self.now += self.machine.load_s
        return math.exp(self.rng.gauss(0, self.machine.session_sd)) if self.machine.session_sd else 1.0

    def run_noise(self, candidate: str, prompt: int) -> float:
        m = self.machine
        z = self.rng.gauss(0, 1)
        if m.tail_df:
            chi = sum(self.rng.gauss(0, 1) ** 2 for _ in range(int(m.tail_df)))
            z = z / math.sqrt(chi / m.tail_df) * math.sqrt((m.tail_df - 2) / m.tail_df)   # unit variance
        sd = m.run_sd * (self.grid.hetero if candidate in self.model_free
                         and self.truth.bound[candidate][prompt] > 1.0 else 1.0)
        factor = math.exp(sd * z)
        if m.outlier_rate and self.rng.random() < m.outlier_rate:
            factor *= m.outlier_factor
        self.burst = bool(m.burst_rate) and self.rng.random() < m.burst_rate
        if self.burst:
            factor *= m.burst_factor
        return factor * self._helper(candidate)

    def _helper(self, candidate: str) -> float:
        """The candidate's own helper load on this request: its speed factor (the share it took: ``helper``).
        A steady helper (rate 1) draws nothing, so a sweep with it sees the same noise as one without."""
        own = self.helpers.get(candidate)
        hit = own is not None and (own.helper_rate >= 1.0 or self.rng.random() < own.helper_rate)
        self.helper = own.helper_share if own is not None and hit else 0.0
        if own is None:
            return 1.0
        return (own.helper_factor if hit else 1.0) / own.helper_factor ** own.helper_rate


class SimServer(Server):
    """A server session of the simulated machine: answers at the truth's speed times the session's
    offset, the drift at that moment and the run's noise; the clock advances by each answer."""

    def __init__(self, spec: LaunchSpec, world: World, candidate: str):
        super().__init__("http://sim", model=spec.target,
                         launched=Launched(command=["sim-server", candidate or "(target alone)"], port=spec.port,
                                           version="sim", load_time_s=world.machine.load_s))
        self.world, self.candidate = world, candidate
        self.offset = world.open_session(candidate)
        self.last: tuple[int, int] | None = None

    def send(self, body: dict, *, request_timeout_s: float, stall_timeout_s: float) -> StreamedResponse:
        world = self.world
        run, prompt = world.by_seed[body["seed"]]
        self.last = (run, prompt)
        tps = world.truth.base_tps[prompt] * self.offset * world.drift_factor(world.now)
        if self.candidate:
            tps *= world.truth.speedup[self.candidate][prompt]
        tps *= world.run_noise(self.candidate, prompt)
        n = body["max_tokens"]
        start = world.now
        first = start + 0.05 / self.offset
        last = first + (n - 1) / tps
        world.now = last + 0.001
        world.requests += 1
        return StreamedResponse(t_start=start, t_first=first, t_last=last, t_end=world.now,
                                text=f"answer {prompt} {run}", usage={"completion_tokens": n, "prompt_tokens": 20},
                                finish_reason="length")

    def machine_reading(self) -> None:
        return None               # the simulated machine's load is the world's, never this one's

    def others_share(self, first) -> float | None:
        m, world = self.world.machine, self.world
        if not m.burst_rate and not world.helpers:
            return None
        return min(1.0, (m.burst_share if world.burst else m.quiet_share) + world.helper)

    def draft_counts(self, response: StreamedResponse, before) -> DraftCounts:
        if not self.candidate or self.last is None:
            return DraftCounts()
        n = response.completion_tokens or 0
        bound = self.world.truth.bound[self.candidate][self.last[1]]
        accepted = round(n * (1 - 1 / bound))
        if bound == 1.0:
            return DraftCounts(drafted=0, accepted=0, steps=0, source=CountsSource.TIMINGS)
        steps = n - accepted
        drafted = max(accepted, round(accepted / max(1e-6, self.world.truth.acceptance[self.candidate])))
        return DraftCounts(drafted=drafted, accepted=accepted, steps=steps, source=CountsSource.TIMINGS)

    def speculation_status(self, requested: bool) -> SpeculationStatus:
        return SpeculationStatus(requested, "")

    def stop(self) -> None:
        pass


@dataclass
class SimBackend(Backend):
    """The backend contract over a :class:`World`: every launch is a new session of its machine."""

    world: World
    names: dict[tuple, str] = field(default_factory=dict)      # (draft path, method) -> candidate name

    name = "sim"
    config_name = "llamacpp"
    owns_port = False

    def model_problem(self, ref: str):
        return None

    def size_label(self, ref: str) -> str | None:
        return None

    def launch(self, spec: LaunchSpec) -> SimServer:
        candidate = self.names[(spec.draft, tuple(spec.method))] if (spec.draft or spec.method) else ""
        return SimServer(spec, self.world, candidate)
